/* json_error.h - one error line for a JSON file jansson could not load:
 * unreadable (it names no line) or not valid JSON (where). */
#ifndef MD_JSON_ERROR_H
#define MD_JSON_ERROR_H
#include <jansson.h>
#include <string.h>
#include "../util/util.h"

static inline int md_json_load_error(const json_error_t *je, md_err *err)
{
    if (je->line < 0) { /* could not open or read it */
        const char *why = strrchr(je->text, ':');
        return md_err_set(err, MD_E_IO, -1, "cannot read it: %s", why ? why + 2 : je->text);
    }
    return md_err_set(err, MD_E_FORMAT, je->position, "not valid JSON (line %d): %s", je->line,
                      je->text);
}
#endif
