#include <string.h>
#include "recipes/driver_table.h"
#include "recipes/toolkit_table.h"
#include "unit.h"

/* What each toolkit's output needs of a driver (recipes/toolkits.json). */
START_TEST(what_code_needs_of_a_driver)
{
    ck_assert_int_eq(md_sass_needs_cuda(11, 8), 11000); /* minor-version compatibility */
    ck_assert_int_eq(md_sass_needs_cuda(11, 5), 11000); /* a release between rows: 11.4's */
    ck_assert_int_eq(md_sass_needs_cuda(12, 9), 12000);
    ck_assert_int_eq(md_sass_needs_cuda(13, 0), 13000);
    ck_assert_int_eq(md_sass_needs_cuda(10, 2), 10020); /* none before 11 */
    ck_assert_int_eq(md_sass_needs_cuda(14, 1), 14000); /* a major the table lacks: its .0 */
    ck_assert_int_eq(md_sass_needs_cuda(9, 2), 0);
    ck_assert_int_eq(md_ptx_needs_cuda(65), 10020);
    ck_assert_int_eq(md_ptx_needs_cuda(78), 11080);
    ck_assert_int_eq(md_ptx_needs_cuda(90), 13000);
    ck_assert_int_eq(md_ptx_needs_cuda(82), 12040); /* the oldest row writing 8.2 or newer */
    ck_assert_int_eq(md_ptx_needs_cuda(95), 0);
    char text[16];
    md_cuda_version_text(12020, text, sizeof text);
    ck_assert_str_eq(text, "12.2");
    md_cuda_version_text(0, text, sizeof text);
    ck_assert_str_eq(text, "unknown");
    ck_assert_int_eq(md_cuda_version_parse("12.2"), 12020);
    ck_assert_int_eq(md_cuda_version_parse("12.2.140"), 12020);
    ck_assert_int_eq(md_cuda_version_parse("12"), -1);
    ck_assert_int_eq(md_cuda_version_parse("12.x"), -1);
    ck_assert_int_eq(md_cuda_version_parse("0.1"), -1);
    ck_assert_int_eq(md_cuda_version_parse("12.2."), -1);
    ck_assert_int_eq(md_cuda_version_parse(NULL), -1);
}
END_TEST

START_TEST(drivers_by_name)
{
    static const struct {
        const char *text;
        int cuda;
        bool tegra;
    } good[] = {
        { "535", 12020, false }, { "535.104.05", 12020, false }, { " 470.82.01 ", 11040, false },
        { "450", 11000, false }, { "580.65.06", 13000, false }, { "999", 13000, false },
        { "537", 12020, false }, /* a branch the table lacks: the newest below it */
        { "r32", 10020, true }, { "R35", 11040, true }, { "r36.4.3", 12020, true }, { "r38", 13000, true },
        { "cuda12.2", 12020, false }, { "CUDA-11.8", 11080, false },
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        md_driver d;
        md_error err;
        md_error_clear(&err);
        ck_assert_msg(md_driver_parse(good[i].text, &d, &err) == MD_OK, "%s: %s", good[i].text, err.message);
        ck_assert_msg(d.cuda == good[i].cuda && d.tegra == good[i].tegra, "%s: %d %d", good[i].text, d.cuda, d.tegra);
    }
    static const char *const bad[] = { "", "x", "53", "535.", "535.a", "r", "r31", "cuda", "cuda12", "12.2",
                                       "-535", "5350000" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        md_driver d;
        md_error err;
        md_error_clear(&err);
        ck_assert_msg(md_driver_parse(bad[i], &d, &err) == MD_ERR_ARGUMENT, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err.message, bad[i]) != NULL, "'%s' not named: %s", bad[i], err.message);
    }
    md_driver d;
    md_error err;
    ck_assert_int_eq(md_driver_parse("396", &d, &err), MD_ERR_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "older than every branch"));
}
END_TEST

START_TEST(the_first_driver_of_a_cuda_version)
{
    char out[24];
    ck_assert(md_driver_min_for_cuda(11000, out, sizeof out));
    ck_assert_str_eq(out, "450.80.02");
    ck_assert(md_driver_min_for_cuda(13000, out, sizeof out));
    ck_assert_str_eq(out, "580.65.06");
    ck_assert(md_driver_min_for_cuda(12020, out, sizeof out)); /* no floor: the branch */
    ck_assert_str_eq(out, "535");
    ck_assert(!md_driver_min_for_cuda(14000, out, sizeof out));
    /* what code needs, said with the driver where the table knows it and in words where not */
    char need[64];
    md_driver_need_text(13000, need, sizeof need);
    ck_assert_str_eq(need, "driver >= 580.65.06 (CUDA 13.0)");
    md_driver_need_text(14000, need, sizeof need);
    ck_assert_str_eq(need, "a driver of CUDA 14.0 or newer");
    ck_assert_int_eq(md_driver_cuda_of_branch(440), 10020);
    ck_assert_int_eq(md_driver_cuda_of_branch(100), 0);
}
END_TEST

static md_status load_text(const char *text, md_error *err)
{
    json_t *doc = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    md_status st = md_driver_table_load_json(doc, err);
    json_decref(doc);
    return st;
}

START_TEST(a_malformed_table_is_named)
{
    static const struct {
        const char *json, *says;
    } bad[] = {
        { "{}", "missing 'branches'" },
        { "{\"branches\": [{\"branch\": 535}], \"floors\": []}", "branch entry 0" },
        { "{\"branches\": [{\"branch\": 535, \"cuda\": \"12.2\"}, {\"branch\": 525, \"cuda\": \"12.0\"}], \"floors\": []}",
          "branch 525: not after branch 535" },
        { "{\"branches\": [{\"branch\": 535, \"cuda\": \"12.2\"}], \"floors\": [{\"cuda\": \"12.2\"}]}", "floor entry 0" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        md_error err;
        md_error_clear(&err);
        ck_assert_int_eq(load_text(bad[i].json, &err), MD_ERR_INTERNAL);
        ck_assert_msg(strstr(err.message, bad[i].says) != NULL, "'%s' not in '%s'", bad[i].says, err.message);
        md_driver_table_free();
    }
    ck_assert_int_eq(md_driver_cuda_of_branch(535), 12020); /* reloads the embedded recipe */
    md_driver_table_free();
}
END_TEST

Suite *suite_driver_table(void)
{
    Suite *s = suite_create("driver_table");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, what_code_needs_of_a_driver);
    tcase_add_test(tc, drivers_by_name);
    tcase_add_test(tc, the_first_driver_of_a_cuda_version);
    tcase_add_test(tc, a_malformed_table_is_named);
    suite_add_tcase(s, tc);
    return s;
}
