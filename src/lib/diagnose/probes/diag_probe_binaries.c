/* Installed MSDA binaries for diagnose: the op's copies the Python probe found on sys.path and
 * those under each --search DIR, each read as `inspect` reads it and judged against every GPU. */
#include <dirent.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "recipes/arch.h"
#include "diag.h"
#include "recipes/product.h"
#include "binary/inspect.h"
#include "recipes/driver_table.h"

#define SEARCH_DEPTH 10

/* Names a copy of the op goes by; matched against the whole path (fnmatch '*' crosses '/'). */
static const char *const op_patterns[] = {
    "*/MultiScaleDeformableAttention*.so", "*/" MD_LIBRARY_NAME, "*/" MD_DIST_NAME "-*.whl",
    "*/mmcv/_ext*.so", "*/detrex/_C*.so", "*/groundingdino/_C*.so",
};

static bool is_op_file(const char *path)
{
    for (size_t i = 0; i < sizeof op_patterns / sizeof op_patterns[0]; i++)
        if (fnmatch(op_patterns[i], path, 0) == 0)
            return true;
    return false;
}

typedef struct {
    char (*paths)[PATH_MAX];
    size_t n, cap;
} path_list;

static void add_path(path_list *l, const char *path)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        snprintf(real, sizeof real, "%s", path);
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->paths[i], real) == 0)
            return;
    if (l->n < l->cap)
        snprintf(l->paths[l->n++], PATH_MAX, "%s", real);
}

/* Depth-limited walk; symbolic links to folders are not followed (no cycles). */
static void walk(path_list *l, const char *dir, int depth)
{
    if (depth > SEARCH_DEPTH || l->n >= l->cap)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && l->n < l->cap) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            walk(l, path, depth + 1);
        else if ((S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) && is_op_file(path))
            add_path(l, path);
    }
    closedir(d);
}

static md_binary_kind kind_of(const char *path)
{
    if (strstr(path, "MultiScaleDeformableAttention"))
        return MD_BIN_EXTENSION;
    if (strstr(path, MD_LIBRARY_NAME) || strstr(path, "/" MD_DIST_NAME "-"))
        return MD_BIN_MSDA_WHEEL;
    return MD_BIN_OTHER_OP;
}

static void list_archs(const md_binary *bin, md_code_kind kind, char *out, size_t size, unsigned *sms, size_t cap,
                       size_t *n)
{
    char names[64][24];
    size_t count = md_binary_archs(bin, kind, names, 64), at = 0;
    out[0] = '\0';
    *n = 0;
    for (size_t i = 0; i < count; i++) {
        if (at + strlen(names[i]) + 2 < size)
            at += (size_t)snprintf(out + at, size - at, "%s%s", i ? " " : "", names[i]);
        const char *digits = strchr(names[i], '_');
        if (digits && *n < cap)
            sms[(*n)++] = (unsigned)strtoul(digits + 1, NULL, 10);
    }
}

/* Whether the kernels read name a float16 or bfloat16 instantiation (mangled c10::Half,
 * __half, c10::BFloat16, __nv_bfloat16, or our own _f16/_bf16 kernels); -1 when no kernel
 * could be read (compressed SASS, PTX only). */
static int half_kernels(const md_binary *bin)
{
    static const char *const markers[] = { "c104Half", "6__half", "c108BFloat16", "13__nv_bfloat16", "_f16", "_bf16" };
    bool read = false;
    for (size_t e = 0; e < bin->n_entries; e++) {
        const md_code_entry *ce = &bin->entries[e];
        if (!ce->kernels_read)
            continue;
        for (size_t k = 0; k < ce->n_kernels; k++) {
            read = true;
            for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++)
                if (ce->kernels[k].name && strstr(ce->kernels[k].name, markers[i]))
                    return 1;
        }
    }
    return read ? 0 : -1;
}

/* "sm_80 SASS from CUDA 13.0 needs driver >= 580.65.06 (CUDA 13.0)": the better code this
 * machine's driver cannot load. */
static void passed_over_text(const md_code_pick *p, char *out, size_t size)
{
    char what[64], need[64];
    md_code_pick_text(p, what, sizeof what);
    md_driver_need_text(p->needs_cuda, need, sizeof need);
    snprintf(out, size, "%s needs %s", what, need[0] ? need : "a newer driver");
}

