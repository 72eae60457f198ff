#include <string.h>
#include "machine/toolkit.h"
#include "recipes/toolkit_table.h"
#include "unit.h"

START_TEST(rows_from_recipe)
{
    md_error err;
    ck_assert_int_eq(md_toolkit_table_load(&err), MD_OK);
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    ck_assert_uint_eq(n, 11);
    ck_assert_str_eq(all[0].version, "10.2");
    ck_assert_str_eq(all[n - 1].version, "13.0");
    const md_toolkit_row *r = md_toolkit_row_find("11.8");
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->major, 11);
    ck_assert_uint_eq(r->minor, 8);
    ck_assert_uint_eq(r->sm_min, 35);
    ck_assert_uint_eq(r->sm_max, 90);
    ck_assert_uint_eq(r->max_gcc, 11);
    ck_assert_str_eq(r->min_driver, "520.61.05");
    ck_assert_str_eq(r->redist_release, "11.8.0");
    ck_assert_str_eq(md_toolkit_row_find("10.2")->redist_release, "");
    ck_assert_ptr_null(md_toolkit_row_find("11.9"));
    ck_assert_ptr_null(md_toolkit_row_find(""));
    md_toolkit_table_free();
}
END_TEST

START_TEST(limits_of_an_nvcc)
{
    /* an unlisted minor takes the nearest older row of its major */
    ck_assert_str_eq(md_toolkit_row_for(12, 5)->version, "12.4");
    ck_assert_str_eq(md_toolkit_row_for(12, 9)->version, "12.9");
    ck_assert_str_eq(md_toolkit_row_for(13, 2)->version, "13.0");
    ck_assert_ptr_null(md_toolkit_row_for(9, 2));
    ck_assert_ptr_null(md_toolkit_row_for(14, 0));
    ck_assert_uint_eq(md_toolkit_max_gcc(11, 8), 11);
    ck_assert_uint_eq(md_toolkit_max_gcc(12, 5), 13);
    ck_assert_uint_eq(md_toolkit_max_gcc(9, 0), 0);
    md_toolkit_table_free();
}
END_TEST

START_TEST(versions_for_an_sm)
{
    ck_assert_str_eq(md_toolkit_row_newest_for(61, 0)->version, "12.9");
    ck_assert_str_eq(md_toolkit_row_newest_for(61, 12040)->version, "12.4");
    ck_assert_str_eq(md_toolkit_row_newest_for(0, 11080)->version, "11.8");
    ck_assert_str_eq(md_toolkit_row_newest_for(0, 0)->version, "13.0");
    ck_assert_ptr_null(md_toolkit_row_newest_for(120, 12040));
    ck_assert_ptr_null(md_toolkit_row_newest_for(20, 0));

    /* whose SASS a driver loads (sass_needs_cuda): a 12.2 driver loads any 12.x SASS, so 12.9 for
     * sm_90 and 11.8 for sm_35 (12.x dropped it); a 10.2 driver only 10.2's, which fetch lacks */
    ck_assert_str_eq(md_toolkit_row_newest_loading(90, 12020, false)->version, "12.9");
    ck_assert_str_eq(md_toolkit_row_newest_loading(35, 12020, true)->version, "11.8");
    ck_assert_str_eq(md_toolkit_row_newest_loading(0, 13000, true)->version, "13.0");
    ck_assert_str_eq(md_toolkit_row_newest_loading(62, 10020, false)->version, "10.2");
    ck_assert_ptr_null(md_toolkit_row_newest_loading(62, 10020, true));
    ck_assert_ptr_null(md_toolkit_row_newest_loading(90, 9020, false));

    const md_toolkit_row *oldest, *newest;
    ck_assert(md_toolkit_rows_targeting(61, &oldest, &newest));
    ck_assert_str_eq(oldest->version, "10.2");
    ck_assert_str_eq(newest->version, "12.9");
    ck_assert(!md_toolkit_rows_targeting(20, &oldest, &newest));
    ck_assert_ptr_null(oldest);
    ck_assert_ptr_null(newest);

    char text[64];
    md_toolkits_supporting(61, text, sizeof text);
    ck_assert_str_eq(text, "CUDA 10.2 to 12.9");
    md_toolkits_supporting(30, text, sizeof text);
    ck_assert_str_eq(text, "CUDA 10.2");
    md_toolkits_supporting(20, text, sizeof text);
    ck_assert_str_eq(text, "no CUDA toolkit in the table");
    md_toolkit_table_free();
}
END_TEST

