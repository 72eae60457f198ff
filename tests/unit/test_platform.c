#include <string.h>
#include "recipes/platform.h"
#include "unit.h"

START_TEST(platforms_from_recipe)
{
    md_error err;
    ck_assert_int_eq(md_platform_table_load(&err), MD_OK);
    unsigned n;
    const md_platform *all = md_platform_all(&n);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(all[0].name, "x86_64");

    const md_platform *x86 = md_platform_find("x86_64");
    ck_assert_ptr_nonnull(x86);
    ck_assert_uint_eq(x86->machine, 62);
    ck_assert_str_eq(x86->glibc_base, "2.2.5");
    ck_assert_str_eq(x86->cross_compiler, "x86_64-linux-gnu-gcc");
    ck_assert_str_eq(x86->qemu, "qemu-x86_64");
    ck_assert_str_eq(x86->sysroot, "/usr/x86_64-linux-gnu");

    const md_platform *arm = md_platform_find("aarch64");
    ck_assert_ptr_nonnull(arm);
    ck_assert_uint_eq(arm->machine, 183);
    ck_assert_str_eq(arm->glibc_base, "2.17");
    ck_assert_str_eq(arm->cross_compiler, "aarch64-linux-gnu-gcc");
    ck_assert_str_eq(arm->qemu, "qemu-aarch64");
    ck_assert_str_eq(arm->sysroot, "/usr/aarch64-linux-gnu");

    ck_assert_ptr_eq(md_platform_by_machine(183), arm);
    ck_assert_ptr_eq(md_platform_by_machine(62), x86);
    ck_assert_ptr_null(md_platform_by_machine(40)); /* EM_ARM */
    ck_assert_ptr_null(md_platform_find("armv7l"));
    ck_assert_ptr_null(md_platform_find(""));
    ck_assert_ptr_null(md_platform_find("X86_64"));
    ck_assert_str_eq(md_platform_glibc_base("aarch64"), "2.17");
    ck_assert_ptr_null(md_platform_glibc_base("ppc64le"));

    char names[64];
    md_platform_names(names, sizeof names);
    ck_assert_str_eq(names, "x86_64, aarch64");
    md_platform_names(names, 8); /* cut short, still terminated */
    ck_assert_str_eq(names, "x86_64,");
    md_platform_table_free();
}
END_TEST

START_TEST(libraries_and_pins)
{
    ck_assert(md_platform_library_allowed("libc.so.6"));
    ck_assert(md_platform_library_allowed("ld-linux-aarch64.so.1"));
    ck_assert(!md_platform_library_allowed("libcuda.so.1"));
    ck_assert(!md_platform_library_allowed("libc.so"));
    unsigned n;
    const char *const *libs = md_platform_allowed_libraries(&n);
    ck_assert_uint_eq(n, 10);
    ck_assert_str_eq(libs[0], "libc.so.6");
    const char *const *pins = md_platform_pinned_symbols(&n);
    ck_assert_uint_eq(n, 20);
    ck_assert_str_eq(pins[0], "dlopen");
    ck_assert_str_eq(pins[n - 1], "expf");
    md_platform_table_free();
}
END_TEST

static md_status load_text(const char *text, md_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    md_status st = md_platform_table_load_json(doc, err);
    json_decref(doc);
    return st;
}

#define LISTS ", \"manylinux_2_17_allowed_libraries\": [\"libc.so.6\"], \"glibc_pinned_symbols\": [\"dlopen\"]}"

START_TEST(malformed_entries_are_named)
{
    static const struct {
        const char *json, *says;
    } bad[] = {
        { "{\"platforms\": []" LISTS, "missing 'platforms'" },
        { "{\"platforms\": [{\"machine\": 62, \"glibc_base\": \"2.2.5\"}]" LISTS, "platform 0: bad 'name'" },
        { "{\"platforms\": [{\"name\": \"x86_64\", \"glibc_base\": \"2.2.5\"}]" LISTS, "x86_64: bad 'machine'" },
        { "{\"platforms\": [{\"name\": \"x86_64\", \"machine\": 62}]" LISTS, "x86_64: bad 'glibc_base'" },
        { "{\"platforms\": [{\"name\": \"x86_64\", \"machine\": 62, \"glibc_base\": \"2.2.5\", \"qemu\": 1}]" LISTS,
          "x86_64: bad 'qemu'" },
        { "{\"platforms\": [{\"name\": \"a\", \"machine\": 62, \"glibc_base\": \"2.2.5\"},"
          " {\"name\": \"b\", \"machine\": 62, \"glibc_base\": \"2.17\"}]" LISTS, "platform b repeats" },
        { "{\"platforms\": [{\"name\": \"x86_64\", \"machine\": 62, \"glibc_base\": \"2.2.5\"}],"
          " \"manylinux_2_17_allowed_libraries\": [\"libc.so.6\"]}", "no glibc_pinned_symbols list" },
        { "{\"platforms\": [{\"name\": \"x86_64\", \"machine\": 62, \"glibc_base\": \"2.2.5\"}],"
          " \"manylinux_2_17_allowed_libraries\": [\"libc.so.6\", 7], \"glibc_pinned_symbols\": [\"dlopen\"]}",
          "manylinux_2_17_allowed_libraries entry 1 is not a name" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        md_error err;
        md_error_clear(&err);
        ck_assert_int_eq(load_text(bad[i].json, &err), MD_ERR_INTERNAL);
        ck_assert_msg(strstr(err.message, bad[i].says) != NULL, "'%s' not in '%s'", bad[i].says, err.message);
        unsigned n;
        md_platform_all(&n); /* reloads the embedded recipe */
        ck_assert_uint_eq(n, 2);
        md_platform_table_free();
    }
}
END_TEST

Suite *suite_platform(void)
{
    Suite *s = suite_create("platform");
    TCase *tc = tcase_create("lookups");
    tcase_add_test(tc, platforms_from_recipe);
    tcase_add_test(tc, libraries_and_pins);
    tcase_add_test(tc, malformed_entries_are_named);
    suite_add_tcase(s, tc);
    return s;
}
