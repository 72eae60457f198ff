#include "logscan.h"

#include "base/regex_syntax.h"

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

/* The longest run of plain characters every match of the branch [P, END) must hold. */
static size_t branch_literal(const char *p, const char *end, char *best, size_t cap)
{
    char run[256];
    size_t n = 0, best_n = 0;
#define END_RUN() do { if (n > best_n && n < cap) { memcpy(best, run, n); best_n = n; } n = 0; } while (0)
    while (p < end) {
        char c;
        const char *next;
        if (*p == '\\' && p + 1 < end) {
            c = p[1];
            next = p + 2;
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
                END_RUN(); /* \d and friends are not literals (and not POSIX) */
                p = next;
                continue;
            }
        } else if (*p == '[' || *p == '(' || *p == '.' || *p == '^' || *p == '$') {
            next = *p == '[' ? md_re_skip_bracket(p) : *p == '(' ? md_re_skip_group(p) : p + 1;
            END_RUN();
            p = next;
            if (md_re_is_quantifier(p))
                p = md_re_skip_quantifier(p);
            continue;
        } else {
            c = *p;
            next = p + 1;
        }
        if (next < end && md_re_is_quantifier(next)) {
            if (!md_re_optional_quantifier(next) && n < sizeof run)
                run[n++] = c;        /* required once, then repeated: the run ends after it */
            END_RUN();
            p = md_re_skip_quantifier(next);
            continue;
        }
        if (n < sizeof run)
            run[n++] = c;
        p = next;
    }
    END_RUN();
#undef END_RUN
    return best_n;
}

size_t md_log_required_literals(const char *pattern, char *out, size_t cap)
{
    size_t count = 0, at = 0;
    const char *start = pattern, *p = pattern;
    for (;;) {
        if (*p == '\\' && p[1]) {
            p += 2;
            continue;
        }
        if (*p == '[') {
            p = md_re_skip_bracket(p);
            continue;
        }
        if (*p == '(') {
            p = md_re_skip_group(p);
            continue;
        }
        if (*p == '|' || *p == '\0') {
            char lit[256];
            size_t n = branch_literal(start, p, lit, sizeof lit);
            if (n < 2 || at + n + 1 > cap)
                return 0;
            memcpy(out + at, lit, n);
            out[at + n] = '\0';
            at += n + 1;
            count++;
            if (*p == '\0')
                return count;
            start = ++p;
            continue;
        }
        p++;
    }
}

static unsigned bigram(const char *s)
{
    return (unsigned)(unsigned char)s[0] << 8 | (unsigned char)s[1];
}

/* The literals of every pattern, by their first two bytes; the patterns without one in an
 * alternation of their own. */
static md_status build_literals(md_log_matcher *m, const char *const *patterns, size_t n, md_error *err)
{
    size_t text_cap = 64, text_len = 0, total = 1;
    for (size_t i = 0; i < n; i++)
        text_cap += strlen(patterns[i]) + 2;
    m->literal_text = malloc(text_cap);
    m->literals = calloc(n * 4 + 1, sizeof *m->literals);
    m->by_bigram = malloc(65536 * sizeof *m->by_bigram);
    m->residual = calloc(n ? n : 1, sizeof *m->residual);
    if (!m->literal_text || !m->literals || !m->by_bigram || !m->residual)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    for (size_t b = 0; b < 65536; b++)
        m->by_bigram[b] = -1;
    for (size_t i = 0; i < n; i++) {
        char lits[512];
        size_t count = md_log_required_literals(patterns[i], lits, sizeof lits);
        if (count == 0 || count > 4 || text_len + strlen(patterns[i]) + 2 > text_cap) {
            m->residual[i] = true;
            m->n_residual++;
            total += strlen(patterns[i]) + 3;
            continue;
        }
        const char *l = lits;
        for (size_t k = 0; k < count; k++, l += strlen(l) + 1) {
            size_t len = strlen(l);
            md_log_literal *lit = &m->literals[m->n_literals];
            memcpy(m->literal_text + text_len, l, len + 1);
            lit->text = m->literal_text + text_len;
            lit->len = len;
            lit->pattern = i;
            text_len += len + 1;
            unsigned b = bigram(lit->text);
            lit->next = m->by_bigram[b];
            m->by_bigram[b] = (int)m->n_literals++;
            m->bigram_bits[b >> 6] |= (uint64_t)1 << (b & 63);
        }
    }
    if (m->n_residual == 0)
        return MD_OK;
    char *all = malloc(total);
    if (!all)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (m->residual[i])
            at += (size_t)snprintf(all + at, total - at, "%s(%s)", at ? "|" : "", patterns[i]);
    all[at] = '\0';
    /* if the alternation cannot be compiled, every residual pattern is tried on every line */
    m->has_prefilter = md_regex_nodes(all) <= MD_REGEX_MAX_NODES &&
                       regcomp(&m->prefilter, all, REG_EXTENDED | REG_NOSUB) == 0;
    free(all);
    return MD_OK;
}

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
    for (size_t i = 0; i < n; i++) {
        md_status st = md_regex_compile(&m->patterns[i], patterns[i], REG_EXTENDED | REG_NOSUB, MD_ERR_INTERNAL,
                                        "a log pattern", err);
        if (st != MD_OK) {
            md_log_matcher_free(m);
            return st;
        }
        m->n_patterns++;
        m->group_of[i] = groups[i] < n_groups ? groups[i] : n_groups - 1;
    }
    m->n_groups = n_groups;
    md_status st = md_log_wording_init(&m->wording, NULL, NULL, 0, err); /* characters only, until one is set */
    if (st == MD_OK)
        st = build_literals(m, patterns, n, err);
    if (st != MD_OK)
        md_log_matcher_free(m);
    return st;
}

