#include "runs_on.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARP 32u
#define REGISTER_ALLOCATION_UNIT 256u

unsigned long md_block_registers(unsigned registers, unsigned threads)
{
    unsigned long per_warp = (unsigned long)registers * WARP;
    per_warp = (per_warp + REGISTER_ALLOCATION_UNIT - 1) / REGISTER_ALLOCATION_UNIT * REGISTER_ALLOCATION_UNIT;
    unsigned long warps = (threads + WARP - 1) / WARP;
    return per_warp * warps;
}

unsigned md_threads_that_fit(unsigned registers, unsigned limit, unsigned max_threads)
{
    unsigned best = 0;
    for (unsigned t = WARP; t <= max_threads; t += WARP)
        if (md_block_registers(registers, t) <= limit)
            best = t;
    return best;
}

const char *md_runs_how_name(md_runs_how how)
{
    switch (how) {
    case MD_RUNS_SASS: return "sass";
    case MD_RUNS_PTX_JIT: return "ptx-jit";
    case MD_RUNS_NOT: return "cannot-run";
    }
    return "cannot-run";
}

/* SASS for sm_XY runs on CC X.Z with Z >= Y; sm_XYa only on X.Y. */
static bool sass_runs(const md_code_entry *e, const md_arch *arch)
{
    if (e->variant == 'a')
        return e->sm == arch->sm;
    return e->sm / 10 == arch->major && e->sm % 10 <= arch->minor;
}

/* PTX for compute_XY is compiled by the driver for any CC at or above X.Y. */
static bool ptx_runs(const md_code_entry *e, const md_arch *arch)
{
    if (e->variant == 'a')
        return e->sm == arch->sm;
    if (e->variant == 'f')
        return e->sm / 10 == arch->major && e->sm % 10 <= arch->minor;
    return e->sm <= arch->sm;
}

/* A driver newer than every CUDA version: every entry loads, and of equal code the newest wins,
 * as the code a current driver runs. */
#define ANY_DRIVER INT_MAX

/* Whether entry E beats BEST. Newer SM first. Of one SM, plain code beats arch-specific code: the
 * driver loads either, and only the plain one is what a portable build would carry. Of equal
 * code, the newest need a given driver meets (the code it would run), or without a driver the
 * oldest known need (the least the code asks). */
static bool better(const md_code_entry *e, const md_code_pick *best, int driver_cuda)
{
    if (best->how == MD_RUNS_NOT || e->sm != best->sm)
        return best->how == MD_RUNS_NOT || e->sm > best->sm;
    if ((e->variant == 0) != (best->variant == 0))
        return e->variant == 0;
    if (e->variant != best->variant || e->needs_cuda == best->needs_cuda)
        return false;
    if (driver_cuda > 0)
        return e->needs_cuda > best->needs_cuda;
    return e->needs_cuda > 0 && (best->needs_cuda == 0 || e->needs_cuda < best->needs_cuda);
}

static void take(md_code_pick *p, const md_code_entry *e, md_runs_how how)
{
    *p = (md_code_pick){ .how = how, .sm = e->sm, .variant = e->variant, .toolkit = e->toolkit,
                         .ptx_isa = e->ptx_isa, .needs_cuda = e->needs_cuda };
}

/* The best SASS, else the best PTX, of BIN for ARCH among the entries a driver of DRIVER_CUDA
 * loads (every entry when 0; an entry whose need is unknown always counts). */
static md_code_pick pick(const md_binary *bin, const md_arch *arch, int driver_cuda)
{
    md_code_pick sass = { .how = MD_RUNS_NOT }, ptx = { .how = MD_RUNS_NOT };
    for (size_t i = 0; i < bin->n_entries; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (driver_cuda > 0 && e->needs_cuda > driver_cuda)
            continue;
        if (e->kind == MD_CODE_SASS && sass_runs(e, arch) && better(e, &sass, driver_cuda))
            take(&sass, e, MD_RUNS_SASS);
        else if (e->kind == MD_CODE_PTX && ptx_runs(e, arch) && better(e, &ptx, driver_cuda))
            take(&ptx, e, MD_RUNS_PTX_JIT);
    }
    return sass.how != MD_RUNS_NOT ? sass : ptx;
}

static bool same_code(const md_code_pick *a, const md_code_pick *b)
{
    return a->how == b->how && a->sm == b->sm && a->variant == b->variant && a->toolkit == b->toolkit &&
           a->ptx_isa == b->ptx_isa;
}

/* An entry of the chosen SASS: its architecture, written by the same toolkit. */
static bool chosen_sass(const md_code_entry *e, const md_code_pick *c)
{
    return e->kind == MD_CODE_SASS && e->sm == c->sm && e->variant == c->variant && e->toolkit == c->toolkit;
}

/* The verdict's cannot_run text: what is missing, then each arch-specific or family entry that is
 * there but does not run on ARCH, with the rule that keeps it out (sass_runs, ptx_runs). */
