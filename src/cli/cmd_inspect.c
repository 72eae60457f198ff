/* msda-doctor inspect: what GPU code a binary carries, and where it can run. */
#include <getopt.h>
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
    }
    return "internal";
}

static void code_name(char *buf, size_t size, md_runs_how how, unsigned sm, char variant)
{
    md_arch_format(buf, (unsigned)size, how == MD_RUNS_PTX_JIT, sm, variant);
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
        json_array_append_new(kernels, json_pack("{s:s, s:i, s:o, s:I}", "name", kern->name,
                                                 "registers", (int)kern->registers, "max_threads",
                                                 kern->max_threads ? json_integer(kern->max_threads) : json_null(),
                                                 "shared_bytes", (json_int_t)kern->shared_bytes));
    }
    const char *comp = compression_name(e->compression);
    return json_pack("{s:s, s:s, s:i, s:o, s:i, s:b, s:o, s:I, s:I, s:b, s:o, s:o}",
                     "kind", e->kind == MD_CODE_SASS ? "sass" : "ptx", "arch", arch, "sm", (int)e->sm,
                     "variant", e->variant ? json_string(variant) : json_null(),
                     "container", (int)e->container, "compressed", e->compression != MD_COMPRESS_NONE,
                     "compression", comp ? json_string(comp) : json_null(), "size", (json_int_t)e->size,
                     "uncompressed_size", (json_int_t)e->uncompressed_size, "kernels_read", e->kernels_read,
                     "note", e->note[0] ? json_string(e->note) : json_null(),
                     "kernels", e->kind == MD_CODE_SASS ? kernels : (json_decref(kernels), json_null()));
}

static json_t *json_verdict(const md_gpu_target *gpu, const md_verdict *v)
{
    char arch[24], code[24];
    md_arch_format(arch, sizeof arch, false, gpu->arch->sm, 0);
    code_name(code, sizeof code, v->how, v->code_sm, v->code_variant);
    json_t *kernels = json_array();
    for (size_t k = 0; k < v->n_kernels; k++) {
        const md_kernel_fit *f = &v->kernels[k];
        json_array_append_new(kernels, json_pack("{s:s, s:i, s:i, s:b, s:I, s:i, s:b, s:i}", "name", f->name,
                                                 "registers", (int)f->registers, "threads", (int)f->threads,
                                                 "bounds_declared", f->bounds_declared, "registers_needed",
                                                 (json_int_t)f->registers_needed, "registers_per_block",
                                                 (int)f->registers_per_block, "fits", f->fits,
                                                 "max_threads_that_fit", (int)f->max_threads_that_fit));
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o}", "gpu", gpu->label, "arch", arch, "runs",
                     md_runs_how_name(v->how), "code", v->how == MD_RUNS_NOT ? json_null() : json_string(code),
                     "kernels", kernels);
}

/* ---- text ------------------------------------------------------------------------------------ */

static void print_summary(const md_binary *bin)
{
    char sass[MAX_ARCHS][24], ptx[MAX_ARCHS][24];
    size_t ns = md_binary_archs(bin, MD_CODE_SASS, sass, MAX_ARCHS);
    size_t np = md_binary_archs(bin, MD_CODE_PTX, ptx, MAX_ARCHS);
    printf("%s:", bin->path);
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
        if (bin->type != MD_FILE_CUBIN)
            printf("  container %u: ", e->container);
        else
            printf("  ");
        printf("%s %s, %llu bytes%s%s%s", e->kind == MD_CODE_SASS ? "SASS" : "PTX",
               arch, (unsigned long long)e->size, comp ? ", compressed (" : ", uncompressed", comp ? comp : "",
               comp ? ")" : "");
        if (e->kind == MD_CODE_SASS)
            printf(", %zu kernel%s%s%s", e->n_kernels, e->n_kernels == 1 ? "" : "s", e->note[0] ? "; " : "", e->note);
        putchar('\n');
        for (size_t k = 0; k < e->n_kernels; k++) {
            const md_kernel *kern = &e->kernels[k];
            printf("    %s: %u registers", kern->name, kern->registers);
            if (kern->max_threads)
                printf(", launch bounds %u threads", kern->max_threads);
            printf(", %llu bytes static shared\n", (unsigned long long)kern->shared_bytes);
        }
    }
}

static void print_verdict(const md_gpu_target *gpu, const md_verdict *v, bool verbose)
{
    char code[24];
    code_name(code, sizeof code, v->how, v->code_sm, v->code_variant);
    switch (v->how) {
    case MD_RUNS_SASS:
        printf("  %s: runs (%s SASS)", gpu->label, code);
        break;
    case MD_RUNS_PTX_JIT:
        printf("  %s: runs only through PTX JIT (%s compiled by the driver at load time)", gpu->label, code);
        break;
    case MD_RUNS_NOT:
        printf("  %s: cannot run: no SASS sm_%ux up to sm_%u, no PTX up to compute_%u "
               "(\"no kernel image is available for execution on the device\")",
               gpu->label, gpu->arch->major, gpu->arch->sm, gpu->arch->sm);
        break;
    }
    putchar('\n');
    for (size_t k = 0; k < v->n_kernels; k++) {
        const md_kernel_fit *f = &v->kernels[k];
        if (f->fits && !verbose)
            continue;
        printf("    %s: %u registers x %u threads%s = %lu of %u registers per block: ", f->name, f->registers,
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
        case 'j': opt.json = true; break;
        case 'v': opt.verbose = true; break;
        case 'h': md_cli_print_help(stdout, &md_cmd_inspect); return MD_EXIT_OK;
        default: return md_cli_option_error("inspect", argv, c);
        }
    }
    if (optind >= argc)
        return md_cli_usage_error("inspect", "no file given");

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
                json_array_append_new(files, json_pack("{s:s, s:{s:s, s:s}}", "path", it->bin.path, "error",
                                                       "code", status_name(it->status), "message", it->message));
            continue;
        }
        json_t *file = NULL, *gpus = NULL;
        if (files) {
            json_t *entries = json_array();
            for (size_t e = 0; e < it->bin.n_entries; e++)
                json_array_append_new(entries, json_entry(&it->bin.entries[e]));
            gpus = json_array();
            file = json_pack("{s:s, s:s, s:n, s:i, s:o, s:o, s:o, s:o}", "path", it->bin.path, "type",
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
            if (md_runs_on(&it->bin, opt.gpus[g].arch, &v, &err) != MD_OK) {
                md_cli_report(&err);
                json_decref(files);
                md_inspection_free(&ins);
                return md_cli_exit_for(err.code);
            }
            if (gpus)
                json_array_append_new(gpus, json_verdict(&opt.gpus[g], &v));
            else
                print_verdict(&opt.gpus[g], &v, opt.verbose);
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
    "inspect [--json] [-v] [--gpu ARCH]... FILE|DIR...",
    md_cli_inspect_options };
