/* Helpers shared by the diagnose probes: check lines, the machine's GPU list, freeing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include "recipes/arch.h"
#include "diag.h"

void md_check_add(md_check *c, md_line_kind kind, const char *fmt, ...)
{
    if (c->n_lines >= MD_CHECK_LINES)
        return;
    md_check_line *l = &c->lines[c->n_lines++];
    l->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->text, sizeof l->text, fmt, ap);
    va_end(ap);
}

/* Worse is larger, except that "skipped" ranks below "ok". */
static int severity_of(md_check_status st)
{
    switch (st) {
    case MD_CHECK_SKIPPED: return 0;
    case MD_CHECK_OK: return 1;
    case MD_CHECK_WARN: return 2;
    case MD_CHECK_FAIL: return 3;
    case MD_CHECK_ERROR: return 4;
    }
    return 4;
}

void md_check_raise(md_check *c, md_check_status st)
{
    if (severity_of(st) > severity_of(c->status))
        c->status = st;
}

const char *md_check_status_name(md_check_status st)
{
    switch (st) {
    case MD_CHECK_OK: return "ok";
    case MD_CHECK_WARN: return "warning";
    case MD_CHECK_FAIL: return "fail";
    case MD_CHECK_ERROR: return "error";
    case MD_CHECK_SKIPPED: return "skipped";
    }
    return "error";
}

void md_rooted(const md_machine *m, const char *path, char *out, size_t size)
{
    snprintf(out, size, "%s%s", m->root ? m->root : "", path);
}

void md_machine_settle_gpus(md_machine *m)
{
    m->n_gpus = 0;
    if (m->driver.n_gpus > 0) {
        for (size_t i = 0; i < m->driver.n_gpus && m->n_gpus < MD_DIAG_MAX_GPUS; i++) {
            const md_gpu *g = &m->driver.gpus[i];
            md_machine_gpu *o = &m->gpus[m->n_gpus++];
            snprintf(o->name, sizeof o->name, "%s", g->name);
            o->sm = g->sm;
            o->registers_per_block = g->registers_per_block;
            o->multiprocessors = g->multiprocessors;
            o->max_threads_per_block = g->max_threads_per_block;
            o->memory_bytes = g->memory_bytes;
            o->source = "driver";
        }
        return;
    }
    /* No driver answer: a Jetson's files still say which GPU this is. (torch is not imported:
     * it would see the GPUs through the same libcuda.so.1.) */
    if (m->jetson.present && m->jetson.sm) {
        md_machine_gpu *o = &m->gpus[m->n_gpus++];
        snprintf(o->name, sizeof o->name, "%s", m->jetson.module);
        o->sm = m->jetson.sm;
        o->registers_per_block = m->jetson.registers_per_block;
        o->source = "jetson";
    }
}

void md_machine_free(md_machine *m)
{
    if (m->py_state == MD_PY_RUNNING) { /* started, never collected: reap it */
        md_run_result res;
        md_error err;
        kill(m->py_child.pid, SIGKILL);
        if (md_run_finish(&m->py_child, 1, &res, &err) == MD_OK)
            md_run_result_free(&res);
        m->py_state = MD_PY_DONE;
    }
    md_gpu_probe_free(&m->driver);
    for (size_t i = 0; i < m->py.n_binary_paths; i++)
        free(m->py.binary_paths[i]);
    free(m->py.binary_paths);
    m->py.binary_paths = NULL;
    m->py.n_binary_paths = 0;
    free(m->toolkits);
    free(m->compilers);
    free(m->binaries);
    m->toolkits = NULL;
    m->compilers = NULL;
    m->binaries = NULL;
    m->n_toolkits = m->n_compilers = m->n_binaries = 0;
}

bool md_check_is_problem(md_check_status status)
{
    return status == MD_CHECK_FAIL || status == MD_CHECK_ERROR;
}
