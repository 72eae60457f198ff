/* msda-doctor inspect: what GPU code a binary carries, and where it can run. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes/arch.h"
#include "cli.h"
#include "binary/inspect.h"
#include "binary/runs_on.h"

#define MAX_ARCHS 64
#define MAX_GPUS 32

typedef struct {
    bool json;
    bool verbose;
    md_gpu_target gpus[MAX_GPUS];
    size_t n_gpus;
    bool have_driver;
    md_driver driver;      /* --driver: the verdicts count only the code it loads */
} inspect_options;

static const char *compression_name(md_compression c)
{
    return c == MD_COMPRESS_ZSTD ? "zstd" : c == MD_COMPRESS_LZ4 ? "lz4" : NULL;
}

static const char *file_type_name(md_file_type t)
{
    switch (t) {
    case MD_FILE_ELF: return "elf";
    case MD_FILE_FATBIN: return "fatbin";
    case MD_FILE_CUBIN: return "cubin";
    case MD_FILE_WHEEL: return "wheel";
    }
    return "unknown";
}

static const char *status_name(md_status st)
{
    switch (st) {
    case MD_OK: return "ok";
    case MD_ERR_IO: return "unreadable";
    case MD_ERR_FORMAT: return "malformed";
    case MD_ERR_UNKNOWN_TYPE: return "unknown-type";
    case MD_ERR_ARGUMENT: return "argument";
    case MD_ERR_NOMEM: return "out-of-memory";
    case MD_ERR_INTERNAL: return "internal";
    case MD_ERR_UNSUPPORTED: return "unsupported";
    case MD_ERR_BUILD: return "build";
    case MD_ERR_NETWORK: return "network";
    case MD_ERR_CHECKSUM: return "checksum";
    case MD_ERR_STOPPED: return "stopped";
    }
    return "internal";
}

static void code_name(char *buf, size_t size, md_runs_how how, unsigned sm, char variant)
{
    md_arch_format(buf, (unsigned)size, how == MD_RUNS_PTX_JIT, sm, variant);
}

/* "11.8" for 11080 into OUT; false (OUT "") when VERSION is 0, not known. */
static bool cuda_text(int version, char *out, size_t size)
{
    out[0] = '\0';
    if (version <= 0)
        return false;
    md_cuda_version_text(version, out, size);
    return true;
}

/* "7.8" for ISA 78; false when 0. */
static bool isa_text(unsigned isa, char *out, size_t size)
{
    out[0] = '\0';
    if (isa == 0)
        return false;
    snprintf(out, size, "%u.%u", isa / 10, isa % 10);
    return true;
}

/* The oldest driver that loads code needing NEEDS_CUDA, "450.80.02" or a branch "535"; false when
 * the need is unknown or no driver branch is known for it. */
static bool min_driver_text(int needs_cuda, char *out, size_t size)
{
    out[0] = '\0';
    return needs_cuda > 0 && md_driver_min_for_cuda(needs_cuda, out, size);
}

static json_t *text_or_null(const char *text)
{
    return text[0] ? json_string(text) : json_null();
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static json_t *json_arch_list(const md_binary *bin, md_code_kind kind)
{
    char names[MAX_ARCHS][24];
    size_t n = md_binary_archs(bin, kind, names, MAX_ARCHS);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_string(names[i]));
    return list;
}

static json_t *json_entry(const md_code_entry *e)
{
    char arch[24];
    md_arch_format(arch, sizeof arch, e->kind == MD_CODE_PTX, e->sm, e->variant);
    char variant[2] = { e->variant, 0 };
    json_t *kernels = json_array();
    for (size_t k = 0; k < e->n_kernels; k++) {
        const md_kernel *kern = &e->kernels[k];
        json_array_append_new(kernels, json_pack("{s:o, s:i, s:o, s:I}", "name", md_cli_json_bytes(kern->name),
                                                 "registers", (int)kern->registers, "max_threads",
                                                 kern->max_threads ? json_integer(kern->max_threads) : json_null(),
                                                 "shared_bytes", (json_int_t)kern->shared_bytes));
    }
    const char *comp = compression_name(e->compression);
    char toolkit[16], isa[16], needs[16], driver[24];
    cuda_text((int)e->toolkit, toolkit, sizeof toolkit);
    isa_text(e->ptx_isa, isa, sizeof isa);
    cuda_text(e->needs_cuda, needs, sizeof needs);
    min_driver_text(e->needs_cuda, driver, sizeof driver);
    return json_pack("{s:s, s:s, s:i, s:o, s:o, s:i, s:b, s:o, s:I, s:I, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                     "kind", e->kind == MD_CODE_SASS ? "sass" : "ptx", "arch", arch, "sm", (int)e->sm,
                     "variant", e->variant ? json_string(variant) : json_null(),
                     "section", e->section ? md_cli_json_bytes(e->section) : json_null(),
                     "container", (int)e->container, "compressed", e->compression != MD_COMPRESS_NONE,
                     "compression", comp ? json_string(comp) : json_null(), "size", (json_int_t)e->size,
                     "uncompressed_size", (json_int_t)e->uncompressed_size, "kernels_read", e->kernels_read,
                     "note", e->note[0] ? md_cli_json_bytes(e->note) : json_null(),
                     "kernels", e->kind == MD_CODE_SASS ? kernels : (json_decref(kernels), json_null()),
                     "toolkit", text_or_null(toolkit), "ptx_isa", text_or_null(isa),
                     "cubin_abi", e->cubin_abi ? json_integer(e->cubin_abi) : json_null(),
                     "needs_cuda", text_or_null(needs), "min_driver", text_or_null(driver));
}

