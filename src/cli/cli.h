/* cli.h - the memdiag command line: the only code that prints to the
 * user's terminal or exits. */
#ifndef MD_CLI_H
#define MD_CLI_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include "memdiag.h"

#define EXIT_USAGE 2 /* unusable input or arguments */
/* malloc's: mmap'd from here up (main.c); what it pads the heap by (glibc's default) */
#define CLI_MMAP_THRESHOLD (1 << 20)
#define CLI_TOP_PAD (128 << 10)

/* One line on stderr: "memdiag: <what>". */
void cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_fail_err(const md_err *err);
/* s as a number lo..hi for option opt: 0, or -1 after one error line. */
int cli_number(const char *opt, const char *s, long lo, long hi, long *out);
/* s as a JSON string literal. */
void cli_json_string(FILE *f, const char *s);

/* Expands files and directories into snapshot paths (sorted by rank).
 * Returns 0, or prints one error line and returns EXIT_USAGE. */
int cli_expand_paths(char **args, int n, char ***out, size_t *nout);
void cli_free_paths(char **paths, size_t n);
/* What a path holds, by its first bytes: a seed-script JSON report, a
 * memdiag capture file (else it is read as a snapshot). */
int cli_is_seed_report(const char *path);
int cli_is_capture(const char *path);
/* Device d holds data worth a rank: history (traces != 0) or, for a
 * snapshot without history, segments. */
int cli_device_has_data(const md_snapshot *s, int d, int traces);

/* The first of patterns ("%s/../python": %s is this executable's
 * directory) under which `inside` exists, resolved into out; -1 if none. */
int cli_find_beside_exe(const char *const *patterns, int n, const char *inside,
                        char out[PATH_MAX]);
/* memdiag's Python glue (a checkout's python/ or an install's). */
int cli_find_python(char out[PATH_MAX]);

/* Writes path through write(f, arg) (0 on success), into a temporary file
 * renamed into place; an existing file only with force. Returns 0, or
 * EXIT_USAGE after one error line. */
int cli_write_file(const char *path, int force, int (*write)(FILE *, void *), void *arg);

int cmd_summary(int argc, char **argv, int diagnose);
int cmd_diff(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_probe(int argc, char **argv);

#endif
