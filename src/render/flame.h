/* flame.h - a flame graph of live memory as folded stacks or as one
 * self-contained HTML page (flame.c; the page's frame and script: page.h). */
#ifndef MD_FLAME_H
#define MD_FLAME_H

#include <stdio.h>
#include <stdlib.h>
#include "memdiag.h"

/* "outer;...;inner bytes" per stack that allocated, bytes allocated right
 * there. -1 when out of memory. */
int md_render_flame_folded(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n);
/* One HTML page; -1 when writing failed. */
int md_render_flame_html(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n,
                         const char *title, const char *subtitle);
/* The name of a node that is not a frame (MD_FLAME_ROOT, ...). */
const char *md_flame_kind_label(int kind);

#endif
