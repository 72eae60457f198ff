/* libFuzzer target: fetch's reader of NVIDIA's redistrib_X.Y.Z.json manifest, with the embedded
 * redist.json table, for each platform the table names. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fetch/fetch.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const md_redist_table *table;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    md_error err;
    table = md_redist_table_get(&err);
    if (!table) {
        fprintf(stderr, "fuzz_manifest: %s\n", err.message);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    md_fetch_result *out = malloc(sizeof *out);
    if (!out)
        return 0;
    for (size_t p = 0; p < table->n_platforms; p++) {
        memset(out, 0, sizeof *out);
        snprintf(out->platform, sizeof out->platform, "%s", table->platforms[p]);
        snprintf(out->manifest_url, sizeof out->manifest_url, "%s/redistrib_11.8.0.json", table->base_url);
        md_error err;
        md_fetch_manifest_parse((const char *)data, size, table->base_url, table, out, &err);
        if (out->n_components > MD_REDIST_MAX_COMPONENTS)
            abort();
    }
    free(out);
    return 0;
}
