#include "fetch_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "fetch_ca.h"
#include "recipes/product.h"

#define LOW_SPEED_BYTES 1024L
#define MAX_BACKOFF_MS 30000L

/* Where the body goes: a growing buffer, or a file opened for appending. */
typedef struct {
    FILE *file;
    char *buf;
    size_t len, cap, max;
    uint64_t offset, size;    /* the file's length before this request; the whole expected */
    bool too_big;
    const md_http_options *o;
    const char *what;
} sink;

static bool curl_ready(void)
{
    static bool done, ok;
    if (!done) {
        ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
        done = true;
    }
    return ok;
}

md_status md_http_url_allowed(const char *url, bool allow_http, md_error *err)
{
    if (!curl_ready())
        return md_fail(err, MD_ERR_INTERNAL, "cannot initialise libcurl");
    CURLU *u = curl_url();
    if (!u)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    char *scheme = NULL, *host = NULL;
    md_status st = MD_OK;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        st = md_fail(err, MD_ERR_ARGUMENT, "'%s' is not a URL", url);
    } else if (strcmp(scheme, "https") == 0) {
        st = MD_OK;
    } else if (strcmp(scheme, "http") != 0) {
        st = md_fail(err, MD_ERR_ARGUMENT, "refusing '%s': only https:// URLs are fetched", url);
    } else if (!allow_http && strcmp(host, "127.0.0.1") != 0 && strcmp(host, "localhost") != 0 &&
               strcmp(host, "[::1]") != 0) {
        /* Plain http is only as safe as the sha256 from a manifest that came over it. */
        st = md_hint_set(err, MD_HINT_ALLOW_HTTP,
                         md_fail(err, MD_ERR_ARGUMENT, "refusing '%s': plain http:// only to loopback", url));
    }
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return st;
}

static size_t on_write(char *data, size_t size, size_t n, void *p)
{
    sink *s = p;
    size_t bytes = size * n;
    if (s->file) {
        if (s->size && s->offset + s->len + bytes > s->size) {
            s->too_big = true;
            return 0;
        }
        if (fwrite(data, 1, bytes, s->file) != bytes)
            return 0;
        s->len += bytes;
        return bytes;
    }
    if (s->len + bytes > s->max) {
        s->too_big = true;
        return 0;
    }
    if (s->len + bytes + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 16384;
        while (cap < s->len + bytes + 1)
            cap *= 2;
        char *b = realloc(s->buf, cap);
        if (!b)
            return 0;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, bytes);
    s->len += bytes;
    s->buf[s->len] = '\0';
    return bytes;
}

static int on_progress(void *p, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal, (void)ulnow;
    sink *s = p;
    s->o->progress(s->o->progress_ctx, s->what, s->offset + (uint64_t)dlnow, s->size);
    return 0;
}

static bool transient_code(CURLcode cc, long http)
{
    switch (cc) {
    case CURLE_HTTP_RETURNED_ERROR: return http >= 500 || http == 408 || http == 429;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return true;
    default: return false;
    }
}

static void wait_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One request with the options every transfer shares. */
static CURLcode perform(CURL *h, const char *url, const md_ca_store *ca, sink *s, char *errbuf, long *http)
{
    const md_http_options *o = s->o;
    curl_easy_reset(h);
    errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "msda-doctor/" MD_VERSION);
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    /* The first URL is checked by md_http_url_allowed; a redirect may not step down to http. */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, o->allow_http ? "http,https" : "https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s > 0 ? o->connect_timeout_s : 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, o->stall_timeout_s > 0 ? o->stall_timeout_s : 60L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    /* Both set, or neither (NULL): libcurl's built-in default is nothing in the static build. */
    curl_easy_setopt(h, CURLOPT_CAINFO, ca->file[0] ? ca->file : NULL);
    curl_easy_setopt(h, CURLOPT_CAPATH, ca->dir[0] ? ca->dir : NULL);
    if (s->file && s->offset)
        curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)s->offset);
    if (o->progress) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, s);
    }
    struct curl_slist *headers = NULL;
    if (o->accept && !s->file) {
        char line[256];
        snprintf(line, sizeof line, "Accept: %s", o->accept);
        /* Without the header the index answers in HTML, which is read too. */
        headers = curl_slist_append(NULL, line);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    }
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(headers);
    *http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, http);
    if (cc == CURLE_UNSUPPORTED_PROTOCOL && *http >= 300 && *http < 400) {
        /* libcurl's words ("Protocol "http" not supported") do not say that a redirect was
         * refused, nor where it led. */
        char *to = NULL;
        if (curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &to) != CURLE_OK || !to || strcmp(to, url) == 0)
            curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &to);
        snprintf(errbuf, CURL_ERROR_SIZE, "HTTP %ld redirects to %.160s%s, which is not followed%s", *http,
                 to && strcmp(to, url) != 0 ? to : "another address", to && strncmp(to, "http:", 5) == 0 ? " (plain http)" : "",
                 o->allow_http ? "" : ": only https may follow");
    }
    return cc;
}

