#include "regex_syntax.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Groups nest at most this deep in the estimate; deeper is refused (the recipes use 3). */
#define MAX_DEPTH 64

const char *md_re_skip_bracket(const char *p)
{
    p++;
    if (*p == '^')
        p++;
    if (*p == ']')
        p++;
    while (*p && *p != ']') {
        if (*p == '[' && (p[1] == ':' || p[1] == '=' || p[1] == '.')) {
            char close = p[1];
            p += 2;
            while (*p && !(*p == close && p[1] == ']'))
                p++;
            if (*p)
                p += 2;
            continue;
        }
        p++;
    }
    return *p ? p + 1 : p;
}

const char *md_re_skip_group(const char *p)
{
    int depth = 0;
    while (*p) {
        if (*p == '\\' && p[1]) {
            p += 2;
            continue;
        }
        if (*p == '[') {
            p = md_re_skip_bracket(p);
            continue;
        }
        if (*p == '(')
            depth++;
        else if (*p == ')' && --depth == 0)
            return p + 1;
        p++;
    }
    return p;
}

bool md_re_is_quantifier(const char *p)
{
    return *p == '*' || *p == '+' || *p == '?' || (*p == '{' && p[1] >= '0' && p[1] <= '9');
}

bool md_re_optional_quantifier(const char *p)
{
    return *p == '*' || *p == '?' || (*p == '{' && p[1] == '0' && (p[2] == ',' || p[2] == '}'));
}

const char *md_re_skip_quantifier(const char *p)
{
    if (*p == '{') {
        while (*p && *p != '}')
            p++;
        return *p ? p + 1 : p;
    }
    return p + 1;
}

/* ---- the expansion estimate ----------------------------------------------------------------- */

#define OVER ((size_t)MD_REGEX_MAX_NODES + 1)

static size_t sat_add(size_t a, size_t b)
{
    return a >= OVER || b >= OVER || a + b >= OVER ? OVER : a + b;
}

static size_t sat_mul(size_t a, size_t b)
{
    if (a == 0 || b == 0)
        return 0;
    return a >= OVER || b >= OVER || a > OVER / b ? OVER : a * b;
}

/* The number at P (digits), saturated; P moves past it. */
static size_t bound(const char **p)
{
    size_t n = 0;
    while (**p >= '0' && **p <= '9') {
        n = sat_add(sat_mul(n, 10), (size_t)(**p - '0'));
        (*p)++;
    }
    return n;
}

/* ATOM under the quantifier at Q: the copies regcomp makes of it, plus the repetition node. */
static size_t repeated(size_t atom, const char *q)
{
    if (*q == '*' || *q == '?')
        return sat_add(atom, 1);
    if (*q == '+')
        return sat_add(sat_mul(atom, 2), 1);
    q++; /* '{' */
    size_t lo = bound(&q), hi = lo;
    if (*q == ',') {
        q++;
        hi = (*q >= '0' && *q <= '9') ? bound(&q) : sat_add(lo, 1); /* {n,}: n copies and a star */
    }
    size_t copies = hi > lo ? hi : lo;
    return sat_add(sat_mul(atom, copies ? copies : 1), 1);
}

static size_t alternation(const char **pp, int depth);

/* A sequence of atoms, each with its quantifiers, up to '|', ')' or the end. */
static size_t sequence(const char **pp, int depth)
{
    const char *p = *pp;
    size_t total = 0;
    while (*p && *p != '|' && !(*p == ')' && depth > 0) && total < OVER) {
        size_t atom = 1;
        if (*p == '(') {
            p++;
            atom = depth >= MAX_DEPTH ? OVER : sat_add(alternation(&p, depth + 1), 1);
            if (*p == ')')
                p++;
        } else if (*p == '[') {
            p = md_re_skip_bracket(p);
        } else if (*p == '\\' && p[1]) {
            p += 2;
        } else {
            p++; /* a literal, an anchor, '.', or an unmatched ')' at the top */
        }
        while (md_re_is_quantifier(p) && atom < OVER) {
            atom = repeated(atom, p);
            p = md_re_skip_quantifier(p);
        }
        total = sat_add(total, atom);
    }
    *pp = p;
    return total;
}

static size_t alternation(const char **pp, int depth)
{
    size_t total = sequence(pp, depth);
    while (**pp == '|' && total < OVER) {
        (*pp)++;
        total = sat_add(sat_add(total, 1), sequence(pp, depth));
    }
    return total;
}

size_t md_regex_nodes(const char *pattern)
{
    const char *p = pattern;
    size_t total = alternation(&p, 0);
    return total < OVER && *p ? OVER : total; /* not all read: only past the limit */
}

md_status md_regex_compile(regex_t *re, const char *pattern, int flags, md_status code, const char *what,
                           md_error *err)
{
    if (md_regex_nodes(pattern) > MD_REGEX_MAX_NODES)
        return md_fail(err, code,
                       "%s: the pattern '%.60s%s' expands to more than %d states once its repetitions are "
                       "copied out; simplify it",
                       what, pattern, strlen(pattern) > 60 ? "..." : "", MD_REGEX_MAX_NODES);
    int rc = regcomp(re, pattern, flags);
    if (rc == REG_ESPACE) /* no memory: not the pattern's fault */
        return md_fail(err, MD_ERR_NOMEM, "out of memory compiling the pattern of %s", what);
    if (rc != 0) {
        char why[128];
        regerror(rc, re, why, sizeof why);
        return md_fail(err, code, "%s: bad pattern '%.60s%s': %s", what, pattern,
                       strlen(pattern) > 60 ? "..." : "", why);
    }
    return MD_OK;
}
