/* libFuzzer target: the GPU-code readers on one file's bytes. Fatbins and cubins go straight to
 * md_fatbin_read and md_cubin_read; anything else (host ELF, zip, junk) through md_inspect_path,
 * as `msda-doctor inspect` reads a file, from an in-memory file (memfd). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "binary/devcode.h"
#include "fuzz_common.h"
#include "binary/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* libelf may adjust its view of an image (byte order): give it a private, writable copy, as
     * inspect does with its MAP_PRIVATE mapping. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    md_error err;
    md_error_clear(&err);
    if (md_is_fatbin(copy, size)) {
        md_binary bin = { 0 };
        md_fatbin_read(copy, size, &bin, &err);
        md_binary_free(&bin);
    } else if (md_is_cubin(copy, size)) {
        md_binary bin = { 0 };
        md_code_entry *e = md_binary_add_entry(&bin);
        if (e)
            md_cubin_read(copy, size, e, &err);
        md_binary_free(&bin);
    } else {
        fuzz_inspect_bytes(data, size);
    }
    free(copy);
    return 0;
}
