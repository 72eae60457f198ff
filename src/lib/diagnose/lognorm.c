#include "lognorm.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- characters --------------------------------------------------------------------------- */

typedef struct {
    char *out;
    size_t at, cap;        /* cap: bytes that may be written, the NUL excluded */
    bool in_backslashes;   /* the last input was a backslash: the run gives one '/' */
} writer;

/* Appends the ASCII byte C with the rules that apply to it: a tab is a space, a run of spaces
 * or of quotes one, a backslash (or a run of them) a '/', a backquote a quote. */
static void put(writer *w, unsigned char c)
{
    bool backslash = c == '\\';
    if (backslash) {
        if (w->in_backslashes)
            return;
        c = '/';
    }
    w->in_backslashes = backslash;
    if (c == '\t')
        c = ' ';
    else if (c == '`')
        c = '\'';
    if ((c == ' ' || c == '\'') && w->at && (unsigned char)w->out[w->at - 1] == c)
        return;
    if (w->at < w->cap)
        w->out[w->at++] = (char)c;
}

/* What the UTF-8 sequence at P (N bytes left, P[0] >= 0x80) stands for: its ASCII in *C, a
 * space to add after it in *SPACE_AFTER; the bytes it takes, or 0 when it is kept as it is. */
static size_t special(const unsigned char *p, size_t n, unsigned char *c, bool *space_after)
{
    *space_after = false;
    if (n >= 2 && p[0] == 0xc2) {
        if (p[1] == 0xa0)
            *c = ' ';                                     /* no-break space */
        else if (p[1] == 0xab || p[1] == 0xbb || p[1] == 0xb4)
            *c = '\'';                                    /* « » ´ */
        else
            return 0;
        return 2;
    }
    if (n < 3)
        return 0;
    if (p[0] == 0xe2 && p[1] == 0x80) {
        if (p[2] <= 0x8a || p[2] == 0xaf)
            *c = ' ';                                     /* en quad .. hair space, narrow no-break */
        else if (p[2] >= 0x90 && p[2] <= 0x95)
            *c = '-';                                     /* hyphens and dashes */
        else if ((p[2] >= 0x98 && p[2] <= 0x9f) || p[2] == 0xb2 || p[2] == 0xb9 || p[2] == 0xba)
            *c = '\'';                                    /* ‘ ’ ‚ ‛ “ ” „ ‟ ′ ‹ › */
        else
            return 0;
        return 3;
    }
    if (p[0] == 0xe2 && p[1] == 0x88 && p[2] == 0x92) {
        *c = '-';                                         /* minus sign */
        return 3;
    }
    if (p[0] == 0xe3 && p[1] == 0x80) {
        if (p[2] == 0x80)
            *c = ' ';                                     /* ideographic space */
        else if (p[2] == 0x81 || p[2] == 0x82) {
            *c = p[2] == 0x81 ? ',' : '.';                /* 、 。 */
            *space_after = true;
        } else if (p[2] >= 0x8c && p[2] <= 0x8f)
            *c = '\'';                                    /* 「 」 『 』 */
        else
            return 0;
        return 3;
    }
    if (p[0] == 0xef && ((p[1] == 0xbc && p[2] >= 0x81) || (p[1] == 0xbd && p[2] <= 0x9e))) {
        *c = (unsigned char)(p[1] == 0xbc ? 0x21 + (p[2] - 0x81) : 0x60 + (p[2] - 0x80)); /* U+FF01..U+FF5E */
        *space_after = *c == ':' || *c == ',' || *c == ';';
        return 3;
    }
    return 0;
}

/* The ASCII bytes put() changes: tab, space, quote (bits of the first word), backslash and
 * backquote (the second). */
static const uint64_t ascii_changed[2] = {
    (uint64_t)1 << '\t' | (uint64_t)1 << ' ' | (uint64_t)1 << '\'',
    (uint64_t)1 << ('\\' - 64) | (uint64_t)1 << ('`' - 64),
};

