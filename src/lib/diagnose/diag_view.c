/* A finding's view: the GPU, toolkit, torch and compiler it is about (this machine's where the
 * finding is judged on it, else what its log says), and the captures of its log lines. */
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

void md_finding_add_evidence(md_finding *f, const char *fmt, ...)
{
    if (f->n_evidence == MD_FINDING_EVIDENCE)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence[f->n_evidence++], sizeof f->evidence[0], fmt, ap);
    va_end(ap);
}

/* ---- captures ------------------------------------------------------------------------------- */

/* Captures read the kept lines in the form the patterns matched (lognorm.h). */
static bool capture_with(const md_view *v, const md_capture_spec *c, char *out, size_t size)
{
    const md_finding *f = v->f;
    size_t total = f->hits.n_hits + f->hits.n_context;
    for (size_t p = 0; p < c->n_compiled; p++) {
        const regex_t *re = &c->compiled[p];
        bool found = false;
        for (size_t i = 0; i < total && !found; i++) {
            const char *kept = i < f->hits.n_hits ? f->hits.hits[i].text
                                                   : f->hits.context[f->hits.n_context - 1 - (i - f->hits.n_hits)].text;
            char text[2 * MD_LOG_TEXT_MAX];
            md_log_normalise(&v->d->kb.matcher.wording, kept, strlen(kept), text, sizeof text);
            regmatch_t g[10];
            if (regexec(re, text, 10, g, 0) == 0 && g[c->group[p]].rm_so >= 0) {
                snprintf(out, size, "%.*s", (int)(g[c->group[p]].rm_eo - g[c->group[p]].rm_so), text + g[c->group[p]].rm_so);
                found = true;
            }
        }
        if (found)
            return true;
    }
    return false;
}

bool md_view_capture(const md_view *v, const char *name, char *out, size_t size)
{
    if (!v->f || !v->f->from_log)
        return false;
    const md_signature *sigs[2] = { v->f->sig, v->f->matched };
    for (size_t i = 0; i < 2; i++) {
        const md_capture_spec *c = sigs[i] ? md_signature_capture(sigs[i], name) : NULL;
        if (c && capture_with(v, c, out, size))
            return true;
    }
    return false;
}

/* ---- what the finding is about: the machine's where judged on it, else the log's ------------ */

const md_machine_gpu *md_view_machine_gpu(const md_view *v)
{
    return v->m && v->f && v->f->gpu >= 0 && (size_t)v->f->gpu < v->m->n_gpus ? &v->m->gpus[v->f->gpu] : NULL;
}

unsigned md_sm_of_text(const char *text)
{
    unsigned ma, mi;
    if (sscanf(text, "%u.%u", &ma, &mi) == 2)
        return ma * 10 + mi;
    return (unsigned)strtoul(text, NULL, 10);
}

unsigned md_view_gpu_sm(const md_view *v)
{
    const md_machine_gpu *g = md_view_machine_gpu(v);
    if (g)
        return g->sm;
    if (v->lf && v->lf->sm)
        return v->lf->sm;
    char text[32];
    return md_view_capture(v, "requested_sm", text, sizeof text) ? md_sm_of_text(text) : 0;
}

const char *md_view_gpu_name(const md_view *v)
{
    const md_machine_gpu *g = md_view_machine_gpu(v);
    if (g)
        return g->name;
    return v->lf && v->lf->gpu_name[0] ? v->lf->gpu_name : NULL;
}

const char *md_view_torch_cuda(const md_view *v)
{
    if (v->m && v->m->py.torch_cuda[0])
        return v->m->py.torch_cuda;
    return v->lf && v->lf->torch_cuda[0] ? v->lf->torch_cuda : NULL;
}

const char *md_view_nvcc_version(const md_view *v)
{
    if (v->m && v->m->build_toolkit)
        return v->m->build_toolkit->version;
    return v->lf && v->lf->nvcc_version[0] ? v->lf->nvcc_version : NULL;
}

unsigned md_view_gcc_major(const md_view *v)
{
    if (v->m && v->m->default_compiler)
        return v->m->default_compiler->major;
    return v->lf && v->lf->gcc_version[0] ? (unsigned)strtoul(v->lf->gcc_version, NULL, 10) : 0;
}

int md_view_driver_cuda(const md_view *v)
{
    if (v->m)
        return v->m->driver_loaded && v->m->driver.driver_version > 0 ? v->m->driver.driver_version : 0;
    return v->lf ? v->lf->driver_cuda : 0;
}
