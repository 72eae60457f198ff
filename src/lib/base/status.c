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
    }
    return code;
}

void md_error_clear(md_error *err)
{
    if (err) {
        err->code = MD_OK;
        err->message[0] = '\0';
    }
}
