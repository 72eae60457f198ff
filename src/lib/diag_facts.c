/* The probe-fact keys of recipes/signatures.json (`confirm`, `rule_out`), evaluated on what the
 * probes found and what the log said. Keys this code cannot judge are unknown (-1); the table
 * of keys and meanings is in tests/fixtures/logs/README.md. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "diagnose.h"

#define UNKNOWN (-1)

/* Whether any kept log line of F (hits and context) contains NEEDLE. */
static bool log_mentions(const md_finding *f, const char *needle)
{
    for (size_t i = 0; i < f->hits.n_context; i++)
        if (strstr(f->hits.context[i].text, needle))
            return true;
    for (size_t i = 0; i < f->hits.n_hits; i++)
        if (strstr(f->hits.hits[i].text, needle))
            return true;
    return false;
}

/* Over every readable binary with device code and every GPU: does any pair satisfy WHAT? */
typedef enum { B_CANNOT_RUN, B_RUNS, B_PTX_ONLY, B_NOT_FITTING, B_FITS, B_PTX_NEWER } bin_question;

static int binaries_answer(const md_machine *m, bin_question q)
{
    bool any = false, asked = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        if (!bf->readable || bf->n_sass + bf->n_ptx == 0)
            continue;
        for (size_t g = 0; g < m->n_gpus; g++) {
            const md_binary_on_gpu *o = &bf->on_gpu[g];
            asked = true;
            switch (q) {
            case B_CANNOT_RUN: any |= o->how == MD_RUNS_NOT; break;
            case B_RUNS: any |= o->how != MD_RUNS_NOT; break;
            case B_PTX_ONLY: any |= o->how == MD_RUNS_PTX_JIT; break;
            case B_NOT_FITTING: any |= o->how != MD_RUNS_NOT && o->n_not_fitting > 0; break;
            case B_FITS: any |= o->how == MD_RUNS_SASS && o->n_not_fitting == 0; break;
            case B_PTX_NEWER:
                if (o->how == MD_RUNS_NOT && bf->n_ptx > 0) {
                    bool all_newer = true;
                    for (size_t k = 0; k < bf->n_ptx; k++)
                        all_newer &= bf->ptx_sms[k] > m->gpus[g].sm;
                    any |= all_newer;
                }
                break;
            }
        }
    }
    return asked ? any : UNKNOWN;
}

/* Over the binaries whose host symbols were read: does the int at offset FIELD of any one's
 * md_binary_facts (-1: unknown) satisfy IS? 1 yes, 0 where no known one does, else UNKNOWN. */
static int any_extension(const md_machine *m, size_t field, bool (*is)(int value))
{
    bool known = false, any = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        int value = *(const int *)((const char *)&m->binaries[b] + field);
        if (value < 0)
            continue;
        known = true;
        any |= is(value);
    }
    return known ? any : UNKNOWN;
}

static bool positive(int value) { return value > 0; }

static int built_on_other_gpu(const md_machine *m)
{
    bool asked = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        if (!bf->readable || bf->n_sass != 1 || m->n_gpus == 0)
            continue;
        asked = true;
        bool differs = true;
        for (size_t g = 0; g < m->n_gpus; g++)
            differs &= bf->sass_sms[0] != m->gpus[g].sm;
        if (differs)
            return 1;
    }
    return asked ? 0 : UNKNOWN;
}

static int toolkit_lacks_log_arch(const md_diagnosis *d, const md_finding *f)
{
    const md_toolkit *tk = d->machine->build_toolkit;
    if (!tk)
        return UNKNOWN;
    /* the architecture the log asked for: "'compute_86'" or "sm_86" in the matching line */
    for (size_t i = 0; i < f->hits.n_hits; i++) {
        const char *p = strstr(f->hits.hits[i].text, "compute_");
        if (!p)
            p = strstr(f->hits.hits[i].text, "sm_");
        unsigned sm;
        if (p && sscanf(strchr(p, '_') + 1, "%u", &sm) == 1)
            return !md_toolkit_supports(tk, sm);
    }
    for (size_t g = 0; g < d->machine->n_gpus; g++)
        if (!md_toolkit_supports(tk, d->machine->gpus[g].sm))
            return 1;
    return d->machine->n_gpus ? 0 : UNKNOWN;
}

