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

/* The longest run of plain characters every match of the branch [P, END) must hold. Where
 * ALL is not NULL, every run of at least two such characters is written there too, each
 * NUL-terminated (those that fit in ALL_CAP bytes), and counted in *N_ALL. */
static size_t branch_literal(const char *p, const char *end, char *best, size_t cap, char *all, size_t all_cap,
                             size_t *n_all)
{
    char run[256];
    size_t n = 0, best_n = 0, all_at = 0;
#define END_RUN() do { \
        if (n > best_n && n < cap) { memcpy(best, run, n); best_n = n; } \
        if (all && n >= 2 && all_at + n + 1 <= all_cap) { \
            memcpy(all + all_at, run, n); all[all_at + n] = '\0'; all_at += n + 1; (*n_all)++; } \
        n = 0; } while (0)
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

/* md_log_required_literals, and where ALSO is not NULL, for branch k the other runs its
 * matches must hold besides its literal (ALSO_CAP bytes each, NUL-terminated in turn), counted in
 * N_ALSO[k]. */
static size_t required_literals(const char *pattern, char *out, size_t cap, char (*also)[256], size_t *n_also,
                                size_t max_branches)
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
            char lit[256], runs[256];
            size_t n_runs = 0;
            size_t n = branch_literal(start, p, lit, sizeof lit, also ? runs : NULL, sizeof runs, &n_runs);
            if (n < 2 || at + n + 1 > cap || (also && count >= max_branches))
                return 0;
            if (also) { /* the runs but the literal itself, which is the first run of its length */
                size_t a = 0, k = 0;
                bool skipped = false;
                n_also[count] = 0;
                for (const char *r = runs; k < n_runs; k++, r += strlen(r) + 1) {
                    size_t len = strlen(r);
                    if (!skipped && len == n && memcmp(r, lit, n) == 0) {
                        skipped = true;
                        continue;
                    }
                    memcpy(also[count] + a, r, len + 1);
                    a += len + 1;
                    n_also[count]++;
                }
            }
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

size_t md_log_required_literals(const char *pattern, char *out, size_t cap)
{
    return required_literals(pattern, out, cap, NULL, NULL, 0);
}

/* The literals of every pattern, by their first two bytes; the patterns without one in an
 * alternation of their own. */