/* What a piece of code is and what it asks of a driver: code, toolkit, ptx_isa, needs_cuda,
 * min_driver. */
static json_t *json_code(md_runs_how how, unsigned sm, char variant, unsigned toolkit_version, unsigned ptx_isa,
                         int needs_cuda)
{
    char code[24], toolkit[16], isa[16], needs[16], driver[24];
    code_name(code, sizeof code, how, sm, variant);
    cuda_text((int)toolkit_version, toolkit, sizeof toolkit);
    isa_text(ptx_isa, isa, sizeof isa);
    cuda_text(needs_cuda, needs, sizeof needs);
    min_driver_text(needs_cuda, driver, sizeof driver);
    return json_pack("{s:s, s:o, s:o, s:o, s:o}", "code", code, "toolkit", text_or_null(toolkit), "ptx_isa",
                     text_or_null(isa), "needs_cuda", text_or_null(needs), "min_driver", text_or_null(driver));
}

/* Adds the driver's part of a verdict to OBJ: driver, driver_cuda, toolkit, ptx_isa, needs_cuda,
 * min_driver, passed_over and minor_version_compat. */
static json_t *json_verdict_driver(json_t *obj, const md_driver *driver, const md_verdict *v)
{
    char cuda[16] = "";
    if (driver)
        cuda_text(driver->cuda, cuda, sizeof cuda);
    json_t *chosen = v->how == MD_RUNS_NOT ? NULL
                     : json_code(v->how, v->code_sm, v->code_variant, v->code_toolkit, v->code_ptx_isa, v->code_needs_cuda);
    const md_code_pick *p = &v->passed_over;
    json_t *passed = p->how == MD_RUNS_NOT ? json_null()
                     : json_code(p->how, p->sm, p->variant, p->toolkit, p->ptx_isa, p->needs_cuda);
    if (passed && p->how != MD_RUNS_NOT)
        json_object_set_new(passed, "kind", json_string(p->how == MD_RUNS_SASS ? "sass" : "ptx"));
    json_object_set_new(obj, "driver", driver ? md_cli_json_bytes(driver->name) : json_null());
    json_object_set_new(obj, "driver_cuda", text_or_null(cuda));
    const char *keys[] = { "toolkit", "ptx_isa", "needs_cuda", "min_driver" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *value = chosen ? json_object_get(chosen, keys[i]) : NULL;
        json_object_set(obj, keys[i], value ? value : json_null());
    }
    json_decref(chosen);
    json_object_set_new(obj, "passed_over", passed);
    json_object_set_new(obj, "minor_version_compat", json_boolean(v->minor_version_compat));
    return obj;
}

static json_t *json_verdict(const md_gpu_target *gpu, const md_driver *driver, const md_verdict *v)
{
    char arch[24], code[24];
    md_arch_format(arch, sizeof arch, false, gpu->arch->sm, 0);
    code_name(code, sizeof code, v->how, v->code_sm, v->code_variant);
    json_t *kernels = json_array();
    for (size_t k = 0; k < v->n_kernels; k++) {
        const md_kernel_fit *f = &v->kernels[k];
        json_array_append_new(kernels, json_pack("{s:o, s:i, s:i, s:b, s:I, s:i, s:b, s:i}", "name", md_cli_json_bytes(f->name),
                                                 "registers", (int)f->registers, "threads", (int)f->threads,
                                                 "bounds_declared", f->bounds_declared, "registers_needed",
                                                 (json_int_t)f->registers_needed, "registers_per_block",
                                                 (int)f->registers_per_block, "fits", f->fits,
                                                 "max_threads_that_fit", (int)f->max_threads_that_fit));
    }
    json_t *obj = json_pack("{s:o, s:s, s:s, s:o, s:o}", "gpu", md_cli_json_bytes(gpu->label), "arch", arch, "runs",
                            md_runs_how_name(v->how), "code", v->how == MD_RUNS_NOT ? json_null() : json_string(code),
                            "kernels", kernels);
    return obj ? json_verdict_driver(obj, driver, v) : NULL;
}

