/* HTTP transfers for `fetch`, through libcurl: a small document into memory, an archive into a
 * file that a later call resumes. Retries transient failures with backoff; never prints.
 * Scope: private to src/lib/fetch. */
#ifndef MD_FETCH_HTTP_H
#define MD_FETCH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

/* Called as bytes arrive: DONE of TOTAL bytes of the file named WHAT (TOTAL 0 when unknown). */
typedef void (*md_http_progress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total);

typedef struct {
    long connect_timeout_s;  /* 0: 30 s */
    long stall_timeout_s;    /* give up after this long below 1 KiB/s; 0: 60 s */
    unsigned retries;        /* more attempts after a transient failure (5xx, reset, timeout) */
    long backoff_ms;         /* the wait before the first retry, doubled for each next; 0: 1000 */
    bool allow_http;         /* plain http:// to hosts other than loopback */
    const char *accept;      /* an Accept header for md_http_get (a package index's JSON); NULL: none */
    md_http_progress_fn progress; /* optional */
    void *progress_ctx;
} md_http_options;

/* MD_OK when URL may be fetched: https://, or http:// to 127.0.0.1, localhost or [::1], or any
 * http:// with ALLOW_HTTP. MD_ERR_ARGUMENT naming the URL otherwise. */
md_status md_http_url_allowed(const char *url, bool allow_http, md_error *err);

/* GETs URL into *BODY (malloc'd, NUL-terminated, LEN bytes without the NUL; caller frees).
 * MD_ERR_NETWORK for a failed transfer (naming the URL and the HTTP status or curl's reason),
 * MD_ERR_FORMAT when the body is over MAX_BYTES. */
md_status md_http_get(const char *url, const md_http_options *o, size_t max_bytes, char **body, size_t *len,
                      md_error *err);

/* Downloads URL into PART, appending from PART's current size with a Range request (restarting
 * from zero when the server ignores ranges). SIZE is the expected total (0 unknown); a PART of
 * that size already is taken as complete. WHAT names the file for progress. *RESUMED_FROM
 * (may be NULL) receives the offset the first request resumed at. On failure PART keeps what
 * arrived, for the next call. MD_ERR_NETWORK, MD_ERR_IO (PART not writable), MD_ERR_FORMAT
 * (more bytes than SIZE). */
md_status md_http_download(const char *url, const char *part, uint64_t size, const char *what,
                           const md_http_options *o, uint64_t *resumed_from, md_error *err);

#endif
