/* jw.h - a minimal streaming JSON writer for the renderers: values are
 * written as they come, with the commas and nesting kept per depth. */
#ifndef MD_JW_H
#define MD_JW_H

#include <stdio.h>

typedef struct md_jw {
    FILE *o;
    int depth;
    int after_key;
    unsigned char started[64]; /* per depth: whether a comma is due */
} md_jw;

/* A writer of one document to o. */
void md_jw_init(md_jw *w, FILE *o);
void md_jw_key(md_jw *w, const char *k);
void md_jw_open(md_jw *w, int c);  /* '{' or '[' */
void md_jw_close(md_jw *w, int c);
void md_jw_str(md_jw *w, const char *s);
void md_jw_num(md_jw *w, double v);  /* %.6g; null when not finite */
void md_jw_mib(md_jw *w, double v);  /* %.4f */
void md_jw_int(md_jw *w, long long v);
void md_jw_null(md_jw *w);
void md_jw_bool(md_jw *w, int v);

#define MD_KV(w, k, call) do { md_jw_key(w, k); call; } while (0)

#endif
