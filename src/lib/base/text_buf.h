/* A growable text buffer for documents built piece by piece (a wheel's METADATA and RECORD):
 * appends after a failed allocation do nothing, so the caller checks FAILED once at the end.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_TEXT_BUF_H
#define MD_TEXT_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *text;
    size_t len, cap;
    bool failed; /* out of memory: later appends do nothing, the caller checks once */
} md_text_buf;

/* Appends the printf-style text; TEXT stays NUL-terminated. */
void md_buf_printf(md_text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends LEN raw bytes, which may include NULs; TEXT stays NUL-terminated after them. */
void md_buf_append(md_text_buf *b, const void *bytes, size_t len);

#endif
