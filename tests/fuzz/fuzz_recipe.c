/* libFuzzer target: the typed readers of the JSON tables. The first byte picks the reader (the
 * seeds are each recipe with its byte in front, see FUZZ_RECIPE_* below), the rest is the
 * document. After a document is accepted, the lookups that read the table run on it, so that a
 * table that passed validation but would mislead a lookup (an index out of range) is caught. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes/arch.h"
#include "fuzz_common.h"
#include "recipes/jetson_table.h"
#include "diagnose/knowledge_load.h"
#include "recipes/libmsda_recipe.h"
#include "recipes/platform.h"
#include "recipes/redist_table.h"
#include "recipes/toolkit_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void arch_table(json_t *doc)
{
    md_error err;
    if (md_arch_table_load_json(doc, &err) == MD_OK) {
        md_gpu_target t;
        md_gpu_target_parse("p40", &t, &err);
        md_gpu_target_parse("sm_86", &t, &err);
        md_gpu_target_parse("Jetson TX2", &t, &err);
    }
    md_arch_table_free();
}

static void toolkit_table(json_t *doc)
{
    md_error err;
    if (md_toolkit_table_load_json(doc, &err) == MD_OK) {
        const md_toolkit_row *a, *b;
        md_toolkit_row_newest_for(61, 12020);
        md_toolkit_rows_targeting(90, &a, &b);
        md_toolkit_row_for(11, 8);
        md_toolkit_row_find("13.0");
    }
    md_toolkit_table_free();
}

static void platform_table(json_t *doc)
{
    md_error err;
    if (md_platform_table_load_json(doc, &err) == MD_OK) {
        char names[256];
        unsigned n;
        md_platform_names(names, sizeof names);
        md_platform_all(&n);
        md_platform_find("aarch64");
        md_platform_by_machine(62 /* EM_X86_64 */);
        md_platform_glibc_base("x86_64");
        md_platform_library_allowed("libc.so.6");
        md_platform_pinned_symbols(&n);
    }
    md_platform_table_free();
}

static void jetson_table(json_t *doc)
{
    md_error err;
    if (md_jetson_table_load_json(doc, &err) == MD_OK) {
        char l4t[32];
        if (md_jetson_l4t_parse("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref\n", l4t,
                                sizeof l4t))
            md_jetson_release_find(l4t);
        md_jetson_family_find(35);
        md_jetson_module_find("orin-agx");
        md_jetson_module_for_model("NVIDIA Jetson AGX Orin Developer Kit");
    }
    md_jetson_table_free();
}

static void redist_table(json_t *doc)
{
    md_error err;
    md_redist_table *t = calloc(1, sizeof *t);
    if (t && md_redist_table_load_json(doc, t, &err) == MD_OK) {
        md_redist_platform_known(t, "linux-x86_64");
        md_redist_host_platform(t, "aarch64");
    }
    free(t);
}

static void signatures(json_t *doc)
{
    md_error err;
    md_knowledge kb;
    if (md_knowledge_load_doc(&kb, json_incref(doc), &err) != MD_OK)
        return;
    md_knowledge_find(&kb, "no-kernel-image");
    static const char log[] = "RuntimeError: CUDA error: no kernel image is available for execution\n"
                              "error: too many resources requested for launch\n";
    FILE *f = fmemopen((void *)(uintptr_t)log, sizeof log - 1, "r");
    if (f) {
        md_log_result r;
        if (md_log_scan(f, "fuzz", &kb.matcher, &r, &err) == MD_OK)
            md_log_result_free(&r);
        fclose(f);
    }
    md_knowledge_free(&kb);
}

/* kernels/libmsda.json is read from a folder, as `build` reads it: the bytes go to a file there. */
static void libmsda(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_scratch_dir();
    if (!dir || fuzz_write_file(dir, MD_RECIPE_FILE, data, size) != 0)
        return;
    md_error err;
    md_libmsda_recipe r;
    if (md_libmsda_recipe_load(dir, &r, &err) != MD_OK) {
        md_libmsda_recipe_free(&r); /* its contract: also after a failure */
        return;
    }
    md_arch_table_load(&err);
    for (size_t i = 0; i < r.n_knobs; i++) {
        md_knob_value(&r.knobs[i], NULL);
        md_knob_value(&r.knobs[i], md_arch_by_sm(62));
        md_knob_value(&r.knobs[i], md_arch_by_sm(90));
    }
    md_libmsda_knob(&r, "MSDA_MAX_THREADS");
    md_libmsda_recipe_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned which = data[0] % FUZZ_RECIPE_COUNT;
    data++, size--;
    if (which == FUZZ_RECIPE_LIBMSDA) {
        libmsda(data, size);
        return 0;
    }
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, 0, &jerr);
    if (!doc)
        return 0;
    switch (which) {
    case FUZZ_RECIPE_ARCHITECTURES: arch_table(doc); break;
    case FUZZ_RECIPE_TOOLKITS: toolkit_table(doc); break;
    case FUZZ_RECIPE_PLATFORMS: platform_table(doc); break;
    case FUZZ_RECIPE_JETSON: jetson_table(doc); break;
    case FUZZ_RECIPE_REDIST: redist_table(doc); break;
    case FUZZ_RECIPE_SIGNATURES: signatures(doc); break;
    default: break;
    }
    json_decref(doc);
    return 0;
}
