#include "diagnose.h"

#include <stdlib.h>
#include <string.h>
#include "recipes/arch.h"
#include "recipes/platform.h"
#include "diag_internal.h"
#include "knowledge_load.h"
#include "recipes/driver_table.h"
#include "recipes/toolkit_table.h"

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
    /* The tables the fixes are filled from, loaded here where a failure is an error: loaded
     * lazily later, a failed allocation would read as "unknown" and leave a <placeholder>. */
    md_status st = md_arch_table_load(err);
    if (st == MD_OK)
        st = md_platform_table_load(err);
    if (st == MD_OK) /* what each binary's code asks of a driver, and a logged driver's CUDA */
        st = md_toolkit_table_load(err);
    if (st == MD_OK)
        st = md_driver_table_load(err);
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
    d->foreign = opt->foreign;
    if (!opt->probe)
        return;
    d->probed = true;
    /* Shown in this order; run in dependency order: nvidia-smi is judged knowing whether this is
     * a Jetson, Python knowing the toolkits, the binaries knowing every GPU. */
    enum { C_GPU, C_SMI, C_JETSON, C_TOOLKITS, C_PYTHON, C_BINARIES, C_CUDNN, C_COUNT };
    md_probe_python_start(m); /* the slowest probe runs beside the others */
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

const char *md_log_origin_name(md_log_origin o)
{
    switch (o) {
    case MD_ORIGIN_HERE: return "this-machine";
    case MD_ORIGIN_ELSEWHERE: return "another-machine";
    case MD_ORIGIN_UNKNOWN: break;
    }
    return "unknown";
}

static md_finding *new_finding(md_diagnosis *d, const md_signature *sig)
{
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
    f->sig = f->matched = sig;
    f->gpu = -1;
    return f;
}

static md_finding *log_finding(md_diagnosis *d, const md_signature *sig)
{
    for (size_t i = 0; i < d->n_findings; i++)
        if (d->findings[i].from_log && d->findings[i].matched == sig)
            return &d->findings[i];
    return NULL;
}

/* The reading of SIG's message that R matched: one whose own patterns matched, else one that
 * reads every match of the signature. *GROUP receives the group whose lines to keep. */
static const md_reading *reading_matched(const md_signature *sig, size_t sig_group, const md_log_result *r,
                                         size_t *group)
{
    *group = sig_group;
    for (size_t k = 0; k < sig->n_readings; k++) {
        const md_reading *rd = &sig->readings[k];
        if (rd->n_patterns && r->groups[rd->group].count) {
            if (r->groups[sig_group].count == 0)
                *group = rd->group;
            return rd;
        }
    }
    for (size_t k = 0; k < sig->n_readings; k++)
        if (sig->readings[k].n_patterns == 0 && r->groups[sig_group].count)
            return &sig->readings[k];
    return NULL;
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
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", name);
    info->lines = r.lines;
    info->bytes = r.bytes;
    info->long_lines = r.long_lines;
    md_log_facts_read(&d->kb, &r, &info->facts);
    for (size_t g = 0; g < d->kb.count && st == MD_OK; g++) {
        const md_signature *sig = &d->kb.sigs[g];
        size_t group;
        const md_reading *reading = reading_matched(sig, g, &r, &group);
        if (r.groups[g].count == 0 && !reading)
            continue;
        info->n_findings++;
        md_finding *f = log_finding(d, sig);
        if (!f) {
            if (!(f = new_finding(d, sig))) {
                st = md_fail(err, MD_ERR_NOMEM, "out of memory");
                break;
            }
            f->from_log = true;
            f->log_index = d->n_logs;
            f->first_line = r.groups[group].hits[0].line;
            f->hits = r.groups[group];
            f->reading = reading;
        }
        f->count += r.groups[group].count;
    }
    d->n_logs++;
    md_log_result_free(&r);
    return st;
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

/* Two findings that came to the same ID (a reading ranked another finding first): the first in
 * report order stays, with the other's log line as more evidence. A finding of the probes alone
 * merges into a log finding judged on this machine. */
static void merge_duplicates(md_diagnosis *d)
{
    size_t out = 0;
    for (size_t i = 0; i < d->n_findings; i++) {
        md_finding *f = &d->findings[i];
        md_finding *keep = NULL;
        for (size_t k = 0; k < out && !keep; k++) {
            md_finding *o = &d->findings[k];
            if (o->sig == f->sig && (f->from_log ? o->from_log : o->on_machine))
                keep = o;
        }
        if (!keep) {
            if (out != i)
                d->findings[out] = *f;
            out++;
            continue;
        }
        if (f->from_log)
            md_finding_add_evidence(keep, "%s:%llu: %s", d->logs[f->log_index].name, f->hits.hits[0].line,
                                    f->hits.hits[0].text);
        keep->count += f->count;
    }
    d->n_findings = out;
}

md_status md_diagnose_finish(md_diagnosis *d, md_error *err)
{
    (void)err;
    for (size_t i = 0; i < d->n_logs; i++) {
        md_log_info *l = &d->logs[i];
        if (d->probed)
            md_log_compare(d->machine, l);
        l->foreign = d->foreign || l->origin == MD_ORIGIN_ELSEWHERE;
    }
    for (size_t i = 0; i < d->n_findings; i++)
        d->findings[i].on_machine = d->probed && !d->logs[d->findings[i].log_index].foreign;
    if (d->probed)
        for (size_t s = 0; s < d->kb.count; s++) {
            const md_signature *sig = &d->kb.sigs[s];
            if (!md_probe_raises(d, sig))
                continue;
            md_finding *f = new_finding(d, sig);
            if (!f)
                return md_fail(err, MD_ERR_NOMEM, "out of memory");
            f->on_machine = true;
        }
    for (size_t i = 0; i < d->n_findings; i++)
        md_finding_fill(d, &d->findings[i]);
    if (d->n_findings > 1)
        qsort(d->findings, d->n_findings, sizeof *d->findings, compare_findings);
    merge_duplicates(d);
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
