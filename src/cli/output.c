/* output.c - writing a page or a file the user named: never over an
 * existing file without --force, and through a temporary file renamed into
 * place, so that a failed write leaves no file that looks complete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

int cli_write_file(const char *path, int force, int (*write)(FILE *, void *), void *arg)
{
    if (!force && access(path, F_OK) == 0) {
        cli_fail("%s exists; pass --force to replace it", path);
        return EXIT_USAGE;
    }
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        cli_fail("%s: cannot write: %s", tmp, strerror(errno));
        return EXIT_USAGE;
    }
    errno = 0;
    int rc = write(f, arg);
    int e = errno;
    if (fclose(f) || rc || rename(tmp, path)) {
        e = e ? e : errno;
        cli_fail("%s: cannot write%s%s", path, e ? ": " : " (out of memory)", e ? strerror(e) : "");
        unlink(tmp);
        return EXIT_USAGE;
    }
    return 0;
}
