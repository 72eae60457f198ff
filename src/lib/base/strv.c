#include "strv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bool strv_add(strv *v, const char *fmt, ...)
{
    char **grown = realloc(v->items, (v->n + 2) * sizeof *grown);
    if (!grown)
        return false;
    v->items = grown;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int rc = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        v->items[v->n] = NULL;
        return false;
    }
    v->items[v->n++] = s;
    v->items[v->n] = NULL;
    return true;
}

bool strv_add_all(strv *v, char *const *list)
{
    for (; list && *list; list++)
        if (!strv_add(v, "%s", *list))
            return false;
    return true;
}

void strv_free(char **items)
{
    if (!items)
        return;
    for (size_t i = 0; items[i]; i++)
        free(items[i]);
    free(items);
}
