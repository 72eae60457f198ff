#include "status.h"

#include <stdarg.h>
#include <stdio.h>

md_status md_fail(md_error *err, md_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
        err->hint = MD_HINT_NONE;
    }
    return code;
}

md_status md_hint_set(md_error *err, md_hint hint, md_status code)
{
    if (err)
        err->hint = hint;
    return code;
}

void md_error_clear(md_error *err)
{
    if (err) {
        err->code = MD_OK;
        err->hint = MD_HINT_NONE;
        err->message[0] = '\0';
    }
}