/* Whether byte C never needs more than a copy: not one of the ASCII bytes put() changes, nor
 * the first byte of a UTF-8 sequence special() reads. */
static inline bool plain(unsigned char c)
{
    if (c >= 0x80)
        return c != 0xc2 && c != 0xe2 && c != 0xe3 && c != 0xef;
    return !(ascii_changed[c >> 6] >> (c & 63) & 1);
}

static inline bool ascii_alnum(unsigned char c)
{
    return (unsigned)((c | 0x20) - 'a') < 26 || (unsigned)(c - '0') < 10;
}

/* The characters of LINE normalised into OUT (CAP bytes, no NUL); the length. CLS is a
 * md_log_wording's byte_class, or NULL (while that table is built). */
static size_t normalise_chars(const unsigned char *cls, const char *line, size_t len, char *out, size_t cap)
{
    writer w = { .out = out, .cap = cap };
    const unsigned char *p = (const unsigned char *)line;
    for (size_t i = 0; i < len;) {
        size_t run = i;
        if (cls)
            while (run < len && (cls[p[run]] & MD_LOG_BYTE_PLAIN))
                run++;
        else
            while (run < len && plain(p[run]))
                run++;
        if (run > i) { /* the common bytes, copied as they are */
            size_t keep = run - i < w.cap - w.at ? run - i : w.cap - w.at;
            memcpy(out + w.at, p + i, keep);
            w.at += keep;
            w.in_backslashes = false;
            i = run;
            continue;
        }
        unsigned char c;
        bool space_after;
        size_t took = p[i] >= 0x80 ? special(p + i, len - i, &c, &space_after) : 0;
        if (took == 0) {
            if (p[i] < 0x80)
                put(&w, p[i]);
            else {
                w.in_backslashes = false;
                if (w.at < w.cap)
                    out[w.at++] = (char)p[i];
            }
            i++;
            continue;
        }
        put(&w, c);
        if (space_after)
            put(&w, ' ');
        i += took;
    }
    return w.at;
}

/* ---- translations ------------------------------------------------------------------------- */

static int by_length(const void *a, const void *b)
{
    const md_log_translation *x = a, *y = b;
    return x->from_len < y->from_len ? -1 : x->from_len > y->from_len;
}

md_status md_log_wording_init(md_log_wording *w, const char *const *from, const char *const *to, size_t n,
                              md_error *err)
{
    memset(w, 0, sizeof *w);
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += strlen(from[i]) + strlen(to[i]) + 2;
    w->items = calloc(n ? n : 1, sizeof *w->items);
    w->text = malloc(cap);
    w->by_bigram = malloc(65536 * sizeof *w->by_bigram);
    if (!w->items || !w->text || !w->by_bigram) {
        md_log_wording_free(w);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        md_log_translation *t = &w->items[i];
        /* normalised as the lines are, so the data may quote the catalogues as they are */
        t->from = w->text + at;
        t->from_len = normalise_chars(NULL, from[i], strlen(from[i]), w->text + at, cap - at - 1);
        w->text[at + t->from_len] = '\0';
        at += t->from_len + 1;
        t->to = w->text + at;
        t->to_len = normalise_chars(NULL, to[i], strlen(to[i]), w->text + at, cap - at - 1);
        w->text[at + t->to_len] = '\0';
        at += t->to_len + 1;
        if (t->from_len > w->longest_from)
            w->longest_from = t->from_len;
        if (t->from_len < 4) {
            md_status st = md_fail(err, MD_ERR_INTERNAL, "signatures.json: the translation of '%s' is shorter "
                                   "than four bytes", to[i]);
            md_log_wording_free(w);
            return st;
        }
    }
    w->n = n;
    for (unsigned c = 0; c < 256; c++)
        w->byte_class[c] = (unsigned char)((plain((unsigned char)c) ? MD_LOG_BYTE_PLAIN : 0) |
                                           (ascii_alnum((unsigned char)c) ? MD_LOG_BYTE_ALNUM : 0) |
                                           (c == ' ' || c == '\'' ? MD_LOG_BYTE_RUN : 0));
    for (size_t i = 0; i < n; i++)
        w->byte_class[(unsigned char)w->items[i].from[0]] |= MD_LOG_BYTE_FIRST;
    qsort(w->items, n, sizeof *w->items, by_length);
    for (size_t b = 0; b < 65536; b++)
        w->by_bigram[b] = -1;
    for (size_t i = 0; i < n; i++) { /* shortest first, each at the head: the longest leads */
        unsigned b = md_log_bigram(w->items[i].from);
        w->items[i].next = w->by_bigram[b];
        w->by_bigram[b] = (int)i;
        w->bigram_bits[b >> 6] |= (uint64_t)1 << (b & 63);
        unsigned h = md_log_head_hash(w->items[i].from);
        w->head_bits[h >> 6] |= (uint64_t)1 << (h & 63);
    }
    return MD_OK;
}

