#include <string.h>
#include "redist_table.h"
#include "unit.h"

START_TEST(table_from_recipe)
{
    md_error err;
    const md_redist_table *t = md_redist_table_get(&err);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->base_url, "https://developer.download.nvidia.com/compute/cuda/redist");
    ck_assert_str_eq(md_redist_host_platform(t, "x86_64"), "linux-x86_64");
    ck_assert_str_eq(md_redist_host_platform(t, "aarch64"), "linux-sbsa");
    ck_assert_ptr_null(md_redist_host_platform(t, "mips"));
    ck_assert(md_redist_platform_known(t, "linux-aarch64"));
    ck_assert(!md_redist_platform_known(t, "linux-ppc64le"));
    /* nvcc first, and required: the fetch is pointless without it */
    ck_assert_str_eq(t->components[0].name, "cuda_nvcc");
    ck_assert(t->components[0].required);
    md_redist_table_free();
}
END_TEST

static md_status load_text(const char *text, md_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    md_redist_table t;
    md_status st = md_redist_table_load_json(doc, &t, err);
    json_decref(doc);
    return st;
}

START_TEST(broken_tables_are_internal_errors)
{
    md_error err;
    const char *ok_rest = "\"platforms\": [\"linux-x86_64\"], \"host_platforms\": {\"x86_64\": \"linux-x86_64\"}, "
                          "\"components\": [{\"name\": \"cuda_nvcc\", \"required\": true}]";
    char text[512];
    snprintf(text, sizeof text, "{\"base_url\": \"https://x/redist\", %s}", ok_rest);
    ck_assert_int_eq(load_text(text, &err), MD_OK);
    snprintf(text, sizeof text, "{\"base_url\": \"https://x/redist/\", %s}", ok_rest);
    ck_assert_int_eq(load_text(text, &err), MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "ends with '/'"));
    ck_assert_int_eq(load_text("{\"base_url\": \"https://x\", \"platforms\": [\"linux-x86_64\"], "
                               "\"host_platforms\": {\"x86_64\": \"linux-sbsa\"}, "
                               "\"components\": [{\"name\": \"cuda_nvcc\", \"required\": true}]}",
                               &err),
                     MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "names no known platform"));
    ck_assert_int_eq(load_text("{\"base_url\": \"https://x\", \"platforms\": [\"linux-x86_64\"], "
                               "\"host_platforms\": {}, \"components\": [{\"name\": \"cuda_nvcc\", \"required\": false}]}",
                               &err),
                     MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "no component is required"));
}
END_TEST

Suite *suite_redist_table(void)
{
    Suite *s = suite_create("redist_table");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, table_from_recipe);
    tcase_add_test(tc, broken_tables_are_internal_errors);
    suite_add_tcase(s, tc);
    return s;
}
