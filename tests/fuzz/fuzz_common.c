#include "fuzz_common.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "binary/inspect.h"
#include "base/write_all.h"

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

static char scratch[64];

static void scratch_remove(void)
{
    char path[PATH_MAX];
    /* only the files fuzz_write_file put there: fuzz_recipe's one */
    snprintf(path, sizeof path, "%s/libmsda.json", scratch);
    unlink(path);
    rmdir(scratch);
}

const char *fuzz_scratch_dir(void)
{
    if (!scratch[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%s/msda-fuzz-XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
        if (!mkdtemp(scratch)) {
            scratch[0] = '\0';
            return NULL;
        }
        atexit(scratch_remove);
    }
    return scratch;
}

int fuzz_write_file(const char *dir, const char *name, const uint8_t *data, size_t size)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = md_write_all(fd, data, size) == 0 ? 0 : -1;
    return close(fd) == 0 ? rc : -1;
}

char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = '\0';
    }
    return text;
}
