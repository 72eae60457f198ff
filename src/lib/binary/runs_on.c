#include "runs_on.h"

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

/* Prefer plain code to arch-specific code of the same SM: the driver loads either, and only the
 * plain one is what a portable build would carry. Returns true when A is the better choice. */
static bool better(const md_code_entry *a, unsigned best_sm, char best_variant, bool have)
{
    if (!have || a->sm > best_sm)
        return true;
    return a->sm == best_sm && best_variant != 0 && a->variant == 0;
}

md_status md_runs_on(const md_binary *bin, const md_arch *arch, md_verdict *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    out->how = MD_RUNS_NOT;
    bool have_sass = false, have_ptx = false;
    unsigned sass_sm = 0, ptx_sm = 0;
    char sass_variant = 0, ptx_variant = 0;
    for (size_t i = 0; i < bin->n_entries; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (e->kind == MD_CODE_SASS && sass_runs(e, arch) && better(e, sass_sm, sass_variant, have_sass)) {
            have_sass = true;
            sass_sm = e->sm;
            sass_variant = e->variant;
        } else if (e->kind == MD_CODE_PTX && ptx_runs(e, arch) && better(e, ptx_sm, ptx_variant, have_ptx)) {
            have_ptx = true;
            ptx_sm = e->sm;
            ptx_variant = e->variant;
        }
    }
    if (have_ptx && !have_sass) {
        out->how = MD_RUNS_PTX_JIT;
        out->code_sm = ptx_sm;
        out->code_variant = ptx_variant;
        return MD_OK;
    }
    if (!have_sass)
        return MD_OK;
    out->how = MD_RUNS_SASS;
    out->code_sm = sass_sm;
    out->code_variant = sass_variant;

    size_t total = 0;
    for (size_t i = 0; i < bin->n_entries; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (e->kind == MD_CODE_SASS && e->sm == sass_sm && e->variant == sass_variant)
            total += e->n_kernels;
    }
    if (total == 0)
        return MD_OK;
    out->kernels = calloc(total, sizeof *out->kernels);
    if (!out->kernels)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < bin->n_entries; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (e->kind != MD_CODE_SASS || e->sm != sass_sm || e->variant != sass_variant)
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
