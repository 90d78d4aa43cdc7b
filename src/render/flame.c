/* flame.c - a flame graph of live memory (md_flame_at) as folded stacks
 * (one line per stack: "outer;...;inner bytes", what flamegraph.pl,
 * inferno and speedscope read) or as one self-contained HTML page: an
 * icicle drawn on a canvas, colored by category, with zoom, search and
 * details on hover. The page loads nothing: it works offline and can be
 * mailed. */
#include <string.h>
#include "flame.h"
#include "page.h"

/* ---- folded ------------------------------------------------------------- */

/* A frame's label with the folded format's separators made harmless. */
static void folded_label(FILE *o, const md_snapshot *s, const md_flame_node *v)
{
    char buf[640];
    const md_frame *f = v->kind == MD_FLAME_FRAME ? md_snapshot_frame(s, v->frame) : NULL;
    if (f)
        snprintf(buf, sizeof buf, "%s (%s:%d)", md_snapshot_string(s, f->name),
                 md_snapshot_string(s, f->filename), f->line);
    else
        snprintf(buf, sizeof buf, "%s", md_flame_kind_label(v->kind));
    for (char *c = buf; *c; c++)
        if (*c == ';' || (unsigned char)*c < 0x20)
            *c = *c == ';' ? ':' : ' ';
    fputs(buf, o);
}

int md_render_flame_folded(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n)
{
    uint32_t *path = malloc((n ? n : 1) * sizeof *path);
    if (!path)
        return -1;
    for (size_t i = 1; i < n; i++) {
        if (!v[i].self_bytes)
            continue;
        size_t k = 0;
        for (uint32_t at = (uint32_t)i; at != 0 && k < n; at = v[at].parent)
            path[k++] = at;
        while (k-- > 0) {
            folded_label(o, s, &v[path[k]]);
            fputc(k ? ';' : ' ', o);
        }
        fprintf(o, "%llu\n", (unsigned long long)v[i].self_bytes);
    }
    free(path);
    return 0;
}

const char *md_flame_kind_label(int kind)
{
    switch (kind) {
    case MD_FLAME_ROOT: return "all";
    case MD_FLAME_NO_FRAMES: return "(no frames recorded)";
    case MD_FLAME_BEFORE_HISTORY: return "(allocated before the recorded history began)";
    case MD_FLAME_CPP_ONLY: return "(C++ frames only: the autograd engine's thread, ...)";
    default: return "?";
    }
}

/* ---- HTML ------------------------------------------------------------------ */

int md_render_flame_html(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n,
                         const char *title, const char *subtitle)
{
    md_page_begin(o, title);
    fputs("<h1>", o);
    md_html_text(o, title);
    fputs("</h1>\n<div class=\"md-sub\">", o);
    md_html_text(o, subtitle);
    fputs("</div>\n<div id=\"flame\"></div>\n<script>\nconst FLAME = ", o);
    if (md_page_flame_data(o, s, v, n))
        return -1;
    fputs(";\n</script>\n", o);
    return md_page_end(o, "window.memdiag = [mdFlame(document.getElementById('flame'), FLAME)];\n");
}
