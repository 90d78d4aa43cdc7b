/* testutil.h - shared helpers for the cmocka unit tests. Test data lives in
 * tests/data (real H200 snapshots in seed-exercise/, synthetic schema
 * variants in synthetic/ from tests/gen/make_synthetic.py). */
#ifndef MD_TESTUTIL_H
#define MD_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>
#include "memdiag.h"

static inline const char *data_path(const char *rel, char *buf, size_t n)
{
    const char *root = getenv("MD_TEST_DATA");
    snprintf(buf, n, "%s/%s", root ? root : "tests/data", rel);
    return buf;
}

/* Whole file into memory (malloc'd); NULL on failure. */
static inline unsigned char *slurp(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* Writes data[0..n) to path (replacing it). */
static inline void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static inline md_snapshot *load_ok(const char *rel)
{
    char p[1024];
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    int rc = md_snapshot_load(data_path(rel, p, sizeof p), &s, &e);
    if (rc) {
        char buf[1024];
        print_error("load %s: %s\n", rel, md_err_format(&e, buf, sizeof buf));
    }
    assert_int_equal(rc, MD_OK);
    return s;
}

/* The replay of device d, which must succeed. */
static inline md_replay *replay_ok(const md_snapshot *s, int d)
{
    md_replay *r = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    int rc = md_replay_run(s, d, &r, &e);
    if (rc) {
        char buf[1024];
        print_error("replay device %d: %s\n", d, md_err_format(&e, buf, sizeof buf));
    }
    assert_int_equal(rc, MD_OK);
    return r;
}

/* Loads bytes that must be refused; returns the error. */
static inline md_err load_bad(const void *data, size_t n)
{
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    int rc = md_snapshot_load_mem(data, n, "bad.pickle", &s, &e);
    assert_int_not_equal(rc, MD_OK);
    assert_null(s);
    assert_int_equal(rc, e.code);
    assert_true(e.msg[0] != 0);
    return e;
}

/* Calls fn on every snapshot file under dir (its subdirectories too): the
 * *.pickle* files, and everything in the synthetic, fuzz-regress and
 * adversarial directories (their hostile inputs); returns how many. */
static inline size_t each_snapshot(const char *dir, void (*fn)(const char *path, void *ctx),
                                   void *ctx)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    size_t n = 0;
    while ((de = readdir(d)) != NULL) {
        char path[1024];
        struct stat st;
        if (de->d_name[0] == '.')
            continue;
        int len = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        assert_true(len > 0 && (size_t)len < sizeof path);
        assert_int_equal(stat(path, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            n += each_snapshot(path, fn, ctx);
        } else if (strstr(de->d_name, ".pickle") || strstr(dir, "synthetic") ||
                   strstr(dir, "fuzz-regress") || strstr(dir, "adversarial")) {
            fn(path, ctx);
            n++;
        }
    }
    closedir(d);
    return n;
}

#endif