/* ---- text ------------------------------------------------------------------------------------ */

static void print_summary(const md_binary *bin)
{
    char sass[MAX_ARCHS][24], ptx[MAX_ARCHS][24];
    size_t ns = md_binary_archs(bin, MD_CODE_SASS, sass, MAX_ARCHS);
    size_t np = md_binary_archs(bin, MD_CODE_PTX, ptx, MAX_ARCHS);
    printf("%s:", MD_SHOWN(bin->path));
    if (ns + np == 0) {
        printf(" no CUDA device code\n");
        return;
    }
    if (ns) {
        printf(" SASS");
        for (size_t i = 0; i < ns; i++)
            printf(" %s", sass[i]);
    }
    if (np) {
        printf("%s PTX", ns ? ";" : "");
        for (size_t i = 0; i < np; i++)
            printf(" %s", ptx[i]);
    }
    putchar('\n');
}

static void print_entries(const md_binary *bin)
{
    for (size_t i = 0; i < bin->n_entries; i++) {
        const md_code_entry *e = &bin->entries[i];
        char arch[24];
        md_arch_format(arch, sizeof arch, e->kind == MD_CODE_PTX, e->sm, e->variant);
        const char *comp = compression_name(e->compression);
        if (e->section)
            printf("  %s container %u: ", MD_SHOWN(e->section), e->container);
        else if (bin->type != MD_FILE_CUBIN)
            printf("  container %u: ", e->container);
        else
            printf("  ");
        printf("%s %s, %llu bytes%s%s%s", e->kind == MD_CODE_SASS ? "SASS" : "PTX",
               arch, (unsigned long long)e->size, comp ? ", compressed (" : ", uncompressed", comp ? comp : "",
               comp ? ")" : "");
        if (e->kind == MD_CODE_SASS)
            printf(", %zu kernel%s", e->n_kernels, e->n_kernels == 1 ? "" : "s");
        char version[16], need[96];
        if (cuda_text((int)e->toolkit, version, sizeof version))
            printf(", CUDA %s", version);
        else if (isa_text(e->ptx_isa, version, sizeof version))
            printf(", ISA %s", version);
        md_driver_need_text(e->needs_cuda, need, sizeof need);
        printf(", %s%s%s%s\n", need[0] ? "needs " : "driver need unknown", need, e->note[0] ? "; " : "",
               MD_SHOWN(e->note));
        for (size_t k = 0; k < e->n_kernels; k++) {
            const md_kernel *kern = &e->kernels[k];
            printf("    %s: %u registers", MD_SHOWN(kern->name), kern->registers);
            if (kern->max_threads)
                printf(", launch bounds %u threads", kern->max_threads);
            printf(", %llu bytes static shared\n", (unsigned long long)kern->shared_bytes);
        }
    }
}

/* The error an old driver gives for code it cannot load: SASS in a format it cannot read, or PTX
 * of a newer ISA than its JIT compiler. */
static const char *refusal_text(md_runs_how how)
{
    return how == MD_RUNS_PTX_JIT ? "the provided PTX was compiled with an unsupported toolchain"
                                  : "device kernel image is invalid";
}

