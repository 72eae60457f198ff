/* Fault injection for the tests (issue 13): an LD_PRELOAD library that makes writes fail as on a
 * full disk and makes one chosen allocation fail, so that the error paths for both can be run on
 * the release build. A test helper, built into build/ and never shipped.
 *
 * Environment, read once when the library is loaded:
 *
 *   MSDA_INJECT_WRITE_LIMIT=BYTES  once this process has written BYTES to regular files, further
 *                                  writes fail with ENOSPC; the write that crosses the limit is cut
 *                                  short at it, as a filling disk does. 0: every write fails.
 *   MSDA_INJECT_WRITE_DIR=DIR      only files whose path starts with DIR count and fail (the disk
 *                                  holding DIR is full, the others are not). Unset: every regular
 *                                  file. Both write variables are inherited by child processes,
 *                                  each of which counts its own bytes: a full disk is full for the
 *                                  compilers that build spawns too.
 *   MSDA_INJECT_MALLOC_FAIL=N      the Nth allocation made from main() on (malloc, calloc, realloc,
 *                                  and so strdup, asprintf, fopen... which call them) returns NULL
 *                                  with errno ENOMEM; the others succeed. Allocations by the dynamic
 *                                  loader and library constructors before main() are not counted:
 *                                  the program cannot handle those, it has not started.
 *   MSDA_INJECT_COUNT=FILE         at exit, writes "allocations N\nwritten N\n" to FILE: how many
 *                                  allocations were counted and how many bytes counted writes
 *                                  wrote, so a test can sweep MSDA_INJECT_MALLOC_FAIL over 1..N.
 *
 * MSDA_INJECT_MALLOC_FAIL and MSDA_INJECT_COUNT are removed from the environment at load, so the
 * processes this one spawns neither fail allocations nor overwrite the count.
 *
 * Wrapped writes: write, pwrite, pwrite64, writev, pwritev, pwritev64, copy_file_range and
 * sendfile. strace of a whole build (msda-doctor, the shell of the fake nvcc, gcc, as, ld) shows
 * write(2) alone; the others are there for tools that use them (cp: copy_file_range). A vector
 * write that does not fit fails whole. Not reached: glibc's stdio writes through an internal
 * call that no preload can interpose, so what fwrite/fprintf write (as, ld, gcc) is neither
 * counted nor refused, nor are writes through mmap: a real full file system (a small tmpfs)
 * is the test for those. msda-doctor's own writes (the wheel, through write) and the shell's
 * are reached.
 *
 * The allocator is glibc's, reached through its __libc_* entry points so that no dlsym (which
 * allocates) is needed on that path; free is not wrapped. Not for use with a sanitizer build,
 * whose runtime replaces malloc itself. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);

static bool write_limited;
static unsigned long long write_limit, written;
static char write_dir[PATH_MAX];
static size_t write_dir_len;

static bool counting_allocations; /* from main() on */
static unsigned long long malloc_fail_at, allocations;
static char count_file[PATH_MAX];

/* ---- allocations ------------------------------------------------------------------------------ */

/* Whether this allocation is the one to fail. */
static bool fail_this_allocation(void)
{
    if (!counting_allocations)
        return false;
    allocations++;
    if (malloc_fail_at && allocations == malloc_fail_at) {
        errno = ENOMEM;
        return true;
    }
    return false;
}

EXPORT void *malloc(size_t size)
{
    return fail_this_allocation() ? NULL : __libc_malloc(size);
}

EXPORT void *calloc(size_t n, size_t size)
{
    return fail_this_allocation() ? NULL : __libc_calloc(n, size);
}

EXPORT void *realloc(void *p, size_t size)
{
    /* realloc(p, 0) frees: not an allocation that can fail. */
    if (p && size == 0)
        return __libc_realloc(p, size);
    return fail_this_allocation() ? NULL : __libc_realloc(p, size);
}

/* ---- writes ----------------------------------------------------------------------------------- */