static md_status load_text(const char *text, md_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    md_status st = md_toolkit_table_load_json(doc, err);
    json_decref(doc);
    return st;
}

START_TEST(malformed_rows_are_named)
{
    static const struct {
        const char *json, *says;
    } bad[] = {
        { "{}", "missing 'toolkits'" },
        { "{\"toolkits\": [{\"version\": \"12\"}]}", "entry 0" },
        { "{\"toolkits\": [{\"version\": \"12.0\", \"sm_min\": 90, \"sm_max\": 50, \"max_gcc\": 12,"
          " \"min_driver\": \"525\"}]}", "CUDA 12.0): bad sm_min" },
        { "{\"toolkits\": [{\"version\": \"12.0\", \"sm_min\": 50, \"sm_max\": 90, \"max_gcc\": 12}]}",
          "CUDA 12.0): bad min_driver" },
        { "{\"toolkits\": [{\"version\": \"12.0\", \"sm_min\": 50, \"sm_max\": 90, \"max_gcc\": 12, \"min_driver\": \"525\","
          " \"redist_release\": \"12.1.0\"}]}", "CUDA 12.0): bad redist_release" },
        { "{\"toolkits\": [{\"version\": \"12.0\", \"sm_min\": 50, \"sm_max\": 90, \"max_gcc\": 12, \"min_driver\": \"525\","
          " \"ptx_isa\": \"8.0\", \"sass_needs_cuda\": \"12.0\"},"
          " {\"version\": \"11.8\", \"sm_min\": 35, \"sm_max\": 90, \"max_gcc\": 11, \"min_driver\": \"520\","
          " \"ptx_isa\": \"7.8\", \"sass_needs_cuda\": \"11.0\"}]}",
          "entry 1 (CUDA 11.8): not after CUDA 12.0" },
        { "{\"toolkits\": [{\"version\": \"12.0\", \"sm_min\": 50, \"sm_max\": 90, \"max_gcc\": 12, \"min_driver\": \"525\","
          " \"ptx_isa\": \"eight\", \"sass_needs_cuda\": \"12.0\"}]}", "CUDA 12.0): bad ptx_isa" },
        /* SASS cannot need a newer driver than its own toolkit's. */
        { "{\"toolkits\": [{\"version\": \"12.0\", \"sm_min\": 50, \"sm_max\": 90, \"max_gcc\": 12, \"min_driver\": \"525\","
          " \"ptx_isa\": \"8.0\", \"sass_needs_cuda\": \"12.2\"}]}", "CUDA 12.0): bad sass_needs_cuda" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        md_error err;
        md_error_clear(&err);
        ck_assert_int_eq(load_text(bad[i].json, &err), MD_ERR_INTERNAL);
        ck_assert_msg(strstr(err.message, bad[i].says) != NULL, "'%s' not in '%s'", bad[i].says, err.message);
        unsigned n = 1;
        md_toolkit_rows(&n); /* reloads the embedded recipe */
        ck_assert_uint_eq(n, 11);
        md_toolkit_table_free();
    }
}
END_TEST

Suite *suite_toolkit_table(void)
{
    Suite *s = suite_create("toolkit_table");
    TCase *tc = tcase_create("lookups");
    tcase_add_test(tc, rows_from_recipe);
    tcase_add_test(tc, limits_of_an_nvcc);
    tcase_add_test(tc, versions_for_an_sm);
    tcase_add_test(tc, malformed_rows_are_named);
    suite_add_tcase(s, tc);
    return s;
}
