#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "inspect.h"

void fuzz_setup(void)
{
    static int done;
    if (!done) {
        char limit[32];
        snprintf(limit, sizeof limit, "%llu", (unsigned long long)FUZZ_MAX_MEMBER);
        setenv("MSDA_MAX_MEMBER_SIZE", limit, 1);
        done = 1;
    }
}

int fuzz_memfd(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void fuzz_inspect_bytes(const uint8_t *data, size_t size)
{
    fuzz_setup();
    int fd = fuzz_memfd(data, size);
    if (fd < 0)
        return;
    /* a memfd is a regular file: /proc/self/fd/N reads it as a path on disk would be read */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    md_inspection ins = { 0 };
    md_error err;
    md_error_clear(&err);
    md_inspect_path(path, &ins, &err);
    md_inspection_free(&ins);
    close(fd);
}
