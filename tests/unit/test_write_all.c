/* md_write_all, under every file msda-doctor writes (wheels, the cache, stamps): every byte of a
 * buffer reaches the descriptor, the last one and a buffer of one byte too. */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "base/write_all.h"
#include "unit.h"

/* What md_write_all(DATA, LEN) puts into a pipe, into OUT (LEN bytes at most). */
static ssize_t through_pipe(const char *data, size_t len, char *out)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(md_write_all(fds[1], data, len), 0);
    close(fds[1]);
    ssize_t got = 0, n;
    while ((n = read(fds[0], out + got, len + 1 - (size_t)got)) > 0)
        got += n;
    close(fds[0]);
    return got;
}

START_TEST(every_byte_is_written)
{
    char out[16];
    ck_assert_int_eq(through_pipe("x", 1, out), 1);
    ck_assert_int_eq(out[0], 'x');
    ck_assert_int_eq(through_pipe("wheel", 5, out), 5);
    ck_assert(memcmp(out, "wheel", 5) == 0);
    ck_assert_int_eq(through_pipe("", 0, out), 0);
    /* a closed descriptor: its errno, not 0 */
    ck_assert_int_eq(md_write_all(-1, "x", 1), EBADF);
}
END_TEST

Suite *suite_write_all(void)
{
    Suite *s = suite_create("write_all");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_byte_is_written);
    suite_add_tcase(s, tc);
    return s;
}
