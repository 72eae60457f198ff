/* POSIX extended regular expressions as the recipes write them: the walkers that step over
 * their parts, and the one way patterns from data are compiled.
 *
 * glibc's regcomp copies a sub-expression once for every repetition it stands for (x{3} is
 * three copies, x+ two, and a quantifier on a quantified group multiplies), so a short pattern
 * such as "a++++++++++++++++++++++++++++++" or "(a{100}){100}" asks for gigabytes before it
 * matches anything. md_regex_compile estimates that expansion first and refuses a pattern past
 * MD_REGEX_MAX_NODES, so a damaged or hostile signatures file gives an error, not an OOM.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_REGEX_SYNTAX_H
#define MD_REGEX_SYNTAX_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include "status.h"

/* Far above the largest pattern the recipes hold (a few hundred), and small enough that
 * regcomp's copies stay within a few MB. */
#define MD_REGEX_MAX_NODES 20000

/* The byte after the bracket expression that starts at P ('['), or the string's end. */
const char *md_re_skip_bracket(const char *p);

/* The byte after the group that starts at P ('('), or the string's end. */
const char *md_re_skip_group(const char *p);

/* Whether P starts a quantifier (*, +, ?, or an interval {n...}). */
bool md_re_is_quantifier(const char *p);

/* Whether the quantifier at P allows zero occurrences. */
bool md_re_optional_quantifier(const char *p);

/* The byte after the quantifier at P. */
const char *md_re_skip_quantifier(const char *p);

/* The number of parse-tree nodes PATTERN expands to once every repetition is copied out, as
 * regcomp does; saturates at MD_REGEX_MAX_NODES + 1. */
size_t md_regex_nodes(const char *pattern);

/* regcomp(RE, PATTERN, FLAGS), after refusing a pattern that expands past MD_REGEX_MAX_NODES;
 * a refused pattern, or one regcomp rejects (its message is given), fails with CODE (the
 * caller's: MD_ERR_INTERNAL for the embedded recipes); regcomp out of memory is MD_ERR_NOMEM.
 * WHAT names the pattern's place in the
 * message (e.g. "signatures.json"). On success the caller regfree()s RE. */
md_status md_regex_compile(regex_t *re, const char *pattern, int flags, md_status code, const char *what,
                           md_error *err);

#endif /* MD_REGEX_SYNTAX_H */