static void print_verdict(const md_gpu_target *gpu, const md_driver *driver, const md_verdict *v, bool verbose)
{
    char code[24], label[192], chosen[96], need[96], passed[192] = "", cuda[16];
    code_name(code, sizeof code, v->how, v->code_sm, v->code_variant);
    if (driver && cuda_text(driver->cuda, cuda, sizeof cuda))
        snprintf(label, sizeof label, "%s with driver %s (CUDA %s)", gpu->label, driver->name, cuda);
    else
        snprintf(label, sizeof label, "%s", gpu->label);
    md_code_pick pick = { .how = v->how, .sm = v->code_sm, .variant = v->code_variant, .toolkit = v->code_toolkit,
                          .ptx_isa = v->code_ptx_isa, .needs_cuda = v->code_needs_cuda };
    md_code_pick_text(&pick, chosen, sizeof chosen);
    md_driver_need_text(v->code_needs_cuda, need, sizeof need);
    if (v->passed_over.how != MD_RUNS_NOT) {
        char what[96], over_need[96];
        md_code_pick_text(&v->passed_over, what, sizeof what);
        md_driver_need_text(v->passed_over.needs_cuda, over_need, sizeof over_need);
        snprintf(passed, sizeof passed, "%s needs %s", what, over_need);
    }
    printf("  %s: ", MD_SHOWN(label));
    if (passed[0] && v->how != MD_RUNS_NOT) {
        /* The driver is why this code and not the better one: that comes first. */
        char version[16];
        printf("%s; ", passed);
        if (v->how == MD_RUNS_SASS && cuda_text((int)v->code_toolkit, version, sizeof version))
            printf("runs the CUDA %s %s SASS", version, code);
        else if (v->how == MD_RUNS_SASS)
            printf("runs the %s SASS", code);
        else
            printf("runs only through PTX JIT (%s compiled by the driver at load time)", chosen);
    } else if (passed[0]) {
        printf("cannot run: %s (\"%s\")", passed, refusal_text(v->passed_over.how));
    } else {
        switch (v->how) {
        case MD_RUNS_SASS:
            printf("runs (%s)", chosen);
            break;
        case MD_RUNS_PTX_JIT:
            printf("runs only through PTX JIT (%s compiled by the driver at load time)", chosen);
            break;
        case MD_RUNS_NOT:
            printf("cannot run: %s (\"no kernel image is available for execution on the device\")", v->cannot_run);
            break;
        }
        if (v->how != MD_RUNS_NOT && need[0])
            printf(", which needs %s", need);
    }
    if (driver && driver->tegra && v->minor_version_compat) {
        char version[16];
        cuda_text((int)v->code_toolkit, version, sizeof version);
        printf("\n    note: CUDA %s SASS on a CUDA %s Jetson driver loads only through minor-version compatibility, "
               "which NVIDIA documents for discrete GPUs only", version, cuda);
    }
    putchar('\n');
    for (size_t k = 0; k < v->n_kernels; k++) {
        const md_kernel_fit *f = &v->kernels[k];
        if (f->fits && !verbose)
            continue;
        printf("    %s: %u registers x %u threads%s = %lu of %u registers per block: ", MD_SHOWN(f->name), f->registers,
               f->threads, f->bounds_declared ? " (launch bounds)" : " (no launch bounds)", f->registers_needed,
               f->registers_per_block);
        if (f->fits)
            printf("fits\n");
        else if (f->bounds_declared)
            printf("too many resources requested for launch; at most %u threads fit\n", f->max_threads_that_fit);
        else
            printf("a %u-thread launch fails with too many resources; at most %u threads fit\n", f->threads,
                   f->max_threads_that_fit);
    }
}

/* ---- the command ----------------------------------------------------------------------------- */

static const md_option md_cli_inspect_options[] = {
    { 0, "FILE|DIR", NULL, MD_OPT_POSITIONAL | MD_OPT_REPEATABLE,
      "ELF executable, shared object or object, .fatbin, .cubin, .whl, or a directory searched for them" },
    { 'g', "gpu", "ARCH", MD_OPT_REPEATABLE,
      "also say whether the code runs there and whether each kernel's registers fit one block "
      "(sm_61, 6.1, or a name: p40, tx2, orin, h100)" },
    { 'd', "driver", "VERSION", 0,
      "with --gpu, count only the code that driver loads: a Linux driver (535, 535.104.05), a Jetson "
      "L4T line (r32, r35) or a CUDA version (cuda12.2)" },
    { 'j', "json", NULL, 0, "print JSON instead of text" },
    { 'v', "verbose", NULL, MD_OPT_SHORT, "list every fatbin entry and kernel" },
    MD_OPTION_HELP,
    MD_OPTION_END
};