void md_log_matcher_free(md_log_matcher *m)
{
    for (size_t i = 0; i < m->n_patterns; i++)
        regfree(&m->patterns[i]);
    if (m->has_prefilter)
        regfree(&m->prefilter);
    free(m->patterns);
    free(m->group_of);
    free(m->literals);
    free(m->literal_text);
    free(m->by_bigram);
    free(m->residual);
    md_log_wording_free(&m->wording);
    memset(m, 0, sizeof *m);
}

/* ---- the scan ----------------------------------------------------------------------------- */

typedef struct {
    const md_log_matcher *m;
    md_log_result *r;
    bool *seen;                                  /* per group, on the current line */
    bool *cand;                                  /* per pattern, on the current line */
    md_log_line ring[MD_LOG_CONTEXT];            /* the last lines, for context */
    size_t ring_next, ring_count;
    bool no_memory;                              /* a regexec could not allocate */
    char norm[MD_LOG_LINE_MAX + 1];              /* the current line as the patterns see it */
} scan_state;

/* A regexec that cannot allocate gives no answer, not "no match": a finding lost to it would be a
 * log called clean. glibc's regexec returns REG_NOMATCH then (not REG_ESPACE), so errno, which
 * the failed malloc set, tells. */
static bool matches(const regex_t *re, const char *line, bool *no_memory)
{
    errno = 0;
    int rc = regexec(re, line, 0, NULL, 0);
    if (rc == REG_ESPACE || (rc != 0 && errno == ENOMEM))
        *no_memory = true;
    return rc == 0;
}

static void remember(md_log_line *dst, unsigned long long number, const char *text, size_t len)
{
    dst->line = number;
    size_t keep = len < sizeof dst->text - 1 ? len : sizeof dst->text - 1;
    memcpy(dst->text, text, keep);
    dst->text[keep] = '\0';
}

/* Marks in CAND the patterns that LINE may match: those one of whose literals it holds, and
 * the residual ones (when their alternation matches). Returns whether any is marked. */
static bool candidates(const md_log_matcher *m, const char *line, size_t len, bool *cand, bool *no_memory)
{
    bool any = false;
    memset(cand, 0, m->n_patterns * sizeof *cand);
    if (m->n_residual && (!m->has_prefilter || matches(&m->prefilter, line, no_memory)))
        for (size_t i = 0; i < m->n_patterns; i++)
            if (m->residual[i])
                any = cand[i] = true;
    for (size_t i = 0; i + 1 < len; i++) {
        unsigned b = bigram(line + i);
        if (!(m->bigram_bits[b >> 6] >> (b & 63) & 1))
            continue;
        for (int k = m->by_bigram[b]; k >= 0; k = m->literals[k].next) {
            const md_log_literal *l = &m->literals[k];
            if (!cand[l->pattern] && l->len <= len - i && memcmp(line + i, l->text, l->len) == 0)
                any = cand[l->pattern] = true;
        }
    }
    return any;
}

static void match_line(scan_state *s, char *line, size_t len)
{
    md_log_result *r = s->r;
    const md_log_matcher *m = s->m;
    line[len] = '\0';
    size_t norm_len;
    const char *norm = md_log_normal_form(&m->wording, line, len, s->norm, sizeof s->norm, &norm_len);
    if (candidates(m, norm, norm_len, s->cand, &s->no_memory)) {
        memset(s->seen, 0, m->n_groups * sizeof *s->seen);
        for (size_t i = 0; i < m->n_patterns; i++) {
            size_t g = m->group_of[i];
            if (!s->cand[i] || s->seen[g] || !matches(&m->patterns[i], norm, &s->no_memory))
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
    bool *cand = calloc(m->n_patterns ? m->n_patterns : 1, sizeof *cand);
    char *buf = malloc(READ_CHUNK);
    char *line = malloc(MD_LOG_LINE_MAX + 1);
    scan_state *s = calloc(1, sizeof *s);
    md_status st = MD_OK;
    if (!out->groups || !seen || !cand || !buf || !line || !s) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    out->n_groups = m->n_groups;
    s->m = m;
    s->r = out;
    s->seen = seen;
    s->cand = cand;
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
            if (cs == CL_TEXT && c != 0x1b && c != '\r' && c != 0) { /* the common byte, without the state machine */
                if (len < MD_LOG_LINE_MAX)
                    line[len++] = (char)c;
                else
                    cut = true;
                continue;
            }
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
    if (s->no_memory)
        st = md_fail(err, MD_ERR_NOMEM, "out of memory matching the lines of '%s'", name);
end:
    free(s);
    free(line);
    free(buf);
    free(seen);
    free(cand);
    if (st != MD_OK)
        md_log_result_free(out);
    return st;
}

void md_log_result_free(md_log_result *r)
{
    free(r->groups);
    memset(r, 0, sizeof *r);
}
