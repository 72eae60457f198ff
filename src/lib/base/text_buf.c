#include "text_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for WANT bytes in all (the text and its NUL), doubling from 256; false, with FAILED set,
 * when the allocation fails. */
static bool reserve(md_text_buf *b, size_t want)
{
    if (b->text && want <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < want)
        cap *= 2;
    char *grown = realloc(b->text, cap);
    if (!grown) {
        b->failed = true;
        return false;
    }
    b->text = grown;
    b->cap = cap;
    return true;
}

void md_buf_printf(md_text_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->text ? b->text + b->len : NULL, b->text ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if (b->text && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        if (!reserve(b, b->len + (size_t)n + 1))
            return;
    }
}

void md_buf_append(md_text_buf *b, const void *bytes, size_t len)
{
    if (b->failed || !reserve(b, b->len + len + 1))
        return;
    memcpy(b->text + b->len, bytes, len);
    b->len += len;
    b->text[b->len] = '\0';
}
