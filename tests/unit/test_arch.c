#include <jansson.h>
#include <string.h>
#include "recipes/arch.h"
#include "unit.h"

static md_gpu_target parse_ok(const char *text)
{
    md_gpu_target t;
    md_error err;
    md_error_clear(&err);
    ck_assert_msg(md_gpu_target_parse(text, &t, &err) == MD_OK, "'%s': %s", text, err.message);
    return t;
}

START_TEST(parses_sm_cc_and_names)
{
    ck_assert_uint_eq(parse_ok("sm_61").arch->sm, 61);
    ck_assert_uint_eq(parse_ok("6.1").arch->sm, 61);
    ck_assert_uint_eq(parse_ok("61").arch->sm, 61);
    ck_assert_uint_eq(parse_ok("compute_86").arch->sm, 86);
    ck_assert_uint_eq(parse_ok("sm_90a").arch->sm, 90);
    ck_assert_uint_eq(parse_ok("12.0").arch->sm, 120);
    ck_assert_uint_eq(parse_ok("sm_121").arch->sm, 121);
    ck_assert_uint_eq(parse_ok("sm86").arch->sm, 86); /* as some build scripts write it */
    ck_assert_uint_eq(parse_ok("p40").arch->sm, 61);
    ck_assert_uint_eq(parse_ok("Tesla P40").arch->sm, 61);
    ck_assert_uint_eq(parse_ok("tx2").arch->sm, 62);
    ck_assert_uint_eq(parse_ok("orin").arch->sm, 87);
    ck_assert_uint_eq(parse_ok("H100").arch->sm, 90);
    ck_assert_uint_eq(parse_ok("xavier").arch->sm, 72);
    ck_assert_str_eq(parse_ok("p40").label, "Tesla P40 (sm_61)");
    ck_assert_str_eq(parse_ok("8.6").label, "sm_86");
}
END_TEST

START_TEST(rejects_unknown)
{
    const char *bad[] = { "sm_99", "9.9", "p41", "", "sm_", "sm_61x", "6.", "abc", "sm_5" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        md_gpu_target t;
        md_error err;
        md_error_clear(&err);
        ck_assert_msg(md_gpu_target_parse(bad[i], &t, &err) == MD_ERR_ARGUMENT, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err.message, bad[i]) != NULL, "message does not name '%s': %s", bad[i], err.message);
    }
}
END_TEST

/* The table must list each architecture once, ascending (lookups stop at the first match): the
 * shipped file loads; the same file with one entry repeated, or two swapped, does not. */
START_TEST(the_table_is_refused_unless_strictly_ascending)
{
    json_error_t jerr;
    json_t *doc = json_load_file("recipes/architectures.json", 0, &jerr); /* make runs tests from the top */
    ck_assert_msg(doc, "recipes/architectures.json: %s", jerr.text);
    md_error err;
    ck_assert_int_eq(md_arch_table_load_json(doc, &err), MD_OK);
    json_t *archs = json_object_get(doc, "architectures");
    json_t *twice = json_deep_copy(doc), *swapped = json_deep_copy(doc);
    json_t *a = json_object_get(twice, "architectures");
    ck_assert_int_eq(json_array_insert_new(a, 1, json_deep_copy(json_array_get(archs, 1))), 0);
    ck_assert_int_eq(md_arch_table_load_json(twice, &err), MD_ERR_INTERNAL);
    ck_assert_msg(strstr(err.message, "not ascending"), "message: %s", err.message);
    a = json_object_get(swapped, "architectures");
    json_t *second = json_deep_copy(json_array_get(a, 1));
    ck_assert_int_eq(json_array_remove(a, 1), 0);
    ck_assert_int_eq(json_array_insert_new(a, 0, second), 0);
    ck_assert_int_eq(md_arch_table_load_json(swapped, &err), MD_ERR_INTERNAL);
    json_decref(twice);
    json_decref(swapped);
    json_decref(doc);
    md_arch_table_free();
    ck_assert_int_eq(md_arch_table_load(&err), MD_OK);
}
END_TEST

START_TEST(table_facts)
{
    md_error err;
    ck_assert_int_eq(md_arch_table_load(&err), MD_OK);
    /* the one thread rule: the build's MSDA_MAX_THREADS and diagnose's {threads} both ask it */
    ck_assert_uint_eq(md_arch_threads_at_max_registers(32768), 128);
    ck_assert_uint_eq(md_arch_threads_at_max_registers(65536), 256);
    ck_assert_uint_eq(md_arch_threads_at_max_registers(0), 0);
    ck_assert_uint_eq(md_arch_by_sm(53)->registers_per_block, 32768);
    ck_assert_uint_eq(md_arch_by_sm(62)->registers_per_block, 32768);
    ck_assert_uint_eq(md_arch_by_sm(61)->registers_per_block, 65536);
    ck_assert_uint_eq(md_arch_by_sm(86)->registers_per_block, 65536);
    ck_assert(!md_arch_by_sm(61)->fp16_fast);
    ck_assert(md_arch_by_sm(70)->half_atomic_add);
    ck_assert(!md_arch_by_sm(61)->half_atomic_add);
    ck_assert(md_arch_by_sm(60)->half2_atomic_add);
    ck_assert(md_arch_by_sm(80)->bf16 && !md_arch_by_sm(75)->bf16);
    ck_assert(md_arch_by_sm(90)->bf16_atomic_native && !md_arch_by_sm(89)->bf16_atomic_native);
    ck_assert(md_arch_by_sm(62)->jetson && md_arch_by_sm(87)->jetson && !md_arch_by_sm(86)->jetson);
    ck_assert_ptr_null(md_arch_by_sm(99));
    unsigned n;
    const md_arch *all = md_arch_all(&n);
    ck_assert_uint_eq(n, 19);
    ck_assert_uint_eq(all[0].sm, 50);
    ck_assert_uint_eq(all[n - 1].sm, 121);
}
END_TEST

Suite *suite_arch(void)
{
    Suite *s = suite_create("arch");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parses_sm_cc_and_names);
    tcase_add_test(tc, rejects_unknown);
    tcase_add_test(tc, table_facts);
    tcase_add_test(tc, the_table_is_refused_unless_strictly_ascending);
    suite_add_tcase(s, tc);
    return s;
}
