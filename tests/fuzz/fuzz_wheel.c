/* libFuzzer target: the wheel (zip) reader. The bytes are read twice: member by member through
 * md_zip (as the RECORD checker and verify do), and as `msda-doctor inspect` reads a wheel. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "fuzz_common.h"
#include "binary/zip_members.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static md_status discard(const void *block, size_t len, void *ctx, md_error *err)
{
    (void)block;
    (void)err;
    uint64_t *total = ctx;
    *total += len;
    /* a bomb is the inspect path's business; here, stop early to keep executions fast */
    return *total > FUZZ_MAX_MEMBER ? MD_ERR_FORMAT : MD_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = fuzz_memfd(data, size);
    if (fd < 0)
        return 0;
    md_error err;
    md_error_clear(&err);
    md_zip *zip;
    if (md_zip_open_fd(fd, "fuzz.whl", &zip, &err) == MD_OK) {
        md_zip_member m;
        bool end = false;
        while (md_zip_next(zip, &m, &end, &err) == MD_OK && !end) {
            uint64_t total = 0, got = 0;
            if (md_zip_read(zip, discard, &total, &got, &err) != MD_OK)
                break;
        }
        md_zip_close(zip);
    }
    close(fd);
    fuzz_inspect_bytes(data, size);
    return 0;
}
