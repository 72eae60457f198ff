/* The argument vectors of spawned tools: every string formatted in is kept, the empty one too (an
 * empty argument is an argument: `nvcc -Xcompiler ""`, a value that formats to nothing). */
#include <string.h>
#include "base/strv.h"
#include "unit.h"

START_TEST(an_empty_string_is_an_item)
{
    strv v = { 0 };
    ck_assert(strv_add(&v, "%s", ""));
    ck_assert(strv_add(&v, "-D%s=%d", "MSDA_MAX_THREADS", 128));
    ck_assert(strv_add(&v, "%.0s", "cut to nothing"));
    ck_assert_uint_eq(v.n, 3);
    ck_assert_str_eq(v.items[0], "");
    ck_assert_str_eq(v.items[1], "-DMSDA_MAX_THREADS=128");
    ck_assert_str_eq(v.items[2], "");
    ck_assert_ptr_null(v.items[3]);
    strv_free(v.items);
}
END_TEST

START_TEST(add_all_copies_each_string_empty_ones_included)
{
    char a[] = "nvcc", empty[] = "", b[] = "-O3";
    char *const list[] = { a, empty, b, NULL };
    strv v = { 0 };
    ck_assert(strv_add_all(&v, list));
    ck_assert(strv_add_all(&v, NULL));
    ck_assert_uint_eq(v.n, 3);
    ck_assert_str_eq(v.items[1], "");
    ck_assert_ptr_ne(v.items[0], a);   /* copies, owned by the vector */
    ck_assert_str_eq(v.items[2], "-O3");
    ck_assert_ptr_null(v.items[3]);
    strv_free(v.items);
    strv_free(NULL);
}
END_TEST

Suite *suite_strv(void)
{
    Suite *s = suite_create("strv");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, an_empty_string_is_an_item);
    tcase_add_test(tc, add_all_copies_each_string_empty_ones_included);
    suite_add_tcase(s, tc);
    return s;
}
