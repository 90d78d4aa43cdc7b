/* flame.c - a flame graph of live memory (md_flame_at) as folded stacks
 * (one line per stack: "outer;...;inner bytes", what flamegraph.pl,
 * inferno and speedscope read) or as one self-contained HTML page: an
 * icicle drawn on a canvas, colored by category, with zoom, search and
 * details on hover. The page loads nothing: it works offline and can be
 * mailed. */
#include <string.h>
#include "flame.h"

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

/* s as a JavaScript string literal that cannot end the <script> element. */
static void js_string(FILE *o, const char *s)
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

/* [parent, bytes, self, count, category, name, where] per node. */
static void html_nodes(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n)
{
    fputs("[", o);
    for (size_t i = 0; i < n; i++) {
        const md_frame *f = v[i].kind == MD_FLAME_FRAME ? md_snapshot_frame(s, v[i].frame) : NULL;
        char where[600] = "";
        if (f)
            snprintf(where, sizeof where, "%s:%d", md_snapshot_string(s, f->filename), f->line);
        fprintf(o, "%s\n[%ld,%llu,%llu,%u,%u,", i ? "," : "",
                v[i].parent == MD_FLAME_NONE ? -1L : (long)v[i].parent,
                (unsigned long long)v[i].bytes, (unsigned long long)v[i].self_bytes, v[i].count,
                v[i].category);
        js_string(o, f ? md_snapshot_string(s, f->name) : md_flame_kind_label(v[i].kind));
        fputc(',', o);
        js_string(o, where);
        fputc(']', o);
    }
    fputs("]", o);
}

int md_render_flame_html(FILE *o, const md_snapshot *s, const md_flame_node *v, size_t n,
                         const char *title, const char *subtitle)
{
    fputs(md_flame_html_head, o);
    fputs("<script>\nconst D={title:", o);
    js_string(o, title);
    fputs(",subtitle:", o);
    js_string(o, subtitle);
    fputs(",cats:[", o);
    for (int c = 0; c < MD_CAT_COUNT; c++) {
        fputs(c ? "," : "", o);
        js_string(o, md_category_name(c));
    }
    fputs("],nodes:", o);
    html_nodes(o, s, v, n);
    fputs("};\n", o);
    fputs(md_flame_html_script, o);
    fputs("</script>\n</body>\n</html>\n", o);
    return ferror(o) ? -1 : 0;
}
