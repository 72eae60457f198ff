/* The expansion estimate in front of regcomp (regex_syntax.c): patterns whose repetitions glibc
 * would copy out into gigabytes are refused before regcomp sees them (fuzz_recipe found two
 * signatures files that did that, the signatures-...-oom files in tests/fuzz/regressions/recipe). */
#include <check.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include "diagnose/knowledge_load.h"
#include "base/regex_syntax.h"
#include "unit.h"

/* A bracket ends at its own ']': not at a ']' first in it, nor at the ']' that closes a
 * [:class:], [=equiv=] or [.coll.] inside it; a group ends at its ')' whatever brackets hold. */
START_TEST(brackets_and_groups_end_where_posix_says)
{
    static const struct {
        const char *re, *rest;
    } brackets[] = {
        { "[abc]x", "x" }, { "[]a]x", "x" }, { "[^]a]x", "x" }, { "[[:digit:]a]x", "x" },
        { "[[:digit:]]x", "x" }, { "[[=e=][.-.]]x", "x" }, { "[a(]x", "x" }, { "[abc", "" },
        { "[a[b]x", "x" },   /* a '[' not before ':', '=' or '.' is itself */
        /* a class's name starts after its opening ':', which cannot close it; the empty one */
        { "[[:]:]]x", "x" }, { "[[::]]x", "x" },
    };
    for (size_t i = 0; i < sizeof brackets / sizeof brackets[0]; i++)
        ck_assert_msg(strcmp(md_re_skip_bracket(brackets[i].re), brackets[i].rest) == 0, "%s -> '%s'",
                      brackets[i].re, md_re_skip_bracket(brackets[i].re));
    ck_assert_str_eq(md_re_skip_group("(a[)][[:alpha:])]\\)b)x"), "x");
    ck_assert_str_eq(md_re_skip_group("(a(b)c)x"), "x");
    /* a backslash that ends the text escapes nothing: the end, not past it */
    static const char open_end[] = "(a\\";
    ck_assert_ptr_eq(md_re_skip_group(open_end), open_end + strlen(open_end));
}
END_TEST

START_TEST(nodes_count_copies_of_repetitions)
{
    ck_assert_uint_eq(md_regex_nodes("abc"), 3);
    ck_assert_uint_eq(md_regex_nodes("a+"), 3);         /* a a* */
    ck_assert_uint_eq(md_regex_nodes("a*b?"), 4);
    ck_assert_uint_eq(md_regex_nodes("(ab){3}"), 10);   /* the group (3) three times, and the node */
    ck_assert_uint_eq(md_regex_nodes("a{2,5}"), 6);
    ck_assert_uint_eq(md_regex_nodes("a{2,}"), 4);
    ck_assert_uint_eq(md_regex_nodes("x|y"), 3);
    ck_assert_uint_eq(md_regex_nodes("[a-z(]+\\("), 4); /* a bracket and an escape are one atom each */
    ck_assert_uint_eq(md_regex_nodes("ab\\"), 3);      /* a backslash at the end is one atom, the last */
    ck_assert_uint_eq(md_regex_nodes(""), 0);
}
END_TEST

START_TEST(stacked_and_nested_repetitions_are_over_the_limit)
{
    char plus[64] = "a";
    memset(plus + 1, '+', 40);
    ck_assert_uint_gt(md_regex_nodes(plus), MD_REGEX_MAX_NODES);
    ck_assert_uint_gt(md_regex_nodes("(a{100}){100}{100}"), MD_REGEX_MAX_NODES);
    ck_assert_uint_gt(md_regex_nodes("a{99999999999999999999999}"), MD_REGEX_MAX_NODES);
    ck_assert_uint_gt(md_regex_nodes("((((((((((((((((x+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+"), MD_REGEX_MAX_NODES);
    /* nesting deeper than the estimate follows is refused, not recursed into */
    char deep[400];
    memset(deep, '(', 300);
    deep[300] = 'a';
    memset(deep + 301, ')', 60);
    deep[361] = '\0';
    ck_assert_uint_gt(md_regex_nodes(deep), MD_REGEX_MAX_NODES);
    /* just under and just over, by one copy */
    ck_assert_uint_le(md_regex_nodes("a{19999}"), MD_REGEX_MAX_NODES);
    ck_assert_uint_gt(md_regex_nodes("a{20000}"), MD_REGEX_MAX_NODES);
}
END_TEST

START_TEST(compile_refuses_with_the_caller_code_and_place)
{
    regex_t re;
    md_error err;
    md_error_clear(&err);
    ck_assert_int_eq(md_regex_compile(&re, "sm_([0-9]+)", REG_EXTENDED, MD_ERR_INTERNAL, "here", &err), MD_OK);
    regmatch_t g[2];
    ck_assert_int_eq(regexec(&re, "arch sm_90", 2, g, 0), 0);
    regfree(&re);
    ck_assert_int_eq(md_regex_compile(&re, "(a{200}){200}", REG_EXTENDED, MD_ERR_FORMAT, "jetson.json", &err),
                     MD_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.message, "jetson.json: the pattern '(a{200}){200}' expands to more than"));
    ck_assert_int_eq(md_regex_compile(&re, "a(b", REG_EXTENDED, MD_ERR_INTERNAL, "there", &err), MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "there: bad pattern 'a(b': "));
}
END_TEST

/* Every pattern the recipes hold is far under the limit (the limit leaves them room). */
START_TEST(the_recipes_patterns_are_far_under_the_limit)
{
    md_knowledge kb;
    md_error err;
    ck_assert_int_eq(md_knowledge_load(&kb, &err), MD_OK);
    for (size_t i = 0; i < kb.count; i++)
        for (size_t p = 0; p < kb.sigs[i].n_patterns; p++)
            ck_assert_uint_lt(md_regex_nodes(kb.sigs[i].patterns[p]), MD_REGEX_MAX_NODES / 10);
    md_knowledge_free(&kb);
}
END_TEST

/* A capture is compiled only where a finding is filled: the file is refused at load instead. */
START_TEST(a_capture_that_expands_without_bound_refuses_the_file)
{
    md_knowledge kb;
    md_error err;
    ck_assert_int_eq(md_knowledge_load(&kb, &err), MD_OK);
    json_t *doc = json_deep_copy((json_t *)kb.doc);
    md_knowledge_free(&kb);
    json_t *first = json_array_get(json_object_get(doc, "signatures"), 0);
    json_t *caps = json_object();
    json_object_set_new(caps, "binary", json_pack("[s]", "(x{200}){200}"));
    json_object_set_new(first, "captures", caps);
    ck_assert_int_eq(md_knowledge_load_doc(&kb, doc, &err), MD_ERR_INTERNAL); /* takes DOC over */
    ck_assert_ptr_nonnull(strstr(err.message, ", capture 'binary': the pattern '(x{200}){200}' expands"));
}
END_TEST

Suite *suite_regex_syntax(void)
{
    Suite *s = suite_create("regex_syntax");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, brackets_and_groups_end_where_posix_says);
    tcase_add_test(tc, nodes_count_copies_of_repetitions);
    tcase_add_test(tc, stacked_and_nested_repetitions_are_over_the_limit);
    tcase_add_test(tc, compile_refuses_with_the_caller_code_and_place);
    tcase_add_test(tc, the_recipes_patterns_are_far_under_the_limit);
    tcase_add_test(tc, a_capture_that_expands_without_bound_refuses_the_file);
    suite_add_tcase(s, tc);
    return s;
}
