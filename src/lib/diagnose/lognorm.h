/* The form of a log line that the patterns are matched against: what varies between two logs of
 * one failure, and says nothing about it, made the same.
 *
 * A log's line is kept as written (it is the evidence shown); the patterns of
 * recipes/signatures.json see its normalised form, and so do the captures and log facts read
 * from kept lines, through md_log_normalise. It makes, in this order:
 *   - every quote mark that stands for the English catalogues' '%s' (‘ ’ ‚ ‛ ` ´ ′ “ ” „ ‟ « » ‹ ›
 *     「 」 『 』) a plain ', and two ' in a row one; the plain " stays, since nvcc, EDG and Python
 *     print it as it is;
 *   - backslashes (one or a run: Windows paths, Python's repr of them) one '/';
 *   - tabs, no-break, thin and ideographic spaces a space, and a run of spaces one;
 *   - full-width ASCII (U+FF01..U+FF5E) and the ideographic comma and full stop ASCII, with a
 *     space after a colon, comma or semicolon as the English text has; dashes and the minus sign '-';
 *   - then the translated catalogue texts of recipes/signatures.json's log_translations (gcc's,
 *     binutils', glibc's and make's .po strings) their English msgid, longest first where two
 *     start at one byte. The translations' own texts are normalised the same way when loaded.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_LOGNORM_H
#define MD_LOGNORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "base/status.h"

#define MD_LOG_NORM_MAX 8192   /* bytes of a line that are normalised; the rest is cut */

/* One catalogue text and its English. */
typedef struct {
    const char *from;      /* normalised, into md_log_wording.text */
    size_t from_len;       /* at least 4 */
    const char *to;
    size_t to_len;
    int next;              /* the next translation with the same first two bytes, or -1 */
} md_log_translation;

/* What a byte is, for the scan that decides whether a line needs normalising. */
enum {
    MD_LOG_BYTE_PLAIN = 1,  /* copied as it is */
    MD_LOG_BYTE_ALNUM = 2,  /* an ASCII letter or digit: inside a word no translation starts */
    MD_LOG_BYTE_FIRST = 4,  /* the first byte of a translation's text */
    MD_LOG_BYTE_RUN = 8,    /* a space or quote: changed only as the second of a run */
};

typedef struct {
    md_log_translation *items;
    size_t n;
    char *text;
    int *by_bigram;                /* 65536 heads of lists, longest text first */
    uint64_t bigram_bits[1024];    /* which lists are not empty */
    size_t longest_from;           /* the longest translated text, in bytes */
    uint64_t head_bits[1024];      /* a hash of each text's first four bytes: most places where a
                                    * list is not empty (an "er", a "co") are passed over by it */
    unsigned char byte_class[256]; /* MD_LOG_BYTE_* */
} md_log_wording;

/* The list a text starting at S belongs to: its first two bytes. */
static inline unsigned md_log_bigram(const char *s)
{
    return (unsigned)(unsigned char)s[0] << 8 | (unsigned char)s[1];
}

/* A 16-bit hash of the four bytes at S. */
static inline unsigned md_log_head_hash(const char *s)
{
    uint32_t v;
    memcpy(&v, s, 4);
    return (unsigned)((v * 2654435761u) >> 16);
}

/* The translation whose text starts at TEXT (N bytes left), or NULL. Inline, with
 * md_log_changes_at, for the scan's loop over every byte of a log (logscan.c). */
static inline const md_log_translation *md_log_translation_at(const md_log_wording *w, const char *text, size_t n)
{
    if (n < 4)
        return NULL;
    unsigned h = md_log_head_hash(text);
    if (!(w->head_bits[h >> 6] >> (h & 63) & 1))
        return NULL;
    unsigned b = md_log_bigram(text);
    if (!(w->bigram_bits[b >> 6] >> (b & 63) & 1))
        return NULL;
    for (int k = w->by_bigram[b]; k >= 0; k = w->items[k].next)
        if (w->items[k].from_len <= n && memcmp(text, w->items[k].from, w->items[k].from_len) == 0)
            return &w->items[k];
    return NULL;
}

/* Whether normalising LINE (LEN bytes) changes something at byte I, knowing it changed nothing
 * before: a byte that is not copied as it is (the second of a run of spaces or quotes is the
 * first such), or a translation's text starting where no ASCII word goes on. */
static inline bool md_log_changes_at(const md_log_wording *w, const char *line, size_t i, size_t len)
{
    unsigned k = w->byte_class[(unsigned char)line[i]];
    if (!(k & MD_LOG_BYTE_PLAIN) && (!(k & MD_LOG_BYTE_RUN) || (i && line[i - 1] == line[i])))
        return true;
    if (!(k & MD_LOG_BYTE_FIRST))
        return false;
    unsigned prev = i ? w->byte_class[(unsigned char)line[i - 1]] : 0;
    return !(k & prev & MD_LOG_BYTE_ALNUM) && md_log_translation_at(w, line + i, len - i);
}

/* Builds the table from N pairs FROM[i] (a translated text) and TO[i] (its English). A FROM
 * shorter than four bytes once normalised is MD_ERR_INTERNAL (the pairs are embedded data). An
 * empty table (N 0) is valid: md_log_normalise then only normalises characters. A translation
 * is applied only where its text does not start inside an ASCII word. */
md_status md_log_wording_init(md_log_wording *w, const char *const *from, const char *const *to, size_t n,
                              md_error *err);
void md_log_wording_free(md_log_wording *w);

/* The normalised form of LINE (LEN bytes, NUL-terminated): LINE itself, without a copy, where
 * normalising changes nothing (most lines), else OUT (CAP bytes, at least 1), NUL-terminated and
 * cut at CAP - 1 bytes. Its length in *OUT_LEN. W is from md_log_wording_init. UNCHANGED is
 * how many bytes of LINE a caller already found md_log_changes_at false for (0 when none), so
 * that they are not looked at again. */
const char *md_log_normal_form(const md_log_wording *w, const char *line, size_t len, size_t unchanged, char *out,
                               size_t cap, size_t *out_len);

/* Writes the normalised form of LINE (LEN bytes) into OUT (CAP bytes, at least 1), NUL-terminated
 * and cut at CAP - 1 bytes; returns its length. */
size_t md_log_normalise(const md_log_wording *w, const char *line, size_t len, char *out, size_t cap);

#endif
