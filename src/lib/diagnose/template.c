#include "template.h"

#include <stdio.h>
#include <string.h>

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_|"

bool md_template_next(const char *text, const char *at, md_template_slot *slot)
{
    for (const char *p = at; *p; p++) {
        if (*p != '{' || (p > text && p[-1] == '$'))
            continue;
        size_t len = strspn(p + 1, NAME_CHARS);
        if (len == 0 || p[1 + len] != '}')
            continue;
        *slot = (md_template_slot){ .start = p, .length = len + 2, .names = p + 1, .names_length = len };
        return true;
    }
    return false;
}

bool md_template_alternative(const md_template_slot *slot, size_t *pos, char *name, size_t size)
{
    if (*pos >= slot->names_length)
        return false;
    const char *from = slot->names + *pos;
    size_t n = strcspn(from, "|}");
    if (n > slot->names_length - *pos)
        n = slot->names_length - *pos;
    snprintf(name, size, "%.*s", (int)n, from);
    *pos += n + 1;
    return true;
}
