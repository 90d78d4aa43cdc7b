/* err.c - filling and formatting md_err values. */
#include <stdio.h>
#include <string.h>
#include "util.h"

int md_err_set(md_err *err, int code, int64_t offset, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    err->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void md_err_file(md_err *err, const char *file)
{
    if (err && file)
        snprintf(err->file, sizeof err->file, "%s", file);
}

const char *md_err_format(const md_err *err, char *buf, size_t n)
{
    if (!err) {
        snprintf(buf, n, "unknown error");
    } else if (err->file[0] && err->offset >= 0) {
        snprintf(buf, n, "%s: byte %lld: %s", err->file,
                 (long long)err->offset, err->msg);
    } else if (err->file[0]) {
        snprintf(buf, n, "%s: %s", err->file, err->msg);
    } else {
        snprintf(buf, n, "%s", err->msg);
    }
    return buf;
}