/* Whether FD is a regular file that the limit applies to. */
static bool limited_fd(int fd)
{
    if (!write_limited)
        return false;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return false;
    if (!write_dir_len)
        return true;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0)
        return false;
    path[n] = '\0';
    return strncmp(path, write_dir, write_dir_len) == 0 &&
           (path[write_dir_len] == '/' || path[write_dir_len] == '\0' || write_dir[write_dir_len - 1] == '/');
}

/* How many of WANT bytes may be written to FD now: WANT when FD is not limited; 0 with errno
 * ENOSPC when the limit is reached. */
static size_t allowance(int fd, size_t want, bool *limited)
{
    *limited = limited_fd(fd);
    if (!*limited || want == 0)
        return want;
    unsigned long long left = written < write_limit ? write_limit - written : 0;
    if (left == 0)
        errno = ENOSPC;
    return want < left ? want : (size_t)left;
}

static void account(bool limited, ssize_t n)
{
    if (limited && n > 0)
        written += (unsigned long long)n;
}

/* The real calls, looked up when the library loads: dlsym may allocate, which must not happen
 * while allocations are counted. */
static struct {
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*pwrite)(int, const void *, size_t, off_t);
    ssize_t (*pwrite64)(int, const void *, size_t, off64_t);
    ssize_t (*writev)(int, const struct iovec *, int);
    ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
    ssize_t (*pwritev64)(int, const struct iovec *, int, off64_t);
    ssize_t (*copy_file_range)(int, off64_t *, int, off64_t *, size_t, unsigned);
    ssize_t (*sendfile)(int, int, off_t *, size_t);
} real;

static void *next_symbol(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

static void resolve(void)
{
    real.write = (ssize_t (*)(int, const void *, size_t))next_symbol("write");
    real.pwrite = (ssize_t (*)(int, const void *, size_t, off_t))next_symbol("pwrite");
    real.pwrite64 = (ssize_t (*)(int, const void *, size_t, off64_t))next_symbol("pwrite64");
    real.writev = (ssize_t (*)(int, const struct iovec *, int))next_symbol("writev");
    real.pwritev = (ssize_t (*)(int, const struct iovec *, int, off_t))next_symbol("pwritev");
    real.pwritev64 = (ssize_t (*)(int, const struct iovec *, int, off64_t))next_symbol("pwritev64");
    real.copy_file_range =
        (ssize_t (*)(int, off64_t *, int, off64_t *, size_t, unsigned))next_symbol("copy_file_range");
    real.sendfile = (ssize_t (*)(int, int, off_t *, size_t))next_symbol("sendfile");
}

/* A library constructor may write before ours has run. */
#define NEXT(name) (real.name ? real.name : (resolve(), real.name))

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
    bool limited;
    size_t allowed = allowance(fd, count, &limited);
    if (count && !allowed)
        return -1;
    ssize_t n = NEXT(write)(fd, buf, allowed);
    account(limited, n);
    return n;
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    bool limited;
    size_t allowed = allowance(fd, count, &limited);
    if (count && !allowed)
        return -1;
    ssize_t n = NEXT(pwrite)(fd, buf, allowed, offset);
    account(limited, n);
    return n;
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset)
{
    bool limited;
    size_t allowed = allowance(fd, count, &limited);
    if (count && !allowed)
        return -1;
    ssize_t n = NEXT(pwrite64)(fd, buf, allowed, offset);
    account(limited, n);
    return n;
}

static size_t iov_total(const struct iovec *iov, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    return total;
}

/* A vector write either fits or fails whole (see the header comment). */
static bool vector_fits(int fd, const struct iovec *iov, int n, bool *limited)
{
    size_t total = iov_total(iov, n);
    if (allowance(fd, total, limited) < total) {
        errno = ENOSPC;
        return false;
    }
    return true;
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    bool limited;
    if (!vector_fits(fd, iov, iovcnt, &limited))
        return -1;
    ssize_t n = NEXT(writev)(fd, iov, iovcnt);
    account(limited, n);
    return n;
}

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    bool limited;
    if (!vector_fits(fd, iov, iovcnt, &limited))
        return -1;
    ssize_t n = NEXT(pwritev)(fd, iov, iovcnt, offset);
    account(limited, n);
    return n;
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off64_t offset)
{
    bool limited;
    if (!vector_fits(fd, iov, iovcnt, &limited))
        return -1;
    ssize_t n = NEXT(pwritev64)(fd, iov, iovcnt, offset);
    account(limited, n);
    return n;
}