static md_status describe_failure(md_error *err, const char *url, CURLcode cc, long http, const char *errbuf,
                                  unsigned attempts)
{
    char after[48] = "";
    if (attempts > 1)
        snprintf(after, sizeof after, " (after %u attempts)", attempts);
    if (cc == CURLE_HTTP_RETURNED_ERROR)
        return md_fail(err, MD_ERR_NETWORK, "cannot download '%s': HTTP %ld%s", url, http, after);
    return md_fail(err, MD_ERR_NETWORK, "cannot download '%s': %s%s", url,
                   errbuf[0] ? errbuf : curl_easy_strerror(cc), after);
}

/* The loop both transfers share. A file sink is reopened at each attempt, so that a retry
 * resumes from what the last one wrote. */
static md_status transfer(const char *url, const char *part, sink *s, uint64_t *resumed_from, md_error *err)
{
    if (!curl_ready())
        return md_fail(err, MD_ERR_INTERNAL, "cannot initialise libcurl");
    md_status st = md_http_url_allowed(url, s->o->allow_http, err);
    if (st != MD_OK)
        return st;
    /* Plain http needs no store (a redirect to https then fails on its certificate); https
     * cannot go on without one. */
    md_ca_store ca;
    bool https = strncmp(url, "https:", 6) == 0;
    if ((st = md_ca_store_find("/", &ca, https ? err : NULL)) != MD_OK) {
        if (https)
            return st;
        memset(&ca, 0, sizeof ca);
    }
    CURL *h = curl_easy_init();
    if (!h)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    char errbuf[CURL_ERROR_SIZE];
    long backoff = s->o->backoff_ms > 0 ? s->o->backoff_ms : 1000L;
    bool restarted = false;
    unsigned attempt = 0;
    for (;;) {
        attempt++;
        s->len = 0;
        s->too_big = false;
        if (part) {
            struct stat sb;
            s->offset = stat(part, &sb) == 0 ? (uint64_t)sb.st_size : 0;
            if (s->size && s->offset > s->size) {
                /* Longer than the manifest says: not a prefix of this file. */
                if (truncate(part, 0) != 0) {
                    st = md_fail(err, MD_ERR_IO, "cannot truncate '%s': %s", part, strerror(errno));
                    break;
                }
                s->offset = 0;
            }
            if (attempt == 1 && resumed_from)
                *resumed_from = s->offset;
            if (s->size && s->offset == s->size) {
                st = MD_OK;
                break;
            }
            s->file = fopen(part, "ab");
            if (!s->file) {
                st = md_fail(err, MD_ERR_IO, "cannot write '%s': %s", part, strerror(errno));
                break;
            }
        }
        long http = 0;
        CURLcode cc = perform(h, url, &ca, s, errbuf, &http);
        bool closed = true;
        if (s->file) {
            closed = fclose(s->file) == 0;
            s->file = NULL;
        }
        if (s->too_big) {
            st = part ? md_fail(err, MD_ERR_FORMAT, "'%s' is larger than its manifest says (%llu bytes)", url,
                                (unsigned long long)s->size)
                      : md_fail(err, MD_ERR_FORMAT, "'%s' is larger than %zu bytes", url, s->max);
            break;
        }
        if (cc == CURLE_WRITE_ERROR || !closed) {
            st = part ? md_fail(err, MD_ERR_IO, "cannot write '%s': %s", part, strerror(errno))
                      : md_fail(err, MD_ERR_NOMEM, "out of memory");
            break;
        }
        if (cc == CURLE_OK) {
            st = MD_OK;
            break;
        }
        /* The server ignored the range, or the part is no prefix it knows: start again, once. */
        if (part && s->offset && !restarted && (cc == CURLE_RANGE_ERROR || http == 416)) {
            restarted = true;
            attempt--;
            if (truncate(part, 0) != 0) {
                st = md_fail(err, MD_ERR_IO, "cannot truncate '%s': %s", part, strerror(errno));
                break;
            }
            continue;
        }
        if (!transient_code(cc, http) || attempt > s->o->retries) {
            st = describe_failure(err, url, cc, http, errbuf, attempt);
            break;
        }
        wait_ms(backoff);
        backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
    }
    curl_easy_cleanup(h);
    return st;
}

md_status md_http_get(const char *url, const md_http_options *o, size_t max_bytes, char **body, size_t *len,
                      md_error *err)
{
    /* A manifest is small: no progress for it. */
    md_http_options quiet = *o;
    quiet.progress = NULL;
    sink s = { .max = max_bytes, .o = &quiet, .what = url };
    *body = NULL;
    *len = 0;
    md_status st = transfer(url, NULL, &s, NULL, err);
    if (st == MD_OK && !s.buf) {
        s.buf = calloc(1, 1);
        if (!s.buf)
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    if (st != MD_OK) {
        free(s.buf);
        return st;
    }
    *body = s.buf;
    *len = s.len;
    return MD_OK;
}

md_status md_http_download(const char *url, const char *part, uint64_t size, const char *what,
                           const md_http_options *o, uint64_t *resumed_from, md_error *err)
{
    sink s = { .size = size, .o = o, .what = what };
    if (resumed_from)
        *resumed_from = 0;
    return transfer(url, part, &s, resumed_from, err);
}