/* The library a "cannot open shared object file" line names, into OUT. */
static bool missing_library(const md_finding *f, char *out, size_t size)
{
    for (size_t i = 0; i < f->hits.n_hits; i++) {
        const char *end = strstr(f->hits.hits[i].text, ": cannot open shared object file");
        if (!end)
            continue;
        const char *start = end;
        while (start > f->hits.hits[i].text && start[-1] != ' ' && start[-1] != '/' && start[-1] != ':')
            start--;
        snprintf(out, size, "%.*s", (int)(end - start), start);
        return true;
    }
    return false;
}

int md_fact(const md_diagnosis *d, const md_finding *f, const char *key)
{
    const md_machine *m = d->machine;
    if (!strcmp(key, "extension_imported_before_torch")) { /* from the log alone */
        if (!log_mentions(f, "import MultiScaleDeformableAttention"))
            return UNKNOWN;
        return !log_mentions(f, "import torch");
    }
    if (!d->probed)
        return UNKNOWN;
    unsigned tmaj = 0;
    bool have_tmaj = m->py.torch_cuda[0] && sscanf(m->py.torch_cuda, "%u", &tmaj) == 1;
    const md_toolkit *tk = m->build_toolkit;
    int api = m->driver_loaded ? m->driver.driver_version : 0;

    if (!strcmp(key, "gpu_arch_not_in_binary")) return binaries_answer(m, B_CANNOT_RUN);
    if (!strcmp(key, "gpu_arch_in_binary")) {
        int cannot = binaries_answer(m, B_CANNOT_RUN);
        return cannot == UNKNOWN ? UNKNOWN : !cannot;
    }
    if (!strcmp(key, "binary_ptx_newer_than_gpu_arch")) return binaries_answer(m, B_PTX_NEWER);
    if (!strcmp(key, "binary_ptx_jit_possible") || !strcmp(key, "binary_ptx_only_for_gpu"))
        return binaries_answer(m, B_PTX_ONLY);
    if (!strcmp(key, "binary_built_on_other_gpu")) return built_on_other_gpu(m);
    if (!strcmp(key, "gpu_regs_per_block_32k")) {
        if (m->n_gpus == 0)
            return UNKNOWN;
        for (size_t g = 0; g < m->n_gpus; g++)
            if (m->gpus[g].registers_per_block == 32768)
                return 1;
        return 0;
    }
    if (!strcmp(key, "binary_regs_times_threads_exceed_block")) return binaries_answer(m, B_NOT_FITTING);
    if (!strcmp(key, "binary_kernels_fit_regs_per_block")) {
        int bad = binaries_answer(m, B_NOT_FITTING);
        return bad == 1 ? 0 : binaries_answer(m, B_FITS);
    }
    if (!strcmp(key, "binary_has_cuda_code") || !strcmp(key, "binary_has_no_cuda_code")) {
        bool any = false, with = false, without = false;
        for (size_t b = 0; b < m->n_binaries; b++)
            if (m->binaries[b].readable && m->binaries[b].kind == MD_BIN_EXTENSION) {
                any = true;
                if (m->binaries[b].n_sass + m->binaries[b].n_ptx)
                    with = true;
                else
                    without = true;
            }
        if (!any)
            return UNKNOWN;
        return !strcmp(key, "binary_has_cuda_code") ? with : without;
    }
    if (!strcmp(key, "binary_undefined_torch_symbols") || !strcmp(key, "binary_symbols_resolved")) {
        int missing = any_extension(m, offsetof(md_binary_facts, torch_missing), positive);
        if (missing == UNKNOWN)
            return UNKNOWN;
        return !strcmp(key, "binary_undefined_torch_symbols") ? missing : !missing;
    }
    if (!strcmp(key, "binary_links_torch_python"))
        return any_extension(m, offsetof(md_binary_facts, links_torch_python), positive);
    if (!strcmp(key, "binary_missing_torch_python")) {
        bool known = false;
        for (size_t b = 0; b < m->n_binaries; b++) {
            const md_binary_facts *bf = &m->binaries[b];
            if (bf->needs_torch_python < 0 || bf->links_torch_python < 0)
                continue;
            known = true;
            if (bf->needs_torch_python && !bf->links_torch_python)
                return 1;
        }
        return known ? 0 : UNKNOWN;
    }
    if (!strcmp(key, "binary_installed")) return m->py.ran ? m->py.msda_importable : UNKNOWN;
    if (!strcmp(key, "binary_missing")) return m->py.ran ? !m->py.msda_importable : UNKNOWN;
    if (!strcmp(key, "torch_cuda_major_differs")) return tk && have_tmaj ? tmaj != tk->major : UNKNOWN;
    if (!strcmp(key, "torch_cuda_major_matches")) return tk && have_tmaj ? tmaj == tk->major : UNKNOWN;
    if (!strcmp(key, "torch_without_magma")) return m->py.has_magma < 0 ? UNKNOWN : !m->py.has_magma;
    if (!strcmp(key, "torch_with_magma")) return m->py.has_magma < 0 ? UNKNOWN : m->py.has_magma;
    if (!strcmp(key, "torch_lacks_thc_headers")) {
        if (!m->py.torch_lib_dir[0])
            return UNKNOWN;
        char path[PATH_MAX + 32];
        struct stat st;
        snprintf(path, sizeof path, "%s/../include/THC/THC.h", m->py.torch_lib_dir);
        return stat(path, &st) != 0;
    }
    if (!strcmp(key, "driver_older_than_toolkit")) return tk && api > 0 ? api < (int)tk->major * 1000 : UNKNOWN;
    if (!strcmp(key, "driver_supports_toolkit")) return tk && api > 0 ? api >= (int)tk->major * 1000 : UNKNOWN;
    if (!strcmp(key, "driver_older_than_torch_cuda")) return have_tmaj && api > 0 ? api < (int)tmaj * 1000 : UNKNOWN;
    if (!strcmp(key, "gpu_count_zero")) return m->n_gpus == 0;
    if (!strcmp(key, "gpu_visible")) return m->n_gpus > 0;
    if (!strcmp(key, "multiple_gpus")) return m->n_gpus > 1;
    if (!strcmp(key, "nvcc_found")) return m->n_toolkits > 0;
    if (!strcmp(key, "nvcc_not_found")) return m->n_toolkits == 0;
    if (!strcmp(key, "nvcc_gcc_too_new") || !strcmp(key, "nvcc_gcc_supported")) {
        if (!tk || !tk->max_gcc || !m->default_compiler)
            return UNKNOWN;
        bool too_new = m->default_compiler->major > tk->max_gcc;
        return !strcmp(key, "nvcc_gcc_too_new") ? too_new : !too_new;
    }
    if (!strcmp(key, "nvcc_lacks_gpu_arch")) return toolkit_lacks_log_arch(d, f);
    if (!strcmp(key, "nvcc_supports_gpu_arch")) {
        int lacks = toolkit_lacks_log_arch(d, f);
        return lacks == UNKNOWN ? UNKNOWN : !lacks;
    }
    if (!strcmp(key, "is_jetson")) return m->jetson.present;
    if (!strcmp(key, "nccl_absent")) return !m->nccl_found;
    if (!strcmp(key, "nccl_present")) return m->nccl_found;
    if (!strcmp(key, "cudnn_unversioned_link_missing") || !strcmp(key, "cudnn_unversioned_link_present")) {
        if (m->n_cudnn == 0)
            return UNKNOWN;
        bool missing = false;
        for (size_t i = 0; i < m->n_cudnn; i++)
            missing |= !m->cudnn[i].unversioned_link;
        return !strcmp(key, "cudnn_unversioned_link_missing") ? missing : !missing;
    }
    if (!strcmp(key, "missing_lib_in_torch_lib_dir")) {
        char lib[128], path[PATH_MAX + 160];
        struct stat st;
        if (!m->py.torch_lib_dir[0] || !missing_library(f, lib, sizeof lib))
            return UNKNOWN;
        snprintf(path, sizeof path, "%s/%s", m->py.torch_lib_dir, lib);
        return stat(path, &st) == 0;
    }
    return UNKNOWN;
}
