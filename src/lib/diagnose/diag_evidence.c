/* The evidence kinds and GPU choices recipes/signatures.json may name: the machine's lines that
 * back a finding, and which GPU of the machine a finding is about. */
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "recipes/arch.h"
#include "diag_internal.h"
#include "build/package.h"
#include "recipes/product.h"
#include "recipes/toolkit_table.h"

/* ---- evidence from the machine ---------------------------------------------------------------- */

static void e_gpu(const md_view *v, md_finding *f)
{
    const md_machine_gpu *g = md_view_machine_gpu(v);
    if (g)
        md_finding_add_evidence(f, "GPU %d: %s, sm_%u (compute capability %u.%u), %u registers per block (from the %s)",
                                f->gpu, g->name, g->sm, g->sm / 10, g->sm % 10, g->registers_per_block, g->source);
}

static void e_binaries(const md_view *v, md_finding *f)
{
    const md_machine *m = v->m;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        if (!bf->readable)
            continue;
        char on[300] = "";
        if (f->gpu >= 0 && bf->n_sass + bf->n_ptx) {
            const md_binary_on_gpu *o = &bf->on_gpu[f->gpu];
            const md_machine_gpu *g = &m->gpus[f->gpu];
            if (o->how == MD_RUNS_NOT)
                snprintf(on, sizeof on, ": cannot run on %s (sm_%u)", g->name, g->sm);
            else if (o->n_not_fitting)
                snprintf(on, sizeof on, ": on %s, %s takes %u registers x %u threads = %lu of %u registers per block",
                         g->name, o->worst_kernel, o->worst_registers, o->worst_threads, o->worst_needed,
                         g->registers_per_block);
            else if (o->how == MD_RUNS_PTX_JIT)
                snprintf(on, sizeof on, ": runs on %s only through PTX JIT", g->name);
            else
                snprintf(on, sizeof on, ": runs on %s", g->name);
        }
        md_finding_add_evidence(f, "%s: SASS %s; PTX %s%s", bf->path, bf->n_sass ? bf->sass : "none",
                                bf->n_ptx ? bf->ptx : "none", on);
    }
}

static void e_nvcc(const md_view *v, md_finding *f)
{
    if (v->m->build_toolkit)
        md_finding_add_evidence(f, "nvcc %s: %s", v->m->build_toolkit->version, v->m->build_toolkit->nvcc);
}

static void e_driver(const md_view *v, md_finding *f)
{
    if (!v->m->driver_loaded)
        return;
    char cuda[16];
    md_cuda_version_text(v->m->driver.driver_version, cuda, sizeof cuda);
    md_finding_add_evidence(f, "driver %s: CUDA %s", v->m->driver_release[0] ? v->m->driver_release : "(release unknown)",
                            cuda);
}

static void e_host_compiler(const md_view *v, md_finding *f)
{
    const md_toolkit *tk = v->m->build_toolkit;
    if (tk && v->m->default_compiler)
        md_finding_add_evidence(f, "nvcc %s accepts gcc up to %u; the default g++ is %s (gcc %u)", tk->version,
                                tk->max_gcc, v->m->default_compiler->path, v->m->default_compiler->major);
}

static void e_torch(const md_view *v, md_finding *f)
{
    const md_machine *m = v->m;
    if (m->py.has_torch)
        md_finding_add_evidence(f, "torch %s built with CUDA %s; nvcc %s", m->py.torch_version,
                                m->py.torch_cuda[0] ? m->py.torch_cuda : "none",
                                m->build_toolkit ? m->build_toolkit->version : "not found");
}

static void e_jetson(const md_view *v, md_finding *f)
{
    const md_jetson_facts *j = &v->m->jetson;
    if (j->present)
        md_finding_add_evidence(f, "Jetson: %s, L4T %s, JetPack %s", j->module[0] ? j->module : "unknown module", j->l4t,
                                j->jetpack);
}

static void e_magma(const md_view *v, md_finding *f)
{
    if (v->m->py.has_magma >= 0)
        md_finding_add_evidence(f, "torch %s: built %s MAGMA (ATen/cuda/CUDAConfig.h)", v->m->py.torch_version,
                                v->m->py.has_magma ? "with" : "without");
}

static void e_cudnn(const md_view *v, md_finding *f)
{
    for (size_t i = 0; i < v->m->n_cudnn; i++)
        md_finding_add_evidence(f, "%s/%s%s", v->m->cudnn[i].dir, v->m->cudnn[i].soname,
                                v->m->cudnn[i].unversioned_link ? ", with libcudnn.so" : ", without libcudnn.so");
}

typedef struct {
    const char *name;
    void (*fn)(const md_view *v, md_finding *f);
} evidence_entry;

static const evidence_entry evidence_kinds[] = {
    { "binaries", e_binaries }, { "cudnn", e_cudnn }, { "driver", e_driver }, { "gpu", e_gpu },
    { "host_compiler", e_host_compiler }, { "jetson", e_jetson }, { "magma", e_magma }, { "nvcc", e_nvcc },
    { "torch", e_torch },
};

bool md_vocab_evidence(const char *name)
{
    for (size_t i = 0; i < sizeof evidence_kinds / sizeof evidence_kinds[0]; i++)
        if (strcmp(evidence_kinds[i].name, name) == 0)
            return true;
    return false;
}

void md_view_evidence(const md_view *v, const char *kind, md_finding *f)
{
    if (!v->m)
        return;
    for (size_t i = 0; i < sizeof evidence_kinds / sizeof evidence_kinds[0]; i++)
        if (strcmp(evidence_kinds[i].name, kind) == 0)
            evidence_kinds[i].fn(v, f);
}

/* ---- GPU choices ------------------------------------------------------------------------------ */

typedef enum { G_CANNOT_RUN, G_PTX_ONLY, G_NOT_FITTING, G_SMALL_REGISTERS } gpu_choice;

static const struct {
    const char *name;
    gpu_choice choice;
} gpu_choices[] = {
    { "binary_cannot_run", G_CANNOT_RUN },
    { "binary_not_fitting", G_NOT_FITTING },
    { "binary_ptx_only", G_PTX_ONLY },
    { "small_register_file", G_SMALL_REGISTERS },
};

bool md_vocab_gpu_choice(const char *name)
{
    for (size_t i = 0; i < sizeof gpu_choices / sizeof gpu_choices[0]; i++)
        if (strcmp(gpu_choices[i].name, name) == 0)
            return true;
    return false;
}

static bool gpu_matches(const md_machine *m, size_t g, gpu_choice c)
{
    if (c == G_SMALL_REGISTERS)
        return m->gpus[g].registers_per_block && m->gpus[g].registers_per_block < 65536;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_on_gpu *o = &m->binaries[b].on_gpu[g];
        if (!m->binaries[b].readable || m->binaries[b].n_sass + m->binaries[b].n_ptx == 0)
            continue;
        if ((c == G_CANNOT_RUN && o->how == MD_RUNS_NOT) || (c == G_PTX_ONLY && o->how == MD_RUNS_PTX_JIT) ||
            (c == G_NOT_FITTING && o->how != MD_RUNS_NOT && o->n_not_fitting))
            return true;
    }
    return false;
}

int md_view_gpu_choice(const md_view *v, const char *choice)
{
    if (!v->m)
        return -1;
    for (size_t i = 0; i < sizeof gpu_choices / sizeof gpu_choices[0]; i++)
        if (strcmp(gpu_choices[i].name, choice) == 0)
            for (size_t g = 0; g < v->m->n_gpus; g++)
                if (gpu_matches(v->m, g, gpu_choices[i].choice))
                    return (int)g;
    return -1;
}