static void cannot_run_text(const md_binary *bin, const md_arch *arch, char *out, size_t size)
{
    bool variants = false;
    for (size_t i = 0; i < bin->n_entries && !variants; i++)
        variants = bin->entries[i].variant != 0;
    /* With arch-specific or family code there, "no SASS sm_10x" would read as a denial of it. */
    int n = snprintf(out, size, "no SASS %ssm_%ux up to sm_%u%s, no PTX up to compute_%u",
                     variants ? "that runs here (" : "", arch->major, arch->sm, variants ? ")" : "", arch->sm);
    unsigned listed = 0;
    for (size_t i = 0; i < bin->n_entries && listed < 3 && n > 0 && (size_t)n < size; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (!e->variant)
            continue;
        bool seen = false; /* one line per code, not per copy */
        for (size_t k = 0; k < i && !seen; k++)
            seen = bin->entries[k].variant == e->variant && bin->entries[k].sm == e->sm &&
                   bin->entries[k].kind == e->kind;
        if (seen)
            continue;
        char name[24];
        md_arch_format(name, sizeof name, e->kind == MD_CODE_PTX, e->sm, e->variant);
        if (e->variant == 'a')
            n += snprintf(out + n, size - (size_t)n, "; %s %s is there, but arch-specific code runs only on sm_%u",
                          name, e->kind == MD_CODE_PTX ? "PTX" : "SASS", e->sm);
        else
            n += snprintf(out + n, size - (size_t)n, "; %s %s is there, but family code runs only on sm_%ux from sm_%u",
                          name, e->kind == MD_CODE_PTX ? "PTX" : "SASS", e->sm / 10, e->sm);
        listed++;
    }
}

md_status md_runs_on(const md_binary *bin, const md_arch *arch, int driver_cuda, md_verdict *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    out->driver_cuda = driver_cuda > 0 ? driver_cuda : 0;
    out->passed_over.how = MD_RUNS_NOT;
    md_code_pick chosen = pick(bin, arch, out->driver_cuda);
    if (out->driver_cuda > 0) {
        md_code_pick unlimited = pick(bin, arch, ANY_DRIVER);
        if (unlimited.how != MD_RUNS_NOT && !same_code(&unlimited, &chosen))
            out->passed_over = unlimited;
    }
    out->how = chosen.how;
    if (chosen.how == MD_RUNS_NOT) {
        cannot_run_text(bin, arch, out->cannot_run, sizeof out->cannot_run);
        return MD_OK;
    }
    out->code_sm = chosen.sm;
    out->code_variant = chosen.variant;
    out->code_toolkit = chosen.toolkit;
    out->code_ptx_isa = chosen.ptx_isa;
    out->code_needs_cuda = chosen.needs_cuda;
    out->minor_version_compat = chosen.how == MD_RUNS_SASS && out->driver_cuda > 0 &&
                                (int)chosen.toolkit > out->driver_cuda;
    if (chosen.how != MD_RUNS_SASS)
        return MD_OK;

    size_t total = 0;
    for (size_t i = 0; i < bin->n_entries; i++)
        if (chosen_sass(&bin->entries[i], &chosen))
            total += bin->entries[i].n_kernels;
    if (total == 0)
        return MD_OK;
    out->kernels = calloc(total, sizeof *out->kernels);
    if (!out->kernels)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < bin->n_entries; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (!chosen_sass(e, &chosen))
            continue;
        for (size_t k = 0; k < e->n_kernels; k++) {
            const md_kernel *kern = &e->kernels[k];
            md_kernel_fit *f = &out->kernels[out->n_kernels++];
            f->name = kern->name;
            f->registers = kern->registers;
            f->bounds_declared = kern->max_threads != 0;
            f->threads = f->bounds_declared ? kern->max_threads : arch->max_threads_per_block;
            f->registers_per_block = arch->registers_per_block;
            f->registers_needed = md_block_registers(f->registers, f->threads);
            f->max_threads_that_fit =
                md_threads_that_fit(f->registers, arch->registers_per_block, arch->max_threads_per_block);
            f->fits = f->registers_needed <= arch->registers_per_block;
            if (!f->fits)
                out->n_not_fitting++;
        }
    }
    return MD_OK;
}

void md_verdict_free(md_verdict *v)
{
    free(v->kernels);
    memset(v, 0, sizeof *v);
}

void md_code_pick_text(const md_code_pick *p, char *out, size_t size)
{
    char arch[24];
    const bool ptx = p->how == MD_RUNS_PTX_JIT;
    md_arch_format(arch, sizeof arch, ptx, p->sm, p->variant);
    if (ptx && p->ptx_isa)
        snprintf(out, size, "%s PTX of ISA %u.%u", arch, p->ptx_isa / 10, p->ptx_isa % 10);
    else if (ptx)
        snprintf(out, size, "%s PTX", arch);
    else if (p->toolkit)
        snprintf(out, size, "%s SASS from CUDA %u.%u", arch, p->toolkit / 1000, (p->toolkit % 1000) / 10);
    else
        snprintf(out, size, "%s SASS", arch);
}
