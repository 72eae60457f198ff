/* Status codes and error details returned by every library function.
 * The library never prints and never exits: a failing call fills an md_error and returns its
 * code; the CLI decides what to print and which exit status that means.
 * Scope: public: src/cli may include it. */
#ifndef MD_STATUS_H
#define MD_STATUS_H

typedef enum {
    MD_OK = 0,
    MD_ERR_IO,          /* a file or directory cannot be opened or read */
    MD_ERR_FORMAT,      /* the input is recognised but malformed: truncated, bad sizes, corrupt */
    MD_ERR_UNKNOWN_TYPE,/* the input is none of the formats the function reads */
    MD_ERR_ARGUMENT,    /* a caller-supplied value is invalid (unknown architecture, ...) */
    MD_ERR_NOMEM,
    MD_ERR_INTERNAL,    /* broken embedded data or an invariant that cannot fail */
    MD_ERR_UNSUPPORTED, /* this machine cannot do it: no toolkit for an architecture, no GPU */
    MD_ERR_BUILD,       /* a compiler, linker or packaging step failed */
    MD_ERR_NETWORK,     /* a download failed: refused, timed out, an HTTP error, retries spent */
    MD_ERR_CHECKSUM,    /* a downloaded file does not match the checksum it was published with */
    MD_ERR_STOPPED      /* the caller asked the work to stop (a signal it relayed): stopped, cleaned up */
} md_status;

/* What the caller could give to get past an error, for the CLI to word as its own option: the
 * library names no command-line flag. */
typedef enum {
    MD_HINT_NONE = 0,
    MD_HINT_TOOLKIT,    /* a CUDA toolkit folder */
    MD_HINT_PLATFORM,   /* the platform to fetch for */
    MD_HINT_PYTHON,     /* the Python to probe */
    MD_HINT_ALLOW_HTTP, /* a plain http:// URL, allowed on purpose */
    MD_HINT_REDIST,     /* the redist manifests rather than the compiler wheels */
    MD_HINT_SEARCH      /* more folders to search for installed binaries */
} md_hint;

typedef struct {
    md_status code;
    md_hint hint;       /* MD_HINT_NONE unless md_hint_set gave one */
    char message[512];  /* one line, lowercase, no trailing full stop */
} md_error;

/* Records CODE with a printf-style message in ERR (which may be NULL) and returns CODE. */
md_status md_fail(md_error *err, md_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds HINT to ERR (which may be NULL) after md_fail, and returns CODE: md_hint_set(err,
 * MD_HINT_TOOLKIT, md_fail(err, ...)). */
md_status md_hint_set(md_error *err, md_hint hint, md_status code);

/* Clears ERR (which may be NULL) to MD_OK with an empty message. */
void md_error_clear(md_error *err);

#endif