static md_status build_literals(md_log_matcher *m, const char *const *patterns, size_t n, md_error *err)
{
    size_t text_cap = 64, text_len = 0, total = 1;
    for (size_t i = 0; i < n; i++)
        text_cap += 2 * strlen(patterns[i]) + 2; /* its literals and other runs, each with a NUL */
    m->literal_text = malloc(text_cap);
    m->literals = calloc(n * 4 + 1, sizeof *m->literals);
    m->by_bigram = malloc(65536 * sizeof *m->by_bigram);
    m->residual = calloc(n ? n : 1, sizeof *m->residual);
    if (!m->literal_text || !m->literals || !m->by_bigram || !m->residual)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    for (size_t b = 0; b < 65536; b++)
        m->by_bigram[b] = -1;
    for (size_t i = 0; i < n; i++) {
        char lits[512], also[4][256];
        size_t n_also[4];
        size_t count = required_literals(patterns[i], lits, sizeof lits, also, n_also, 4);
        if (count == 0 || text_len + 2 * strlen(patterns[i]) + 2 > text_cap) {
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
            lit->also = m->literal_text + text_len;
            lit->n_also = n_also[k];
            for (size_t a = 0, at = 0; a < n_also[k]; a++) {
                size_t also_len = strlen(also[k] + at) + 1;
                memcpy(m->literal_text + text_len, also[k] + at, also_len);
                text_len += also_len;
                at += also_len;
            }
            unsigned b = md_log_bigram(lit->text);
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
    unsigned long long *rejected;                /* per literal: candidates() */
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

/* Whether LINE (LEN bytes) holds each of the N NUL-terminated texts at ALSO: the other runs a
 * branch's match must hold besides its literal. A regexec costs far more than these memmems,
 * and a literal such as "torch" is on many lines where "torch==" is on none. */
static bool holds_all(const char *line, size_t len, const char *also, size_t n)
{
    for (size_t k = 0; k < n; k++, also += strlen(also) + 1)
        if (!memmem(line, len, also, strlen(also)))
            return false;
    return true;
}

/* Marks in CAND the patterns that LINE may match: those one of whose literals it holds (with the
 * other runs of that literal's branch), and the residual ones (when their alternation matches).
 * Returns whether any is marked. Where W is not NULL, LINE is known to be in W's normal form
 * only once this pass has looked at every byte: it returns -1 at the first byte that
 * normalising would change (lognorm.h), its offset in *UNCHANGED, and the normal form must be
 * passed instead. One pass over the bytes both decides that and finds the literals; most lines
 * need no other.
 * REJECTED[k] is the PASS (a number no other pass over a line is given, never 0) in which
 * literal k was last found without its branch's other runs, so that a literal found again in
 * that pass costs nothing. */
static int candidates(const md_log_matcher *m, const md_log_wording *w, const char *line, size_t len, bool *cand,
                      unsigned long long *rejected, unsigned long long pass, size_t *unchanged, bool *no_memory)
{
    bool any = false;
    memset(cand, 0, m->n_patterns * sizeof *cand);
    for (size_t i = 0; i < len; i++) {
        if (w && md_log_changes_at(w, line, i, len)) {
            *unchanged = i;
            return -1;
        }
        if (i + 1 == len)
            break;
        unsigned b = md_log_bigram(line + i);
        if (!(m->bigram_bits[b >> 6] >> (b & 63) & 1))
            continue;
        for (int k = m->by_bigram[b]; k >= 0; k = m->literals[k].next) {
            const md_log_literal *l = &m->literals[k];
            if (cand[l->pattern] || l->len > len - i || rejected[k] == pass ||
                (l->len > 2 && line[i + 2] != l->text[2]) || memcmp(line + i, l->text, l->len) != 0)
                continue;
            if (holds_all(line, len, l->also, l->n_also))
                any = cand[l->pattern] = true;
            else
                rejected[k] = pass;
        }
    }
    if (m->n_residual && (!m->has_prefilter || matches(&m->prefilter, line, no_memory)))
        for (size_t i = 0; i < m->n_patterns; i++)
            if (m->residual[i])
                any = cand[i] = true;
    return any;
}

static void match_line(scan_state *s, char *line, size_t len)
{
    md_log_result *r = s->r;
    const md_log_matcher *m = s->m;
    line[len] = '\0';
    const char *norm = line;
    /* r->lines counts this line: the two passes over it are 2 lines + 1 and 2 lines + 2 */
    size_t unchanged = 0;
    int any = candidates(m, &m->wording, line, len, s->cand, s->rejected, 2 * r->lines + 1, &unchanged,
                         &s->no_memory);
    if (any < 0) {
        size_t norm_len;
        norm = md_log_normal_form(&m->wording, line, len, unchanged, s->norm, sizeof s->norm, &norm_len);
        any = candidates(m, NULL, norm, norm_len, s->cand, s->rejected, 2 * r->lines + 2, &unchanged,
                         &s->no_memory);
    }
    if (any) {
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
    unsigned long long *rejected = calloc(m->n_literals ? m->n_literals : 1, sizeof *rejected);
    char *buf = malloc(READ_CHUNK);
    char *line = malloc(MD_LOG_LINE_MAX + 1);
    scan_state *s = calloc(1, sizeof *s);
    md_status st = MD_OK;
    if (!out->groups || !seen || !cand || !rejected || !buf || !line || !s) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    out->n_groups = m->n_groups;
    s->m = m;
    s->r = out;
    s->seen = seen;
    s->cand = cand;
    s->rejected = rejected;
    clean_state cs = CL_TEXT;
    size_t len = 0;
    bool cut = false, pending = false;
    for (;;) {
        size_t n = fread(buf, 1, READ_CHUNK, in);
        if (n == 0)
            break;
        out->bytes += n;
        size_t end = 0; /* where the current line ends in BUF (its '\n', or N); valid while >= i */
        for (size_t i = 0; i < n;) {
            if (cs == CL_TEXT) {
                /* the common bytes, up to the line's end or the next byte the cleaner must see
                 * (ESC, CR, NUL), copied at once without the state machine */
                if (end < i || i == 0) {
                    const char *nl = memchr(buf + i, '\n', n - i);
                    end = nl ? (size_t)(nl - buf) : n;
                }
                size_t j = i;
                while (j < end && buf[j] != 0x1b && buf[j] != '\r' && buf[j] != '\0')
                    j++;
                if (j > i) {
                    size_t take = j - i < MD_LOG_LINE_MAX - len ? j - i : MD_LOG_LINE_MAX - len;
                    memcpy(line + len, buf + i, take);
                    len += take;
                    cut |= take < j - i;
                    pending = true;
                    i = j;
                    continue;
                }
            }
            unsigned char c = (unsigned char)buf[i++];
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
    if (s->no_memory)
        st = md_fail(err, MD_ERR_NOMEM, "out of memory matching the lines of '%s'", name);
end:
    free(s);
    free(line);
    free(buf);
    free(seen);
    free(cand);
    free(rejected);
    if (st != MD_OK)
        md_log_result_free(out);
    return st;
}

void md_log_result_free(md_log_result *r)
{
    free(r->groups);
    memset(r, 0, sizeof *r);
}
