/* The streaming log matcher: cleaning, line cutting, hits kept per group, context. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diagnose/knowledge_load.h"
#include "diagnose/logscan.h"
#include "unit.h"

static size_t clean(char *buf, const char *text)
{
    snprintf(buf, 256, "%s", text);
    return md_log_clean(buf, strlen(buf));
}

START_TEST(clean_removes_cr_ansi_and_nul)
{
    char buf[256];
    clean(buf, "a\x1b[1;31mred\x1b[0m b\r");
    ck_assert_str_eq(buf, "ared b");
    clean(buf, "x\x1b[?25ly\x1b[K");          /* cursor codes and gcc's erase-line */
    ck_assert_str_eq(buf, "xy");
    clean(buf, "\x1b]0;title\x07" "after");      /* OSC ending in BEL */
    ck_assert_str_eq(buf, "after");
    clean(buf, "\x1b]8;;http://x\x1b\\link");  /* OSC ending in ESC backslash */
    ck_assert_str_eq(buf, "link");
    clean(buf, "[\x1b[200~paste\x1b[201~]");    /* bracketed paste: '~' ends a CSI sequence */
    ck_assert_str_eq(buf, "[paste]");
    clean(buf, "a\x1b~b");                        /* ESC ~, a two-byte escape, '~' its last byte */
    ck_assert_str_eq(buf, "ab");
    clean(buf, "a\x1b[12\rb");                    /* a CR cuts a sequence short and goes too */
    ck_assert_str_eq(buf, "ab");
    char nul[8] = { 'a', 0, 'b', 0 };
    ck_assert_uint_eq(md_log_clean(nul, 3), 3);
    ck_assert_int_eq(memcmp(nul, "a b", 3), 0);
}
END_TEST

/* Scans TEXT (LEN bytes) with two groups: 0 "needle", 1 "^other$". */
static md_log_result scan(const char *text, size_t len)
{
    static const char *const pats[] = { "needle", "^other$" };
    static const size_t groups[] = { 0, 1 };
    md_log_matcher m;
    md_error err;
    ck_assert_int_eq(md_log_matcher_init(&m, pats, groups, 2, 2, &err), MD_OK);
    ck_assert_uint_eq(m.n_residual, 0);
    FILE *f = fmemopen((void *)text, len, "rb");
    ck_assert_ptr_nonnull(f);
    md_log_result r;
    ck_assert_int_eq(md_log_scan(f, "mem", &m, &r, &err), MD_OK);
    fclose(f);
    md_log_matcher_free(&m);
    return r;
}

START_TEST(scan_counts_lines_hits_and_context)
{
    const char text[] = "one\ntwo\nthree needle\r\nother\nneedle again\nlast needle";
    md_log_result r = scan(text, sizeof text - 1);
    ck_assert_uint_eq(r.lines, 6);
    ck_assert_uint_eq(r.groups[0].count, 3);
    ck_assert_uint_eq(r.groups[0].n_hits, 3);
    ck_assert_uint_eq(r.groups[0].hits[0].line, 3);
    ck_assert_str_eq(r.groups[0].hits[0].text, "three needle");
    ck_assert_uint_eq(r.groups[0].hits[2].line, 6);  /* a last line without a newline counts */
    ck_assert_uint_eq(r.groups[0].n_context, 2);
    ck_assert_str_eq(r.groups[0].context[0].text, "one");
    ck_assert_str_eq(r.groups[0].context[1].text, "two");
    ck_assert_uint_eq(r.groups[1].count, 1);         /* "^other$" matches only after the CR went */
    ck_assert_uint_eq(r.groups[1].hits[0].line, 4);
    md_log_result_free(&r);
}
END_TEST

