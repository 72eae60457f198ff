/* libFuzzer target: the text parsers of diagnose's probes. The first byte picks the parser (see
 * FUZZ_PROBE_* in fuzz_common.h): nvidia-smi's CSV answer with and without compute_cap, or
 * /etc/nv_tegra_release (read against the embedded jetson.json, the rest also taken as
 * /proc/device-tree/model). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diagnose/probes/diag.h"
#include "fuzz_common.h"
#include "recipes/jetson_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    md_error err;
    if (md_jetson_table_load(&err) != MD_OK) {
        fprintf(stderr, "fuzz_probe: %s\n", err.message);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned which = data[0] % FUZZ_PROBE_COUNT;
    char *text = fuzz_text(data + 1, size - 1);
    if (!text)
        return 0;
    if (which == FUZZ_PROBE_TEGRA) {
        char l4t[32];
        if (md_jetson_l4t_parse(text, l4t, sizeof l4t)) {
            const md_jetson_release *r = md_jetson_release_find(l4t);
            unsigned major = (unsigned)strtoul(l4t, NULL, 10);
            md_jetson_family_find(major);
            (void)r;
        }
        md_jetson_module_for_model(text);
    } else {
        md_smi_facts *s = calloc(1, sizeof *s);
        if (s) {
            md_smi_parse(s, text, which == FUZZ_PROBE_SMI_CC);
            if (s->n_gpus > MD_DIAG_MAX_GPUS)
                abort();
            free(s);
        }
    }
    free(text);
    return 0;
}