EXPORT ssize_t copy_file_range(int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t len, unsigned flags)
{
    bool limited;
    size_t allowed = allowance(fd_out, len, &limited);
    if (len && !allowed)
        return -1;
    ssize_t n = NEXT(copy_file_range)(
        fd_in, off_in, fd_out, off_out, allowed, flags);
    account(limited, n);
    return n;
}

EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
    bool limited;
    size_t allowed = allowance(out_fd, count, &limited);
    if (count && !allowed)
        return -1;
    ssize_t n = NEXT(sendfile)(out_fd, in_fd, offset, allowed);
    account(limited, n);
    return n;
}

/* ---- set-up ----------------------------------------------------------------------------------- */

static bool parse_count(const char *text, unsigned long long *out)
{
    if (!text || !*text)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || text[0] == '-')
        return false;
    *out = v;
    return true;
}

/* A malformed setting would make a test pass for the wrong reason: stop at once, loudly. */
static void refuse(const char *name, const char *value)
{
    char line[256];
    int n = snprintf(line, sizeof line, "inject: %s must be a number, not '%s'\n", name, value);
    if (n > 0)
        (void)!syscall(SYS_write, 2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    _exit(125);
}

static void write_counts(void)
{
    if (!count_file[0])
        return;
    char text[96];
    int n = snprintf(text, sizeof text, "allocations %llu\nwritten %llu\n", allocations, written);
    /* Raw system calls: neither counted nor limited, and no allocation after exit began. */
    int fd = (int)syscall(SYS_openat, AT_FDCWD, count_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!syscall(SYS_write, fd, text, (size_t)n);
        syscall(SYS_close, fd);
    }
}

__attribute__((constructor)) static void inject_init(void)
{
    resolve();
    const char *limit = getenv("MSDA_INJECT_WRITE_LIMIT");
    if (limit) {
        if (!parse_count(limit, &write_limit))
            refuse("MSDA_INJECT_WRITE_LIMIT", limit);
        write_limited = true;
    }
    const char *dir = getenv("MSDA_INJECT_WRITE_DIR");
    if (dir && *dir) {
        /* Compared with the kernel's name for each file, which has no links in it. */
        if (!realpath(dir, write_dir))
            snprintf(write_dir, sizeof write_dir, "%s", dir);
        write_dir_len = strlen(write_dir);
    }
    const char *fail = getenv("MSDA_INJECT_MALLOC_FAIL");
    if (fail && !parse_count(fail, &malloc_fail_at))
        refuse("MSDA_INJECT_MALLOC_FAIL", fail);
    const char *count = getenv("MSDA_INJECT_COUNT");
    if (count)
        snprintf(count_file, sizeof count_file, "%s", count);
    unsetenv("MSDA_INJECT_MALLOC_FAIL");
    unsetenv("MSDA_INJECT_COUNT");
}

/* main() is reached through __libc_start_main: the allocations counted start there, and the
 * counts are written when the process exits, whichever way (exit or returning from main). */
typedef int (*main_fn)(int, char **, char **);
int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end);
static main_fn real_main;

static int counted_main(int argc, char **argv, char **envp)
{
    atexit(write_counts);
    counting_allocations = true;
    return real_main(argc, argv, envp);
}

EXPORT int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                             void (*rtld_fini)(void), void *stack_end)
{
    typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *);
    start_fn next = (start_fn)next_symbol("__libc_start_main");
    real_main = main;
    return next(counted_main, argc, argv, init, fini, rtld_fini, stack_end);
}