START_TEST(scan_keeps_a_bounded_number_of_hits)
{
    size_t n = 1000;
    char *text = malloc(n * 7 + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(text + i * 7, "needle\n", 7);
    md_log_result r = scan(text, n * 7);
    ck_assert_uint_eq(r.groups[0].count, n);
    ck_assert_uint_eq(r.groups[0].n_hits, MD_LOG_HITS_KEPT);
    md_log_result_free(&r);
    free(text);
}
END_TEST

START_TEST(scan_cuts_long_lines_without_splitting_them)
{
    size_t len = 3 * MD_LOG_LINE_MAX;
    char *text = malloc(len + 32);
    memset(text, 'a', len);
    /* past the kept part: not matched; the next line still is */
    memcpy(text + len - 6, "needle", 6);
    memcpy(text + len, "\nother\n", 7);
    md_log_result r = scan(text, len + 7);
    ck_assert_uint_eq(r.lines, 2);
    ck_assert_uint_eq(r.long_lines, 1);
    ck_assert_uint_eq(r.groups[0].count, 0);
    ck_assert_uint_eq(r.groups[1].count, 1);
    ck_assert_uint_eq(r.groups[1].hits[0].line, 2);
    md_log_result_free(&r);
    free(text);
}
END_TEST

static const char *literals_of(const char *pattern, char *out, size_t cap)
{
    char buf[512];
    size_t n = md_log_required_literals(pattern, buf, sizeof buf);
    size_t at = 0;
    out[0] = '\0';
    const char *l = buf;
    for (size_t i = 0; i < n; i++, l += strlen(l) + 1)
        at += (size_t)snprintf(out + at, cap - at, "%s[%s]", i ? "," : "", l);
    return out;
}

START_TEST(required_literals)
{
    char out[256];
    ck_assert_str_eq(literals_of("no kernel image is available", out, sizeof out), "[no kernel image is available]");
    ck_assert_str_eq(literals_of("nvcc fatal +: Unsupported gpu architecture '(compute|sm)_[0-9]+'", out, sizeof out),
                     "[: Unsupported gpu architecture ']");
    ck_assert_str_eq(literals_of("(MD5|md5) (checksum |hash )?mismatch", out, sizeof out), "[mismatch]");
    ck_assert_str_eq(literals_of("THC/THC\\.h: No such", out, sizeof out), "[THC/THC.h: No such]");
    ck_assert_str_eq(literals_of("abcd*e|xy[0-9]zz", out, sizeof out), "[abc],[xy]");
    ck_assert_str_eq(literals_of("ab+c", out, sizeof out), "[ab]");
    ck_assert_str_eq(literals_of("x.{0,12}y", out, sizeof out), "");      /* no run of two */
    ck_assert_str_eq(literals_of("a|bcd", out, sizeof out), "");           /* one branch has none */
    ck_assert_str_eq(literals_of("^#[0-9]+ \\[[^]]*\\] RUN ", out, sizeof out), "[] RUN ]");
}
END_TEST

START_TEST(a_pattern_without_literals_still_matches)
{
    static const char *const pats[] = { "x.{0,3}y", "needle" };
    static const size_t groups[] = { 0, 1 };
    md_log_matcher m;
    md_error err;
    ck_assert_int_eq(md_log_matcher_init(&m, pats, groups, 2, 2, &err), MD_OK);
    ck_assert_uint_eq(m.n_residual, 1);
    const char text[] = "a x--y b\nneedle\nnothing\n";
    FILE *in = fmemopen((void *)text, sizeof text - 1, "r");
    md_log_result r;
    ck_assert_int_eq(md_log_scan(in, "t", &m, &r, &err), MD_OK);
    fclose(in);
    ck_assert_uint_eq(r.groups[0].count, 1);
    ck_assert_uint_eq(r.groups[1].count, 1);
    md_log_result_free(&r);
    md_log_matcher_free(&m);
}
END_TEST

/* A line holding a pattern's literal but not the other runs its branch must hold costs no
 * regexec and matches nothing; holding them all, it is matched. The first pass looks at the
 * line as written; a line in another normal form is looked at again as the patterns see it, and
 * what the first pass ruled out is not ruled out there ("'q'" is only in the normal form). */
START_TEST(a_literal_without_its_branchs_other_runs_is_no_candidate)
{
    static const char *const pats[] = { "torch ?== ?[0-9]", "longliteral[0-9]+ 'q'" };
    static const size_t groups[] = { 0, 1 };
    md_log_matcher m;
    md_error err;
    ck_assert_int_eq(md_log_matcher_init(&m, pats, groups, 2, 2, &err), MD_OK);
    ck_assert_uint_eq(m.n_residual, 0);
    for (size_t k = 0; k < m.n_literals; k++)
        if (m.literals[k].pattern == 0) {
            ck_assert_str_eq(m.literals[k].text, "torch");
            ck_assert_uint_eq(m.literals[k].n_also, 1);
            ck_assert_str_eq(m.literals[k].also, "==");
        }
    const char text[] = "torch 2.0\n"                                  /* no "==": no match */
                        "site-packages/torch/lib torch == 2\n"          /* the second "torch" */
                        "torch==1.13\n"
                        "longliteral1 \xe2\x80\x98q\xe2\x80\x99\n"      /* 'q' only once normalised */
                        "longliteral1 q\n";
    FILE *in = fmemopen((void *)text, sizeof text - 1, "r");
    md_log_result r;
    ck_assert_int_eq(md_log_scan(in, "t", &m, &r, &err), MD_OK);
    fclose(in);
    ck_assert_uint_eq(r.groups[0].count, 2);
    ck_assert_uint_eq(r.groups[0].hits[0].line, 2);
    ck_assert_uint_eq(r.groups[0].hits[1].line, 3);
    ck_assert_uint_eq(r.groups[1].count, 1);
    ck_assert_uint_eq(r.groups[1].hits[0].line, 4);
    md_log_result_free(&r);
    md_log_matcher_free(&m);
}
END_TEST

START_TEST(knowledge_has_29_ids_with_compiled_patterns)
{
    md_knowledge kb;
    md_error err;
    ck_assert_int_eq(md_knowledge_load(&kb, &err), MD_OK);
    ck_assert_uint_eq(kb.count, 31);
    ck_assert_ptr_nonnull(md_knowledge_find(&kb, "no-kernel-image"));
    ck_assert_ptr_nonnull(md_knowledge_find(&kb, "ptx-jit-failure"));
    ck_assert_ptr_null(md_knowledge_find(&kb, "no-such-id"));
    /* one group per signature, then one per reading with its own patterns, log fact and hint */
    size_t readings = 0;
    for (size_t i = 0; i < kb.count; i++)
        for (size_t r = 0; r < kb.sigs[i].n_readings; r++)
            readings += kb.sigs[i].readings[r].n_patterns > 0;
    ck_assert_uint_eq(kb.matcher.n_groups, 31 + readings + kb.n_log_facts + kb.n_hints);
    ck_assert_uint_eq(kb.n_groups, kb.matcher.n_groups);
    /* every pattern of the data has a literal, so that ordinary lines cost no regexec */
    for (size_t i = 0; i < kb.matcher.n_patterns; i++)
        ck_assert_msg(!kb.matcher.residual[i], "pattern %zu has no literal of two bytes", i);
    md_knowledge_free(&kb);
}
END_TEST

/* A malformed entry is refused with its id in the message, the entry's strings still readable
 * when the message is made (they live in the document the failure frees; fuzz_recipe found
 * them read after the free once). */
START_TEST(knowledge_refuses_a_malformed_entry_by_name)
{
    json_t *doc = json_loads("{\"signatures\": [{\"id\": \"no-kernel-image\", \"severity\": \"error\"}]}", 0, NULL);
    ck_assert_ptr_nonnull(doc);
    md_knowledge kb;
    md_error err;
    ck_assert_int_eq(md_knowledge_load_doc(&kb, doc, &err), MD_ERR_INTERNAL); /* takes DOC over */
    ck_assert_str_eq(err.message, "signatures.json: entry 0 (no-kernel-image) is malformed");
    ck_assert_ptr_null(kb.sigs);
}
END_TEST

Suite *suite_logscan(void)
{
    Suite *s = suite_create("logscan");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, clean_removes_cr_ansi_and_nul);
    tcase_add_test(tc, scan_counts_lines_hits_and_context);
    tcase_add_test(tc, scan_keeps_a_bounded_number_of_hits);
    tcase_add_test(tc, scan_cuts_long_lines_without_splitting_them);
    tcase_add_test(tc, knowledge_has_29_ids_with_compiled_patterns);
    tcase_add_test(tc, knowledge_refuses_a_malformed_entry_by_name);
    tcase_add_test(tc, required_literals);
    tcase_add_test(tc, a_pattern_without_literals_still_matches);
    tcase_add_test(tc, a_literal_without_its_branchs_other_runs_is_no_candidate);
    suite_add_tcase(s, tc);
    return s;
}
