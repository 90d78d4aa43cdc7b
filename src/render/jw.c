/* jw.c - a minimal streaming JSON writer (jw.h). */
#include <math.h>
#include <string.h>
#include "jw.h"

void md_jw_init(md_jw *w, FILE *o)
{
    memset(w, 0, sizeof *w);
    w->o = o;
}

/* Prefix of any value or key: a comma unless first at this depth or
 * right after a key. */
static void jw_prefix(md_jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->started[w->depth])
        fputc(',', w->o);
    w->started[w->depth] = 1;
}

static void jw_str_raw(md_jw *w, const char *s)
{
    fputc('"', w->o);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(w->o, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(w->o, "\\u%04x", *p);
        else
            fputc(*p, w->o);
    }
    fputc('"', w->o);
}

void md_jw_key(md_jw *w, const char *k)
{
    jw_prefix(w);
    jw_str_raw(w, k);
    fputc(':', w->o);
    w->after_key = 1;
}

void md_jw_open(md_jw *w, int c)
{
    jw_prefix(w);
    fputc(c, w->o);
    if (w->depth < 63)
        w->depth++;
    w->started[w->depth] = 0;
}

void md_jw_close(md_jw *w, int c)
{
    fputc(c, w->o);
    if (w->depth > 0)
        w->depth--;
}

void md_jw_str(md_jw *w, const char *s)
{
    jw_prefix(w);
    jw_str_raw(w, s);
}

void md_jw_num(md_jw *w, double v)
{
    jw_prefix(w);
    if (isfinite(v))
        fprintf(w->o, "%.6g", v);
    else
        fputs("null", w->o);
}

void md_jw_mib(md_jw *w, double v)
{
    jw_prefix(w);
    fprintf(w->o, "%.4f", isfinite(v) ? v : 0.0);
}

void md_jw_int(md_jw *w, long long v)
{
    jw_prefix(w);
    fprintf(w->o, "%lld", v);
}

void md_jw_null(md_jw *w)
{
    jw_prefix(w);
    fputs("null", w->o);
}

void md_jw_bool(md_jw *w, int v)
{
    jw_prefix(w);
    fputs(v ? "true" : "false", w->o);
}