static void judge(md_machine *m, const md_binary *bin, md_binary_facts *f, md_check *c)
{
    for (size_t g = 0; g < m->n_gpus; g++) {
        const md_machine_gpu *gpu = &m->gpus[g];
        md_binary_on_gpu *o = &f->on_gpu[g];
        const md_arch *arch = md_arch_by_sm(gpu->sm);
        if (!arch) {
            o->how = MD_RUNS_NOT;
            md_check_add(c, MD_LINE_DETAIL, "  %s (sm_%u): not in the architecture table", gpu->name, gpu->sm);
            continue;
        }
        /* the device's own limit wins over the table's (what the driver says is what applies) */
        md_arch local = *arch;
        if (gpu->registers_per_block)
            local.registers_per_block = gpu->registers_per_block;
        md_verdict v;
        md_error err;
        /* the probed driver's CUDA version: code it cannot load does not count (0: not probed) */
        int driver_cuda = m->driver_loaded ? m->driver.driver_version : 0;
        if (md_runs_on(bin, &local, driver_cuda, &v, &err) != MD_OK) {
            md_check_add(c, MD_LINE_PROBLEM, "%s: %s", f->path, err.message);
            md_check_raise(c, MD_CHECK_ERROR);
            continue;
        }
        o->how = v.how;
        o->code_sm = v.code_sm;
        o->code_variant = v.code_variant;
        o->n_not_fitting = v.n_not_fitting;
        o->code_toolkit = v.code_toolkit;
        o->code_needs_cuda = v.code_needs_cuda;
        o->passed_over = v.passed_over;
        snprintf(o->cannot_run, sizeof o->cannot_run, "%s", v.cannot_run);
        for (size_t k = 0; k < v.n_kernels; k++) {
            const md_kernel_fit *kf = &v.kernels[k];
            if (!kf->fits && (o->max_threads_that_fit == 0 || kf->max_threads_that_fit < o->max_threads_that_fit))
                o->max_threads_that_fit = kf->max_threads_that_fit;
            if (kf->registers_needed > o->worst_needed) {
                o->worst_needed = kf->registers_needed;
                o->worst_registers = kf->registers;
                o->worst_threads = kf->threads;
                snprintf(o->worst_kernel, sizeof o->worst_kernel, "%s", kf->name);
            }
        }
        md_verdict_free(&v);
        char code[24];
        md_arch_format(code, sizeof code, o->how == MD_RUNS_PTX_JIT, o->code_sm, o->code_variant);
        char driver[96] = "", passed[192] = "";
        if (driver_cuda > 0) {
            char cuda[16];
            md_cuda_version_text(driver_cuda, cuda, sizeof cuda);
            if (m->driver_release[0])
                snprintf(driver, sizeof driver, " with driver %s (CUDA %s)", m->driver_release, cuda);
            else
                snprintf(driver, sizeof driver, " with a CUDA %s driver", cuda);
        }
        if (o->passed_over.how != MD_RUNS_NOT)
            passed_over_text(&o->passed_over, passed, sizeof passed);
        if (o->how == MD_RUNS_NOT && passed[0]) {
            md_check_add(c, MD_LINE_PROBLEM, "%s cannot run on GPU %zu %s (sm_%u)%s: %s", f->path, g, gpu->name, gpu->sm,
                         driver, passed);
            md_check_raise(c, MD_CHECK_FAIL);
        } else if (o->how == MD_RUNS_NOT) {
            md_check_add(c, MD_LINE_PROBLEM, "%s cannot run on GPU %zu %s (sm_%u): %s", f->path, g, gpu->name, gpu->sm,
                         o->cannot_run);
            md_check_raise(c, MD_CHECK_FAIL);
        } else if (o->n_not_fitting) {
            md_check_add(c, MD_LINE_PROBLEM, "%s on GPU %zu %s (sm_%u): %s needs %u registers x %u threads = %lu of %u "
                         "registers per block (too many resources requested for launch); at most %u threads fit",
                         f->path, g, gpu->name, gpu->sm, o->worst_kernel, o->worst_registers, o->worst_threads,
                         o->worst_needed, local.registers_per_block, o->max_threads_that_fit);
            md_check_raise(c, MD_CHECK_FAIL);
        } else if (o->how == MD_RUNS_PTX_JIT) {
            md_check_add(c, MD_LINE_HINT, "%s runs on GPU %zu %s only through PTX JIT (%s compiled at load time)",
                         f->path, g, gpu->name, code);
            md_check_raise(c, MD_CHECK_WARN);
        } else {
            const md_code_pick chosen = { .how = MD_RUNS_SASS, .sm = o->code_sm, .variant = o->code_variant,
                                          .toolkit = o->code_toolkit };
            char what[64];
            md_code_pick_text(&chosen, what, sizeof what);
            md_check_add(c, MD_LINE_DETAIL, "  runs on GPU %zu %s (%s)", g, gpu->name, what);
        }
        if (o->how != MD_RUNS_NOT && passed[0])
            md_check_add(c, MD_LINE_DETAIL, "  on GPU %zu%s: %s", g, driver, passed);
    }
}

