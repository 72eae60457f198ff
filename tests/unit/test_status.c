/* md_error, the one way errors travel: md_fail records code and message, md_hint_set a hint,
 * md_error_clear empties it; each takes NULL for callers that want only the status. */
#include <string.h>
#include "base/status.h"
#include "unit.h"

START_TEST(fail_hint_and_clear)
{
    md_error err;
    memset(&err, 0x55, sizeof err);
    md_error_clear(&err);
    ck_assert_int_eq(err.code, MD_OK);
    ck_assert_int_eq(err.hint, MD_HINT_NONE);
    ck_assert_str_eq(err.message, "");
    ck_assert_int_eq(md_hint_set(&err, MD_HINT_TOOLKIT, md_fail(&err, MD_ERR_IO, "cannot read '%s'", "x")), MD_ERR_IO);
    ck_assert_int_eq(err.code, MD_ERR_IO);
    ck_assert_int_eq(err.hint, MD_HINT_TOOLKIT);
    ck_assert_str_eq(err.message, "cannot read 'x'");
    /* NULL: the status alone, nothing written */
    md_error_clear(NULL);
    ck_assert_int_eq(md_hint_set(NULL, MD_HINT_TOOLKIT, md_fail(NULL, MD_ERR_FORMAT, "%s", "y")), MD_ERR_FORMAT);
}
END_TEST

Suite *suite_status(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, fail_hint_and_clear);
    suite_add_tcase(s, tc);
    return s;
}