static int cmd_inspect(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "inspect", md_cli_inspect_options))
        return MD_EXIT_INTERNAL;
    inspect_options opt = { 0 };
    md_error err;
    char text[sizeof err.message + 64];
    md_error_clear(&err);
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'g':
            if (opt.n_gpus == MAX_GPUS)
                return md_cli_usage_error("inspect", "too many --gpu options (at most %d)", MAX_GPUS);
            if (md_gpu_target_parse(optarg, &opt.gpus[opt.n_gpus], &err) != MD_OK)
                return err.code == MD_ERR_ARGUMENT
                           ? md_cli_usage_error("inspect", "%s", md_cli_error_text(&err, text, sizeof text))
                           : (md_cli_report(&err), MD_EXIT_INTERNAL);
            opt.n_gpus++;
            break;
        case 'd':
            if (md_driver_parse(optarg, &opt.driver, &err) != MD_OK)
                return err.code == MD_ERR_ARGUMENT
                           ? md_cli_usage_error("inspect", "--driver: %s", md_cli_error_text(&err, text, sizeof text))
                           : (md_cli_report(&err), MD_EXIT_INTERNAL);
            opt.have_driver = true;
            break;
        case 'j': opt.json = true; break;
        case 'v': opt.verbose = true; break;
        case 'h': md_cli_print_help(stdout, &md_cmd_inspect); return MD_EXIT_OK;
        default: return md_cli_option_error("inspect", argv, c);
        }
    }
    if (optind >= argc)
        return md_cli_usage_error("inspect", "no file given");
    if (opt.have_driver && opt.n_gpus == 0)
        return md_cli_usage_error("inspect", "--driver needs --gpu: it says which code a GPU runs with that driver");
    const md_driver *driver = opt.have_driver ? &opt.driver : NULL;
    /* The floors each entry's driver is named from; loaded lazily, a failed allocation would
     * print as "no driver known" instead of an error. */
    if (md_driver_table_load(&err) != MD_OK) {
        md_cli_report(&err);
        return md_cli_exit_for(err.code);
    }

    md_inspection ins = { 0 };
    int exit_code = MD_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        if (md_inspect_path(argv[i], &ins, &err) != MD_OK) {
            md_cli_report(&err);
            md_inspection_free(&ins);
            return md_cli_exit_for(err.code);
        }
    }

    json_t *files = opt.json ? json_array() : NULL;
    if (opt.json && !files) { /* not text in place of the JSON asked for */
        md_inspection_free(&ins);
        return md_cli_print_json(NULL);
    }
    for (size_t i = 0; i < ins.count; i++) {
        const md_inspected *it = &ins.items[i];
        if (it->status != MD_OK) {
            md_cli_error("%s", it->message);
            exit_code = md_cli_exit_for(it->status);
            if (files)
                json_array_append_new(files, json_pack("{s:o, s:{s:s, s:o}}", "path", md_cli_json_bytes(it->bin.path),
                                                       "error", "code", status_name(it->status), "message",
                                                       md_cli_json_bytes(it->message)));
            continue;
        }
        json_t *file = NULL, *gpus = NULL;
        if (files) {
            json_t *entries = json_array();
            for (size_t e = 0; e < it->bin.n_entries; e++)
                json_array_append_new(entries, json_entry(&it->bin.entries[e]));
            gpus = json_array();
            file = json_pack("{s:o, s:s, s:n, s:i, s:o, s:o, s:o, s:o}", "path", md_cli_json_bytes(it->bin.path), "type",
                             file_type_name(it->bin.type), "error", "containers", (int)it->bin.containers,
                             "sass", json_arch_list(&it->bin, MD_CODE_SASS), "ptx",
                             json_arch_list(&it->bin, MD_CODE_PTX), "entries", entries, "gpus", gpus);
            json_array_append_new(files, file);
        } else {
            print_summary(&it->bin);
            if (opt.verbose)
                print_entries(&it->bin);
        }
        for (size_t g = 0; g < opt.n_gpus; g++) {
            md_verdict v;
            if (md_runs_on(&it->bin, opt.gpus[g].arch, driver ? driver->cuda : 0, &v, &err) != MD_OK) {
                md_cli_report(&err);
                json_decref(files);
                md_inspection_free(&ins);
                return md_cli_exit_for(err.code);
            }
            if (gpus)
                json_array_append_new(gpus, json_verdict(&opt.gpus[g], driver, &v));
            else
                print_verdict(&opt.gpus[g], driver, &v, opt.verbose);
            if ((v.how == MD_RUNS_NOT || v.n_not_fitting) && exit_code == MD_EXIT_OK)
                exit_code = MD_EXIT_PROBLEMS;
            md_verdict_free(&v);
        }
    }
    if (files) {
        int rc = md_cli_print_json(json_pack("{s:o, s:I}", "files", files, "skipped", (json_int_t)ins.skipped));
        if (rc != MD_EXIT_OK)
            exit_code = rc;
    }
    md_inspection_free(&ins);
    return exit_code;
}

const md_command md_cmd_inspect = { "inspect", cmd_inspect,
    "Tell what GPU code a binary carries and where it can run",
    "inspect [--json] [-v] [--gpu ARCH]... [--driver VERSION] FILE|DIR...",
    md_cli_inspect_options };
