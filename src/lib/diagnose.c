#include "diagnose.h"

#include <stdlib.h>
#include <string.h>
#include "arch.h"

/* The same IDs and names the probes give their checks, for `diagnose --list`. */
const md_check_info md_diagnose_checks[] = {
    { "gpu", "GPUs (driver API)" },
    { "nvidia-smi", "nvidia-smi" },
    { "jetson", "Jetson" },
    { "toolkits", "CUDA toolkits" },
    { "python", "Python and torch" },
    { "binaries", "MSDA binaries" },
    { "cudnn", "cuDNN" },
};
const size_t md_diagnose_n_checks = sizeof md_diagnose_checks / sizeof md_diagnose_checks[0];

md_status md_diagnose_init(md_diagnosis *d, md_error *err)
{
    memset(d, 0, sizeof *d);
    md_status st = md_arch_table_load(err);
    if (st != MD_OK)
        return st;
    d->machine = calloc(1, sizeof *d->machine);
    if (!d->machine)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    st = md_knowledge_load(&d->kb, err);
    if (st != MD_OK) {
        free(d->machine);
        d->machine = NULL;
    }
    return st;
}

void md_diagnose_probe(md_diagnosis *d, const md_diagnose_options *opt)
{
    md_machine *m = d->machine;
    m->root = opt->root ? opt->root : "";
    m->python = opt->python;
    m->search_dirs = opt->search_dirs;
    m->n_search_dirs = opt->n_search_dirs;
    if (!opt->probe)
        return;
    d->probed = true;
    /* Shown in this order; run in dependency order: nvidia-smi is judged knowing whether this is
     * a Jetson, Python knowing the toolkits, the binaries knowing every GPU. */
    enum { C_GPU, C_SMI, C_JETSON, C_TOOLKITS, C_PYTHON, C_BINARIES, C_CUDNN, C_COUNT };
    md_probe_jetson(m, &d->checks[C_JETSON]);
    md_probe_gpu(m, &d->checks[C_GPU]);
    md_probe_smi(m, &d->checks[C_SMI]);
    md_probe_gpu_summary(m, &d->checks[C_GPU]);
    md_probe_toolkits(m, &d->checks[C_TOOLKITS]);
    md_probe_python(m, &d->checks[C_PYTHON]);
    md_machine_settle_gpus(m);
    md_probe_binaries(m, &d->checks[C_BINARIES]);
    md_probe_cudnn(m, &d->checks[C_CUDNN]);
    d->n_checks = C_COUNT;
}

static md_finding *add_finding(md_diagnosis *d, const md_signature *sig)
{
    for (size_t i = 0; i < d->n_findings; i++)
        if (d->findings[i].sig == sig)
            return &d->findings[i];
    if (d->n_findings == d->cap_findings) {
        size_t cap = d->cap_findings ? d->cap_findings * 2 : 8;
        md_finding *grown = realloc(d->findings, cap * sizeof *grown);
        if (!grown)
            return NULL;
        d->findings = grown;
        d->cap_findings = cap;
    }
    md_finding *f = &d->findings[d->n_findings++];
    memset(f, 0, sizeof *f);
    f->sig = sig;
    f->gpu = -1;
    return f;
}

md_status md_diagnose_log(md_diagnosis *d, FILE *in, const char *name, md_error *err)
{
    if (d->n_logs == MD_DIAG_MAX_LOGS)
        return md_fail(err, MD_ERR_ARGUMENT, "too many logs (at most %d)", MD_DIAG_MAX_LOGS);
    md_log_result r;
    md_status st = md_log_scan(in, name, &d->kb.matcher, &r, err);
    if (st != MD_OK)
        return st;
    md_log_info *info = &d->logs[d->n_logs];
    snprintf(info->name, sizeof info->name, "%s", name);
    info->lines = r.lines;
    info->bytes = r.bytes;
    info->long_lines = r.long_lines;
    for (size_t g = 0; g < r.n_groups && st == MD_OK; g++) {
        if (r.groups[g].count == 0)
            continue;
        bool existed = false;
        for (size_t i = 0; i < d->n_findings; i++)
            existed |= d->findings[i].sig == &d->kb.sigs[g];
        md_finding *f = add_finding(d, &d->kb.sigs[g]);
        if (!f) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            break;
        }
        if (!existed) {
            f->from_log = true;
            f->log_index = d->n_logs;
            f->first_line = r.groups[g].hits[0].line;
            f->hits = r.groups[g];
        }
        f->count += r.groups[g].count;
    }
    d->n_logs++;
    md_log_result_free(&r);
    return st;
}

/* ---- findings of the probes alone ----------------------------------------------------------- */

static void probe_findings(md_diagnosis *d)
{
    const md_machine *m = d->machine;
    bool cannot_run = false, too_many = false;
    for (size_t b = 0; b < m->n_binaries; b++)
        for (size_t g = 0; g < m->n_gpus && m->binaries[b].readable; g++) {
            if (m->binaries[b].n_sass + m->binaries[b].n_ptx == 0)
                continue;
            cannot_run |= m->binaries[b].on_gpu[g].how == MD_RUNS_NOT;
            too_many |= m->binaries[b].on_gpu[g].how != MD_RUNS_NOT && m->binaries[b].on_gpu[g].n_not_fitting > 0;
        }
    const char *ids[5];
    size_t n = 0;
    if (cannot_run)
        ids[n++] = "no-kernel-image";
    if (too_many)
        ids[n++] = "launch-out-of-resources";
    const md_toolkit *tk = m->build_toolkit;
    if (tk && m->default_compiler && tk->max_gcc && m->default_compiler->major > tk->max_gcc)
        ids[n++] = "host-compiler-unsupported";
    if (tk && m->driver_loaded && m->driver.driver_version > 0 && m->driver.driver_version < (int)tk->major * 1000)
        ids[n++] = "driver-too-old";
    unsigned tmaj = 0;
    if (tk && m->py.torch_cuda[0] && sscanf(m->py.torch_cuda, "%u", &tmaj) == 1 && tmaj != tk->major)
        ids[n++] = "cuda-version-mismatch";
    for (size_t i = 0; i < n; i++) {
        const md_signature *sig = md_knowledge_find(&d->kb, ids[i]);
        if (sig)
            add_finding(d, sig); /* a log finding of the same ID keeps its log evidence */
    }
}

static int compare_findings(const void *a, const void *b)
{
    const md_finding *x = a, *y = b;
    if (x->from_log != y->from_log)      /* what the log says failed comes before what might fail */
        return x->from_log ? -1 : 1;
    if (x->sig->root_rank != y->sig->root_rank)
        return x->sig->root_rank < y->sig->root_rank ? -1 : 1;
    if (x->log_index != y->log_index)
        return x->log_index < y->log_index ? -1 : 1;
    if (x->first_line != y->first_line)
        return x->first_line < y->first_line ? -1 : 1;
    return strcmp(x->sig->id, y->sig->id);
}

md_status md_diagnose_finish(md_diagnosis *d, md_error *err)
{
    (void)err;
    if (d->probed)
        probe_findings(d);
    for (size_t i = 0; i < d->n_findings; i++)
        md_finding_fill(d, &d->findings[i]);
    if (d->n_findings > 1)
        qsort(d->findings, d->n_findings, sizeof *d->findings, compare_findings);
    return MD_OK;
}

void md_diagnose_free(md_diagnosis *d)
{
    if (d->machine) {
        md_machine_free(d->machine);
        free(d->machine);
    }
    free(d->findings);
    md_knowledge_free(&d->kb);
    memset(d, 0, sizeof *d);
}
