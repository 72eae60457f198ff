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

#include <stddef.h>
#include <stdint.h>
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
    uint64_t head_bits[1024];      /* a hash of each text's first four bytes: most places where a
                                    * list is not empty (an "er", a "co") are passed over by it */
    unsigned char byte_class[256]; /* MD_LOG_BYTE_* */
} md_log_wording;

/* Builds the table from N pairs FROM[i] (a translated text) and TO[i] (its English). A FROM
 * shorter than four bytes once normalised is MD_ERR_INTERNAL (the pairs are embedded data). An
 * empty table (N 0) is valid: md_log_normalise then only normalises characters. A translation
 * is applied only where its text does not start inside an ASCII word. */
md_status md_log_wording_init(md_log_wording *w, const char *const *from, const char *const *to, size_t n,
                              md_error *err);
void md_log_wording_free(md_log_wording *w);

/* The normalised form of LINE (LEN bytes, NUL-terminated): LINE itself, without a copy, where
 * normalising changes nothing (most lines), else OUT (CAP bytes, at least 1), NUL-terminated and
 * cut at CAP - 1 bytes. Its length in *OUT_LEN. W is from md_log_wording_init. */
const char *md_log_normal_form(const md_log_wording *w, const char *line, size_t len, char *out, size_t cap,
                               size_t *out_len);

/* Writes the normalised form of LINE (LEN bytes) into OUT (CAP bytes, at least 1), NUL-terminated
 * and cut at CAP - 1 bytes; returns its length. */
size_t md_log_normalise(const md_log_wording *w, const char *line, size_t len, char *out, size_t cap);

#endif
