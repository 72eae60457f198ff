/* CUDA toolkits and host compilers for diagnose: every nvcc found (toolkit.c), the host g++
 * against each nvcc's limit, and the driver against each toolkit's minimum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag.h"
#include "base/process.h"
#include "recipes/toolkit_table.h"

/* The nvcc torch's extension builder would use: $CUDA_HOME, then nvcc on PATH, then
 * /usr/local/cuda; among the toolkits found, else the newest one found. */
static const md_toolkit *build_toolkit(const md_machine *m)
{
    char candidates[3][PATH_MAX];
    size_t n = 0;
    const char *home = getenv("CUDA_HOME");
    if (home && *home)
        snprintf(candidates[n++], PATH_MAX, "%s/bin/nvcc", home);
    if (md_which("nvcc", candidates[n], PATH_MAX) == 0)
        n++;
    snprintf(candidates[n++], PATH_MAX, "/usr/local/cuda/bin/nvcc");
    for (size_t i = 0; i < n; i++) {
        char real[PATH_MAX];
        if (!realpath(candidates[i], real))
            continue;
        for (size_t k = 0; k < m->n_toolkits; k++)
            if (strcmp(m->toolkits[k].nvcc, real) == 0)
                return &m->toolkits[k];
    }
    return m->n_toolkits ? &m->toolkits[0] : NULL;
}

void md_toolkit_min_driver(const md_toolkit *tk, char *out, size_t size)
{
    const md_toolkit_row *row = md_toolkit_row_for(tk->major, tk->minor);
    snprintf(out, size, "%s", row ? row->min_driver : "");
}

void md_probe_toolkits(md_machine *m, md_check *c)
{
    c->id = "toolkits";
    c->name = "CUDA toolkits";
    c->status = MD_CHECK_OK;
    md_error err;
    md_error_clear(&err);
    if (md_toolkits_find(NULL, 0, &m->toolkits, &m->n_toolkits, &err) != MD_OK) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "the probe failed: %s", err.message);
        return;
    }
    if (md_host_compilers_find(&m->compilers, &m->n_compilers, &err) != MD_OK) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "the probe failed: %s", err.message);
        return;
    }
    for (size_t i = 0; i < m->n_compilers; i++)
        if (m->compilers[i].is_default)
            m->default_compiler = &m->compilers[i];
    if (m->n_toolkits == 0) {
        c->status = MD_CHECK_WARN;
        snprintf(c->summary, sizeof c->summary, "no nvcc found (CUDA_HOME, /usr/local/cuda*, "
                 "/usr/lib/nvidia-cuda-toolkit, PATH, the fetch cache)");
        md_check_add(c, MD_LINE_HINT, "a toolkit is needed only to build; install one whose major version "
                                      "matches torch.version.cuda, or fetch one: msda-doctor fetch --cuda VERSION");
        return;
    }
    m->build_toolkit = build_toolkit(m);
    size_t at = 0;
    for (size_t i = 0; i < m->n_toolkits && at + 8 < sizeof c->summary; i++)
        at += (size_t)snprintf(c->summary + at, sizeof c->summary - at, "%s%s", i ? ", " : "", m->toolkits[i].version);
    if (m->build_toolkit)
        snprintf(c->summary + at, sizeof c->summary - at, " (builds use %s)", m->build_toolkit->version);
    const md_host_compiler *gxx = m->default_compiler;
    for (size_t i = 0; i < m->n_toolkits; i++) {
        const md_toolkit *tk = &m->toolkits[i];
        bool is_build = tk == m->build_toolkit;
        char archs[256] = "";
        size_t a = 0;
        for (size_t k = 0; k < tk->n_sms && a + 8 < sizeof archs; k++)
            a += (size_t)snprintf(archs + a, sizeof archs - a, "%ssm_%u", k ? " " : "", tk->sms[k]);
        md_check_add(c, MD_LINE_DETAIL, "CUDA %s: %s; targets %s; host gcc up to %u", tk->version, tk->nvcc, archs,
                     tk->max_gcc);
        if (gxx && tk->max_gcc && gxx->major > tk->max_gcc) {
            const md_host_compiler *older = NULL;
            for (size_t k = 0; k < m->n_compilers && !older; k++)
                if (m->compilers[k].major <= tk->max_gcc)
                    older = &m->compilers[k];
            md_check_add(c, is_build ? MD_LINE_PROBLEM : MD_LINE_DETAIL,
                         "nvcc %s rejects the default g++ %u (it accepts gcc up to %u)%s%s", tk->version, gxx->major,
                         tk->max_gcc, older ? "; use -ccbin " : "", older ? older->path : "");
            if (is_build)
                md_check_raise(c, MD_CHECK_FAIL);
        }
        int need = (int)tk->major * 1000; /* minor-version compatibility: the major's first release */
        if (m->driver_loaded && m->driver.driver_version > 0 && m->driver.driver_version < need) {
            char have[16], min[32];
            md_cuda_version_text(m->driver.driver_version, have, sizeof have);
            md_toolkit_min_driver(tk, min, sizeof min);
            md_check_add(c, is_build ? MD_LINE_PROBLEM : MD_LINE_HINT,
                         "the driver (%s%sCUDA %s) is older than CUDA %s needs (driver %s or newer)",
                         m->driver_release[0] ? m->driver_release : "", m->driver_release[0] ? ", " : "", have,
                         tk->version, min[0] ? min : "of its release");
            md_check_raise(c, is_build ? MD_CHECK_FAIL : MD_CHECK_WARN);
        }
    }
    if (gxx)
        md_check_add(c, MD_LINE_DETAIL, "host compiler: %s (gcc %u)", gxx->path, gxx->major);
    else
        md_check_add(c, MD_LINE_DETAIL, "host compiler: no g++ on PATH");
}
