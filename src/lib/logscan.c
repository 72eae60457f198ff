#include "logscan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define READ_CHUNK (64 * 1024)

/* ---- cleaning: a byte-at-a-time state machine, so a sequence split across reads is removed -- */

typedef enum { CL_TEXT, CL_ESC, CL_CSI, CL_OSC, CL_OSC_ESC } clean_state;

/* Returns the byte to keep, or -1 to drop it. */
static int clean_byte(clean_state *st, unsigned char c)
{
    switch (*st) {
    case CL_TEXT:
        if (c == 0x1b) {
            *st = CL_ESC;
            return -1;
        }
        if (c == '\r')
            return -1;
        return c == 0 ? ' ' : c;
    case CL_ESC:
        if (c == '[') {
            *st = CL_CSI;
            return -1;
        }
        if (c == ']') {
            *st = CL_OSC;
            return -1;
        }
        /* a two-byte escape (ESC ( B, ESC =): drop both */
        *st = CL_TEXT;
        return c >= 0x20 && c <= 0x7e ? -1 : (c == '\r' ? -1 : c == 0 ? ' ' : c);
    case CL_CSI:
        if (c >= 0x40 && c <= 0x7e)   /* the final byte */
            *st = CL_TEXT;
        else if (c < 0x20 || c > 0x3f) { /* not a parameter or intermediate: not a CSI after all */
            *st = CL_TEXT;
            return c == '\r' ? -1 : c == 0 ? ' ' : c;
        }
        return -1;
    case CL_OSC:
        if (c == 0x07)
            *st = CL_TEXT;
        else if (c == 0x1b)
            *st = CL_OSC_ESC;
        return -1;
    case CL_OSC_ESC:
        *st = c == '\\' ? CL_TEXT : CL_OSC;
        return -1;
    }
    return c;
}

size_t md_log_clean(char *line, size_t len)
{
    clean_state st = CL_TEXT;
    size_t out = 0;
    for (size_t i = 0; i < len; i++) {
        int c = clean_byte(&st, (unsigned char)line[i]);
        if (c >= 0)
            line[out++] = (char)c;
    }
    if (out < len)
        line[out] = '\0';
    return out;
}

/* ---- the matcher -------------------------------------------------------------------------- */

