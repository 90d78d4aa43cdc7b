/* page.c - the frame of memdiag's HTML pages and their data: markup and
 * style here, behaviour in page.js (embedded at build time), data written
 * as JavaScript literals that no string in a snapshot can break out of. */
#include <stdlib.h>
#include <string.h>
#include "../util/util.h"
#include "flame.h"
#include "page.h"

static const char style[] =
    "body{font:13px/1.45 system-ui,sans-serif;margin:14px;color:#222;max-width:1400px}\n"
    "h1{font-size:17px;margin:0 0 4px}h2{font-size:15px;margin:22px 0 6px;"
    "border-bottom:1px solid #ddd;padding-bottom:3px}h3{font-size:13px;margin:12px 0 4px}\n"
    ".md-sub{color:#555;margin-bottom:8px}\n"
    ".md-bar{display:flex;gap:8px;align-items:center;margin:4px 0;flex-wrap:wrap}\n"
    ".md-search{width:260px;padding:3px}\n"
    ".md-legend span{display:inline-block;margin-right:10px}\n"
    ".md-legend i{display:inline-block;width:10px;height:10px;margin-right:4px;"
    "vertical-align:middle}\n"
    ".md-canvas{display:block;width:100%;cursor:pointer}\n"
    ".md-tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #999;"
    "padding:4px 6px;font-size:12px;box-shadow:0 1px 4px rgba(0,0,0,.2);display:none;"
    "max-width:560px;white-space:pre-wrap;z-index:2}\n"
    "table{border-collapse:collapse}td,th{padding:1px 10px 1px 0;text-align:left;"
    "vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".sev-critical{color:#b00020;font-weight:600}.sev-warning{color:#a15c00;font-weight:600}"
    ".sev-info{color:#2b5b84}\n"
    ".md-finding{margin:6px 0 10px}.md-finding ul{margin:2px 0 2px 18px;padding:0}\n"
    ".md-advice{margin-left:18px;color:#333}\n";

void md_page_begin(FILE *o, const char *title)
{
    fputs("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", o);
    md_html_text(o, title);
    fprintf(o, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", style);
}

int md_page_end(FILE *o, const char *calls)
{
    fprintf(o, "<script>\n%s\n%s</script>\n</body>\n</html>\n", md_page_js, calls);
    return ferror(o) ? -1 : 0;
}

void md_html_text(FILE *o, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '&': fputs("&amp;", o); break;
        case '"': fputs("&quot;", o); break;
        default: fputc(*s, o);
        }
    }
}

void md_js_string(FILE *o, const char *s)
{
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(o, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&')
            fprintf(o, "\\u%04x", *p);
        else
            fputc(*p, o);
    }
    fputc('"', o);
}

/* A compact index for each snapshot string a flame graph uses, and the
 * labels of the nodes that are not frames after them. */
typedef struct strs {
    md_map index; /* snapshot string id -> position in ids */
    uint32_t *ids;
    size_t n, cap;
} strs;

static long str_index(strs *t, uint32_t id)
{
    uint64_t got;
    if (md_map_get(&t->index, id, &got))
        return (long)got;
    if (md_grow((void **)&t->ids, &t->cap, t->n + 1, sizeof *t->ids) ||
        md_map_put(&t->index, id, t->n))
        return -1;
    t->ids[t->n] = id;
    return (long)t->n++;
}

/* [parent, bytes, self, allocations, category, name, file, line] per node;
 * name and file index strs (file -1: not a frame). */
static int flame_nodes(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n, strs *t)
{
    fputs("nodes:[", o);
    for (size_t i = 0; i < n; i++) {
        const md_frame *f = v[i].kind == MD_FLAME_FRAME ? md_snapshot_frame(s, v[i].frame) : NULL;
        long name = f ? str_index(t, f->name) : -2 - v[i].kind, file = f ? str_index(t, f->filename) : -1;
        if (name == -1 || (f && file < 0))
            return -1;
        fprintf(o, "%s[%ld,%llu,%llu,%u,%u,%ld,%ld,%d]", i ? ",\n" : "\n",
                v[i].parent == MD_FLAME_NONE ? -1L : (long)v[i].parent,
                (unsigned long long)v[i].bytes, (unsigned long long)v[i].self_bytes, v[i].count,
                v[i].category, name, file, f ? f->line : 0);
    }
    fputs("]", o);
    return 0;
}

int md_page_flame_data(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n)
{
    strs t = {0};
    if (md_map_init(&t.index, 256))
        return -1;
    /* nodes first (they number the strings), into memory, then the tables */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int rc = !m || flame_nodes(m, s, v, n, &t);
    if (m && fclose(m))
        rc = 1;
    if (!rc) {
        fputs("{cats:[", o);
        for (int c = 0; c < MD_CAT_COUNT; c++) {
            fputs(c ? "," : "", o);
            md_js_string(o, md_category_name(c));
        }
        fputs("],strs:[", o);
        for (size_t i = 0; i < t.n; i++) {
            fputs(i ? "," : "", o);
            md_js_string(o, md_snapshot_string(s, t.ids[i]));
        }
        /* the labels of non-frame nodes: name -2 - kind is strs[n + kind] */
        for (int k = 0; k <= MD_FLAME_CPP_ONLY; k++) {
            fputs(t.n || k ? "," : "", o);
            md_js_string(o, md_flame_kind_label(k));
        }
        fprintf(o, "],nonframe:%zu,", t.n);
        fwrite(buf, 1, len, o);
        fputs("}", o);
    }
    free(buf);
    free(t.ids);
    md_map_free(&t.index);
    return rc ? -1 : 0;
}