void md_log_wording_free(md_log_wording *w)
{
    free(w->items);
    free(w->text);
    free(w->by_bigram);
    memset(w, 0, sizeof *w);
}

const char *md_log_normal_form(const md_log_wording *w, const char *line, size_t len, size_t unchanged, char *out,
                               size_t cap, size_t *out_len)
{
    /* Most lines need nothing: one pass that only looks, and no copy. A catalogue text never
     * starts inside an ASCII word, so it is looked for only where a word (or other text) starts. */
    const unsigned char *cls = w->byte_class;
    unsigned prev;
    size_t i = unchanged < len ? unchanged : len;
    while (i < len && !md_log_changes_at(w, line, i, len))
        i++;
    if (i == len) {
        *out_len = len;
        return line;
    }
    /* the bytes before I are unchanged: copied at once, but for the last, which the second of a
     * run of spaces or quotes at I needs to see */
    char chars[MD_LOG_NORM_MAX];
    size_t prefix = i ? (i - 1 < sizeof chars ? i - 1 : sizeof chars) : 0, at = 0, copied = 0;
    memcpy(chars, line, prefix);
    size_t n = prefix + normalise_chars(cls, line + prefix, len - prefix, chars + prefix, sizeof chars - prefix);
    /* No translation lies within the unchanged prefix (the look above would have stopped at it),
     * so one can only start where its text reaches past the prefix: the bytes before that are
     * not looked at again (random bytes and long lines would be, twice). */
    i = prefix > w->longest_from ? prefix - w->longest_from : 0;
    for (prev = i ? cls[(unsigned char)chars[i - 1]] : 0; w->n && i + 4 <= n && at < cap - 1;) {
        unsigned k = cls[(unsigned char)chars[i]];
        const md_log_translation *hit = (k & MD_LOG_BYTE_FIRST) && !(k & prev & MD_LOG_BYTE_ALNUM)
                                            ? md_log_translation_at(w, chars + i, n - i) : NULL;
        prev = k;
        if (!hit) {
            i++;
            continue;
        }
        prev = 0;
        size_t keep = i - copied < cap - 1 - at ? i - copied : cap - 1 - at; /* the text before it */
        memcpy(out + at, chars + copied, keep);
        at += keep;
        keep = hit->to_len < cap - 1 - at ? hit->to_len : cap - 1 - at;
        memcpy(out + at, hit->to, keep);
        at += keep;
        i += hit->from_len;
        copied = i;
    }
    size_t keep = n - copied < cap - 1 - at ? n - copied : cap - 1 - at;
    memcpy(out + at, chars + copied, keep);
    at += keep;
    out[at] = '\0';
    *out_len = at;
    return out;
}

size_t md_log_normalise(const md_log_wording *w, const char *line, size_t len, char *out, size_t cap)
{
    size_t n;
    const char *form = md_log_normal_form(w, line, len, 0, out, cap, &n);
    if (form == line) {
        n = n < cap - 1 ? n : cap - 1;
        memmove(out, line, n);
        out[n] = '\0';
    }
    return n;
}
