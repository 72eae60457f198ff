/* The environments of spawned tools (nvcc, g++, the Python probe): md_env_with replaces the one
 * variable it names and keeps every other, those whose names begin alike or are as long too. */
#include <string.h>
#include "base/process.h"
#include "base/strv.h"
#include "unit.h"

START_TEST(env_with_replaces_only_its_variable)
{
    char *base[] = { "PATHEXT=.x", "HOME=/home/u", "PATH=/old", "PAT=1", "LANG=C", "PATH_EXTRA=y", NULL };
    char **env = md_env_with(base, "PATH", "/new/bin");
    ck_assert_ptr_nonnull(env);
    const char *want[] = { "PATHEXT=.x", "HOME=/home/u", "PAT=1", "LANG=C", "PATH_EXTRA=y", "PATH=/new/bin" };
    size_t n = 0;
    while (env[n])
        n++;
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(env[i], want[i]);
    strv_free(env);
    /* a variable the base lacks is added; an empty base gives it alone */
    char *empty[] = { NULL };
    env = md_env_with(empty, "CUDA_HOME", "");
    ck_assert_ptr_nonnull(env);
    ck_assert_str_eq(env[0], "CUDA_HOME=");
    ck_assert_ptr_null(env[1]);
    strv_free(env);
}
END_TEST

Suite *suite_process(void)
{
    Suite *s = suite_create("process");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, env_with_replaces_only_its_variable);
    suite_add_tcase(s, tc);
    return s;
}