md_status md_log_matcher_init(md_log_matcher *m, const char *const *patterns, const size_t *groups, size_t n,
                              size_t n_groups, md_error *err)
{
    memset(m, 0, sizeof *m);
    m->patterns = calloc(n ? n : 1, sizeof *m->patterns);
    m->group_of = calloc(n ? n : 1, sizeof *m->group_of);
    if (!m->patterns || !m->group_of) {
        md_log_matcher_free(m);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        int rc = regcomp(&m->patterns[i], patterns[i], REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[128];
            regerror(rc, &m->patterns[i], why, sizeof why);
            md_log_matcher_free(m);
            return md_fail(err, MD_ERR_INTERNAL, "bad pattern '%s': %s", patterns[i], why);
        }
        m->n_patterns++;
        m->group_of[i] = groups[i] < n_groups ? groups[i] : n_groups - 1;
        total += strlen(patterns[i]) + 3;
    }
    m->n_groups = n_groups;
    /* Almost every line of a long log matches nothing: one combined test saves a regexec per
     * pattern on those lines. If the alternation cannot be compiled, every pattern is tried. */
    char *all = malloc(total);
    if (!all) {
        md_log_matcher_free(m);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(all + at, total - at, "%s(%s)", i ? "|" : "", patterns[i]);
    all[at] = '\0';
    m->has_prefilter = n > 0 && regcomp(&m->prefilter, all, REG_EXTENDED | REG_NOSUB) == 0;
    free(all);
    return MD_OK;
}

void md_log_matcher_free(md_log_matcher *m)
{
    for (size_t i = 0; i < m->n_patterns; i++)
        regfree(&m->patterns[i]);
    if (m->has_prefilter)
        regfree(&m->prefilter);
    free(m->patterns);
    free(m->group_of);
    memset(m, 0, sizeof *m);
}

/* ---- the scan ----------------------------------------------------------------------------- */

typedef struct {
    const md_log_matcher *m;
    md_log_result *r;
    bool *seen;                                  /* per group, on the current line */
    md_log_line ring[MD_LOG_CONTEXT];            /* the last lines, for context */
    size_t ring_next, ring_count;
} scan_state;

static void remember(md_log_line *dst, unsigned long long number, const char *text, size_t len)
{
    dst->line = number;
    size_t keep = len < sizeof dst->text - 1 ? len : sizeof dst->text - 1;
    memcpy(dst->text, text, keep);
    dst->text[keep] = '\0';
}

static void match_line(scan_state *s, char *line, size_t len)
{
    md_log_result *r = s->r;
    const md_log_matcher *m = s->m;
    line[len] = '\0';
    if (!m->has_prefilter || regexec(&m->prefilter, line, 0, NULL, 0) == 0) {
        memset(s->seen, 0, m->n_groups * sizeof *s->seen);
        for (size_t i = 0; i < m->n_patterns; i++) {
            size_t g = m->group_of[i];
            if (s->seen[g] || regexec(&m->patterns[i], line, 0, NULL, 0) != 0)
                continue;
            s->seen[g] = true;
            md_log_group_hits *h = &r->groups[g];
            if (h->count == 0) {
                /* the context: the ring's lines, oldest first */
                size_t start = (s->ring_next + MD_LOG_CONTEXT - s->ring_count) % MD_LOG_CONTEXT;
                for (size_t k = 0; k < s->ring_count; k++)
                    h->context[k] = s->ring[(start + k) % MD_LOG_CONTEXT];
                h->n_context = s->ring_count;
            }
            h->count++;
            if (h->n_hits < MD_LOG_HITS_KEPT)
                remember(&h->hits[h->n_hits++], r->lines, line, len);
        }
    }
    remember(&s->ring[s->ring_next], r->lines, line, len);
    s->ring_next = (s->ring_next + 1) % MD_LOG_CONTEXT;
    if (s->ring_count < MD_LOG_CONTEXT)
        s->ring_count++;
}

md_status md_log_scan(FILE *in, const char *name, const md_log_matcher *m, md_log_result *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    out->groups = calloc(m->n_groups ? m->n_groups : 1, sizeof *out->groups);
    bool *seen = calloc(m->n_groups ? m->n_groups : 1, sizeof *seen);
    char *buf = malloc(READ_CHUNK);
    char *line = malloc(MD_LOG_LINE_MAX + 1);
    scan_state *s = calloc(1, sizeof *s);
    md_status st = MD_OK;
    if (!out->groups || !seen || !buf || !line || !s) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    out->n_groups = m->n_groups;
    s->m = m;
    s->r = out;
    s->seen = seen;
    clean_state cs = CL_TEXT;
    size_t len = 0;
    bool cut = false, pending = false;
    for (;;) {
        size_t n = fread(buf, 1, READ_CHUNK, in);
        if (n == 0)
            break;
        out->bytes += n;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)buf[i];
            if (c == '\n') {
                out->lines++;
                if (cut)
                    out->long_lines++;
                match_line(s, line, len);
                len = 0;
                cut = pending = false;
                cs = CL_TEXT; /* an escape sequence never spans lines */
                continue;
            }
            pending = true;
            int k = clean_byte(&cs, c);
            if (k < 0)
                continue;
            if (len < MD_LOG_LINE_MAX)
                line[len++] = (char)k;
            else
                cut = true;
        }
    }
    if (ferror(in)) {
        st = md_fail(err, MD_ERR_IO, "cannot read '%s': %s", name, strerror(errno));
        goto end;
    }
    if (pending) { /* a last line without a newline */
        out->lines++;
        if (cut)
            out->long_lines++;
        match_line(s, line, len);
    }
end:
    free(s);
    free(line);
    free(buf);
    free(seen);
    if (st != MD_OK)
        md_log_result_free(out);
    return st;
}

void md_log_result_free(md_log_result *r)
{
    free(r->groups);
    memset(r, 0, sizeof *r);
}