void md_probe_binaries(md_machine *m, md_check *c)
{
    c->id = "binaries";
    c->name = "MSDA binaries";
    c->status = MD_CHECK_OK;
    path_list l = { .cap = MD_DIAG_MAX_BINARIES };
    l.paths = calloc(l.cap, sizeof *l.paths);
    m->binaries = calloc(MD_DIAG_MAX_BINARIES * 2, sizeof *m->binaries);
    if (!l.paths || !m->binaries) {
        free(l.paths);
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "the probe failed: out of memory");
        return;
    }
    for (size_t i = 0; i < m->py.n_binary_paths; i++)
        add_path(&l, m->py.binary_paths[i]);
    for (size_t i = 0; i < m->n_search_dirs; i++) {
        struct stat st;
        if (stat(m->search_dirs[i], &st) == 0 && !S_ISDIR(st.st_mode))
            add_path(&l, m->search_dirs[i]); /* a file named directly is taken whatever its name */
        else
            walk(&l, m->search_dirs[i], 0);
    }
    if (l.n == 0) {
        free(l.paths);
        c->status = MD_CHECK_SKIPPED;
        snprintf(c->summary, sizeof c->summary, "none found (%s%s)", m->py.ran ? "on the Python path" : "no Python probed",
                 m->n_search_dirs ? " and in the folders searched" : "");
        c->hint = MD_HINT_SEARCH;
        return;
    }
    md_error err;
    md_error_clear(&err);
    for (size_t i = 0; i < l.n; i++) {
        md_inspection ins = { 0 };
        if (md_inspect_path(l.paths[i], &ins, &err) != MD_OK) {
            md_check_add(c, MD_LINE_PROBLEM, "%s: %s", l.paths[i], err.message);
            md_check_raise(c, MD_CHECK_ERROR);
            md_inspection_free(&ins);
            continue;
        }
        for (size_t k = 0; k < ins.count && m->n_binaries < MD_DIAG_MAX_BINARIES * 2; k++) {
            const md_inspected *it = &ins.items[k];
            md_binary_facts *f = &m->binaries[m->n_binaries++];
            snprintf(f->path, sizeof f->path, "%s", it->bin.path);
            f->kind = kind_of(it->bin.path);
            f->torch_imports = f->torch_missing = f->needs_torch_python = f->links_torch_python = -1;
            f->half_kernels = -1;
            if (it->status != MD_OK) {
                snprintf(f->error, sizeof f->error, "%s", it->message);
                md_check_add(c, MD_LINE_PROBLEM, "%s", it->message);
                md_check_raise(c, MD_CHECK_FAIL);
                continue;
            }
            f->readable = true;
            list_archs(&it->bin, MD_CODE_SASS, f->sass, sizeof f->sass, f->sass_sms, 32, &f->n_sass);
            list_archs(&it->bin, MD_CODE_PTX, f->ptx, sizeof f->ptx, f->ptx_sms, 16, &f->n_ptx);
            f->half_kernels = half_kernels(&it->bin);
            md_check_add(c, MD_LINE_DETAIL, "%s: SASS %s; PTX %s", f->path, f->n_sass ? f->sass : "none",
                         f->n_ptx ? f->ptx : "none");
            md_probe_binary_symbols(m, f, c);
            if (f->n_sass + f->n_ptx == 0) {
                md_check_add(c, MD_LINE_PROBLEM, "%s carries no CUDA device code (built without CUDA)", f->path);
                md_check_raise(c, MD_CHECK_FAIL);
                continue;
            }
            judge(m, &it->bin, f, c);
        }
        md_inspection_free(&ins);
    }
    free(l.paths);
    snprintf(c->summary, sizeof c->summary, "%zu found%s", m->n_binaries,
             m->n_gpus ? "" : "; no GPU to judge them against");
}
