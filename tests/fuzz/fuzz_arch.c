/* libFuzzer target: the parsers of architecture names and versions that read what users type:
 * `--gpu` (md_gpu_target_parse), `--arch LIST` and `--define NAME=VALUE` (through md_plan_make,
 * against two made-up toolkits and the kernels/libmsda.json embedded into this binary), and the
 * lookups by CUDA and L4T version. Input: the architecture text, optionally a newline and a define. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes/arch.h"
#include "fuzz_common.h"
#include "recipes/jetson_table.h"
#include "build/plan.h"
#include "recipes/recipes_data.h"
#include "recipes/toolkit_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

extern const struct md_recipe_blob fuzz_kernel_blobs[];

static md_libmsda_recipe recipe;
static md_toolkit toolkits[2];

static void fake_toolkit(md_toolkit *tk, const char *version, unsigned major, unsigned minor, const unsigned *sms,
                         size_t n)
{
    snprintf(tk->nvcc, sizeof tk->nvcc, "/opt/cuda-%s/bin/nvcc", version);
    snprintf(tk->version, sizeof tk->version, "%s", version);
    tk->major = major;
    tk->minor = minor;
    memcpy(tk->sms, sms, n * sizeof *sms);
    tk->n_sms = n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    md_error err;
    const char *dir = fuzz_scratch_dir();
    if (!dir || fuzz_write_file(dir, MD_RECIPE_FILE, (const uint8_t *)fuzz_kernel_blobs[0].text,
                                fuzz_kernel_blobs[0].size) != 0 ||
        md_libmsda_recipe_load(dir, &recipe, &err) != MD_OK || md_arch_table_load(&err) != MD_OK ||
        md_jetson_table_load(&err) != MD_OK) {
        fprintf(stderr, "fuzz_arch: cannot set up: %s\n", err.message);
        abort();
    }
    static const unsigned newest[] = { 75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121 };
    static const unsigned older[] = { 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90 };
    fake_toolkit(&toolkits[0], "13.0", 13, 0, newest, sizeof newest / sizeof *newest);
    fake_toolkit(&toolkits[1], "11.8", 11, 8, older, sizeof older / sizeof *older);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    char *define = strchr(text, '\n');
    if (define)
        *define++ = '\0';
    md_error err;
    unsigned sm;
    md_gpu_target target;
    md_arch_parse_number(text, &sm);
    if (md_gpu_target_parse(text, &target, &err) == MD_OK && !target.arch)
        abort();
    md_toolkit_row_find(text);
    md_jetson_release_find(text);

    static const unsigned native[] = { 61, 87 };
    const char *defines[] = { define, NULL };
    md_plan_request req = { .arch_spec = text, .kind = md_arch_spec_kind_of(text), .native_sms = native,
                            .n_native = 2, .toolkits = toolkits, .n_toolkits = 2, .recipe = &recipe, .defines = define ? defines : NULL };
    md_plan plan;
    md_plan_make(&req, &plan, &err);
    md_plan_free(&plan); /* its contract: in every case */
    free(text);
    return 0;
}
