#include <string.h>
#include "recipes/redist_table.h"
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
    /* an aarch64 host runs Jetson's build too, after the server one; x86_64 runs neither */
    ck_assert_int_eq(md_redist_host_rank(t, "aarch64", "linux-sbsa"), 0);
    ck_assert_int_eq(md_redist_host_rank(t, "aarch64", "linux-aarch64"), 1);
    ck_assert_int_eq(md_redist_host_rank(t, "aarch64", "linux-x86_64"), -1);
    ck_assert_int_eq(md_redist_host_rank(t, "x86_64", "linux-x86_64"), 0);
    ck_assert_int_eq(md_redist_host_rank(t, "x86_64", "linux-aarch64"), -1);
    ck_assert_int_eq(md_redist_host_rank(t, "mips", "linux-x86_64"), -1);
    char names[128];
    md_redist_platform_names(t, names, sizeof names);
    ck_assert_str_eq(names, "linux-x86_64, linux-sbsa or linux-aarch64");
    ck_assert(md_redist_platform_known(t, "linux-aarch64"));
    ck_assert(!md_redist_platform_known(t, "linux-ppc64le"));
    /* nvcc first, and required: the fetch is pointless without it */
    ck_assert_str_eq(t->components[0].name, "cuda_nvcc");
    ck_assert(t->components[0].required);
    /* the wheels: CUDA 13's packages from nvidia/cu13, nvvm pinned to nvcc; 11 and 12 refused */
    const md_wheel_major *w13 = md_redist_wheel_major(t, 13), *w12 = md_redist_wheel_major(t, 12);
    ck_assert_ptr_nonnull(w13);
    ck_assert_str_eq(w13->root, "nvidia/cu13");
    ck_assert_str_eq(w13->packages[0].name, "nvidia-cuda-nvcc");
    ck_assert_str_eq(w13->packages[1].name, "nvidia-nvvm");
    ck_assert_str_eq(w13->packages[1].same_version_as, "nvidia-cuda-nvcc");
    ck_assert_ptr_nonnull(w12);
    ck_assert_ptr_nonnull(strstr(w12->refused, "no bin/nvcc"));
    ck_assert_int_eq((int)w12->n_packages, 0);
    ck_assert_ptr_nonnull(strstr(md_redist_wheel_major(t, 11)->refused, "cu11"));
    ck_assert_ptr_null(md_redist_wheel_major(t, 10));
    ck_assert_str_eq(t->index_url, "https://pypi.org/simple");
    ck_assert_str_eq(md_redist_wheel_machine(t, "linux-sbsa"), "aarch64");
    ck_assert_ptr_null(md_redist_wheel_machine(t, "linux-aarch64"));
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
    const char *ok_rest = "\"platforms\": [\"linux-x86_64\"], \"host_platforms\": {\"x86_64\": [\"linux-x86_64\"]}, "
                          "\"components\": [{\"name\": \"cuda_nvcc\", \"required\": true}]";
    char text[1024];
    snprintf(text, sizeof text, "{\"base_url\": \"https://x/redist\", %s}", ok_rest);
    ck_assert_int_eq(load_text(text, &err), MD_OK);
    snprintf(text, sizeof text, "{\"base_url\": \"https://x/redist/\", %s}", ok_rest);
    ck_assert_int_eq(load_text(text, &err), MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "ends with '/'"));
    ck_assert_int_eq(load_text("{\"base_url\": \"https://x\", \"platforms\": [\"linux-x86_64\"], "
                               "\"host_platforms\": {\"x86_64\": [\"linux-x86_64\", \"linux-sbsa\"]}, "
                               "\"components\": [{\"name\": \"cuda_nvcc\", \"required\": true}]}",
                               &err),
                     MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "names no known platform"));
    /* a machine's platforms are a list, never empty */
    snprintf(text, sizeof text, "{\"base_url\": \"https://x\", \"platforms\": [\"linux-x86_64\"], "
             "\"host_platforms\": {\"x86_64\": %s}, \"components\": [{\"name\": \"cuda_nvcc\", \"required\": true}]}",
             "\"linux-x86_64\"");
    ck_assert_int_eq(load_text(text, &err), MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "host_platforms 'x86_64' is not a list of platforms"));
    snprintf(text, sizeof text, "{\"base_url\": \"https://x\", \"platforms\": [\"linux-x86_64\"], "
             "\"host_platforms\": {\"x86_64\": %s}, \"components\": [{\"name\": \"cuda_nvcc\", \"required\": true}]}",
             "[]");
    ck_assert_int_eq(load_text(text, &err), MD_ERR_INTERNAL);
    ck_assert_int_eq(load_text("{\"base_url\": \"https://x\", \"platforms\": [\"linux-x86_64\"], "
                               "\"host_platforms\": {}, \"components\": [{\"name\": \"cuda_nvcc\", \"required\": false}]}",
                               &err),
                     MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "no component is required"));
    /* a pin must name an earlier package of its major */
    snprintf(text, sizeof text, "{\"base_url\": \"https://x/redist\", %s, \"wheels\": {\"index_url\": \"https://i\", "
             "\"platforms\": {}, \"majors\": [{\"major\": 13, \"root\": \"n\", \"packages\": [{\"name\": \"a\", "
             "\"same_version_as\": \"b\"}, {\"name\": \"b\"}]}]}}", ok_rest);
    ck_assert_int_eq(load_text(text, &err), MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "'a' pins to no earlier package"));
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
