/* page.h - what memdiag's HTML pages share (page.c): the frame of a page
 * (markup, style), escaping for HTML text and JavaScript strings, and a
 * flame graph's data; the pages' script is page.js, embedded at build time. */
#ifndef MD_PAGE_H
#define MD_PAGE_H

#include <stdio.h>
#include "memdiag.h"

extern const char md_page_js[]; /* src/render/page.js (generated C) */

/* doctype, head (title, style) and the body's start. */
void md_page_begin(FILE *o, const char *title);
/* The script (page.js), then `calls` (JavaScript run once the page is
 * there), and the end of the page; -1 when writing failed. */
int md_page_end(FILE *o, const char *calls);
void md_html_text(FILE *o, const char *s);
/* s as a JavaScript string literal that cannot end a <script> element. */
void md_js_string(FILE *o, const char *s);
/* A flame graph's data for mdFlame: {cats, strs, nodes}; -1 when out of
 * memory. */
int md_page_flame_data(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n);

#endif
