/* Reading logs as a stream in bounded memory, and matching failure patterns against each line.
 *
 * A log may be hundreds of MB, hold binary noise, NUL bytes and lines of megabytes, use CRLF
 * line ends and ANSI colour codes. The reader keeps at most MD_LOG_LINE_MAX bytes of a line
 * (the rest is dropped, not split into more lines), removes CR, ANSI CSI sequences
 * (ESC [ params intermediates final) and OSC sequences (ESC ] ... BEL or ESC \), and turns NUL
 * bytes into spaces so that regexec sees the whole kept line.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_LOGSCAN_H
#define MD_LOGSCAN_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "base/status.h"
#include "lognorm.h"

#define MD_LOG_LINE_MAX 8192     /* bytes of a line that are kept and matched */
#define MD_LOG_HITS_KEPT 3       /* matching lines remembered per group */
#define MD_LOG_CONTEXT 6         /* lines before the first hit remembered with it */
#define MD_LOG_TEXT_MAX 512      /* bytes of a remembered line */

typedef struct {
    unsigned long long line;     /* 1-based line number in the log */
    char text[MD_LOG_TEXT_MAX];  /* the cleaned line, cut at MD_LOG_TEXT_MAX - 1 bytes */
} md_log_line;

/* What one group of patterns (one finding ID) matched in a log. */
typedef struct {
    unsigned long long count;            /* matching lines */
    md_log_line hits[MD_LOG_HITS_KEPT];  /* the first ones */
    size_t n_hits;
    md_log_line context[MD_LOG_CONTEXT]; /* the lines just before the first hit, oldest first */
    size_t n_context;
} md_log_group_hits;

/* A literal that any match of a pattern must contain (its longest run of plain characters,
 * one per top-level branch): a line holding none of a pattern's literals cannot match it, so
 * most lines are rejected by one pass over their bytes, without a regexec. A line that holds it
 * but not every other run of its branch is rejected too. */
typedef struct {
    const char *text;      /* into md_log_matcher.literal_text */
    size_t len;            /* at least 2 */
    size_t pattern;
    const char *also;      /* the other runs its branch's matches must hold, each NUL-terminated */
    size_t n_also;
    int next;              /* the next literal with the same first two bytes, or -1 */
} md_log_literal;

typedef struct {
    regex_t *patterns;     /* compiled with REG_EXTENDED | REG_NOSUB */
    size_t *group_of;      /* pattern i belongs to group group_of[i] */
    size_t n_patterns;
    size_t n_groups;
    md_log_literal *literals;
    size_t n_literals;
    char *literal_text;
    int *by_bigram;        /* 65536 heads of literal lists, by the literal's first two bytes */
    uint64_t bigram_bits[1024]; /* which of those lists are not empty: 8 KB that stay in cache */
    bool *residual;        /* per pattern: no literal found, tried on every line */
    size_t n_residual;
    regex_t prefilter;     /* the residual patterns in one alternation */
    bool has_prefilter;
    md_log_wording wording; /* what lines are normalised with before matching (lognorm.h); set
                             * after md_log_matcher_init, freed with the matcher */
} md_log_matcher;

/* The literals any match of PATTERN must contain, one per top-level branch, into OUT (CAP
 * bytes, each NUL-terminated in turn); their count, or 0 when some branch has no run of at
 * least 2 plain characters. Exposed for tests. */
size_t md_log_required_literals(const char *pattern, char *out, size_t cap);

/* Compiles PATTERNS[i] (POSIX ERE) for group GROUPS[i], i < N; N_GROUPS groups in all.
 * A pattern regcomp refuses is MD_ERR_INTERNAL (the patterns are embedded data) naming it. */
md_status md_log_matcher_init(md_log_matcher *m, const char *const *patterns, const size_t *groups, size_t n,
                              size_t n_groups, md_error *err);
void md_log_matcher_free(md_log_matcher *m);

typedef struct {
    unsigned long long lines;      /* lines read */
    unsigned long long bytes;      /* bytes read */
    unsigned long long long_lines; /* lines cut at MD_LOG_LINE_MAX */
    md_log_group_hits *groups;     /* n_groups entries, owned */
    size_t n_groups;
} md_log_result;

/* Reads IN to its end through a fixed buffer, matching the normalised form of each cleaned line
 * (lognorm.h) and keeping the cleaned line as it was. Fills OUT (free with
 * md_log_result_free). A read error is MD_ERR_IO with NAME in the message. */
md_status md_log_scan(FILE *in, const char *name, const md_log_matcher *m, md_log_result *out, md_error *err);
void md_log_result_free(md_log_result *r);

/* Cleans one line in place as the reader does (CR, ANSI sequences, NUL); returns its new length.
 * Exposed for tests. */
size_t md_log_clean(char *line, size_t len);

#endif
