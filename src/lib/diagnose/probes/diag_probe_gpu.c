/* The GPU probes of diagnose: the driver API (gpu_probe.c), nvidia-smi cross-checked with it,
 * and the driver's release number from /proc/driver/nvidia/version. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag.h"
#include "base/process.h"

#define SMI_TIMEOUT_S 15
#define SMI_FULL_QUERY "--query-gpu=name,compute_cap,driver_version,memory.total"
#define SMI_OLD_QUERY "--query-gpu=name,driver_version,memory.total"

/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..." -> "580.159.04". */
static void read_proc_driver_version(md_machine *m)
{
    char path[PATH_MAX];
    md_rooted(m, "/proc/driver/nvidia/version", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "Kernel Module");
        if (p) {
            p += strlen("Kernel Module");
            p += strspn(p, " \t");
            snprintf(m->driver_release, sizeof m->driver_release, "%.*s", (int)strcspn(p, " \t\n"), p);
        }
    }
    fclose(f);
}

static void gib(unsigned long long bytes, char *out, size_t size)
{
    snprintf(out, size, "%.1f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

void md_probe_gpu_summary(const md_machine *m, md_check *c)
{
    if (!m->driver_loaded)
        return;
    char cuda[32] = "";
    if (m->driver.driver_version > 0)
        md_cuda_version_text(m->driver.driver_version, cuda, sizeof cuda);
    char driver[96];
    snprintf(driver, sizeof driver, "driver %s%s%s%s", m->driver_release[0] ? m->driver_release : "",
             m->driver_release[0] && cuda[0] ? ", " : "", cuda[0] ? "CUDA " : "", cuda);
    if (!m->driver_release[0] && !cuda[0])
        snprintf(driver, sizeof driver, "driver loaded");
    if (m->driver.n_gpus == 0)
        snprintf(c->summary, sizeof c->summary, "%s; no GPU visible", driver);
    else
        snprintf(c->summary, sizeof c->summary, "%zu GPU%s, %s", m->driver.n_gpus, m->driver.n_gpus == 1 ? "" : "s",
                 driver);
}

void md_probe_gpu(md_machine *m, md_check *c)
{
    c->id = "gpu";
    c->name = "GPUs (driver API)";
    c->status = MD_CHECK_OK;
    md_error err;
    md_error_clear(&err);
    md_status st = md_gpu_probe_run(&m->driver, &err);
    read_proc_driver_version(m);
    if (st == MD_ERR_NOMEM) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "the probe failed: %s", err.message);
        return;
    }
    if (st != MD_OK) {
        snprintf(m->driver_error, sizeof m->driver_error, "%s", err.message);
        if (strncmp(err.message, "no CUDA driver", 14) == 0) {
            /* no libcuda at all: a machine without an NVIDIA driver, not a broken one */
            c->status = MD_CHECK_WARN;
            snprintf(c->summary, sizeof c->summary, "no CUDA driver (%s)", m->driver.library);
            md_check_add(c, MD_LINE_DETAIL, "%s", err.message);
            md_check_add(c, MD_LINE_HINT, "without a driver nothing runs on a GPU; 'msda-doctor build' still "
                                          "compiles for GPUs named with --arch");
        } else {
            c->status = MD_CHECK_FAIL;
            snprintf(c->summary, sizeof c->summary, "the CUDA driver does not work");
            md_check_add(c, MD_LINE_PROBLEM, "%s", err.message);
            md_check_add(c, MD_LINE_HINT, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803) after a driver update "
                                          "needs a reboot; the toolkit's stub libcuda must not be on the "
                                          "library path at run time");
        }
        return;
    }
    m->driver_loaded = true;
    md_probe_gpu_summary(m, c);
    if (m->driver.n_gpus == 0) {
        c->status = MD_CHECK_WARN;
        md_check_add(c, MD_LINE_HINT, "check CUDA_VISIBLE_DEVICES and, in a container, --gpus all");
        return;
    }
    for (size_t i = 0; i < m->driver.n_gpus; i++) {
        const md_gpu *g = &m->driver.gpus[i];
        char mem[32];
        gib(g->memory_bytes, mem, sizeof mem);
        md_check_add(c, MD_LINE_DETAIL, "GPU %zu: %s, sm_%u (compute capability %u.%u), %u multiprocessors, "
                     "%u registers per block, %u threads per block, %s", i, g->name, g->sm, g->sm / 10, g->sm % 10,
                     g->multiprocessors, g->registers_per_block, g->max_threads_per_block, mem);
        if (g->registers_per_block && g->registers_per_block < 65536)
            md_check_add(c, MD_LINE_HINT, "GPU %zu gives one block %u registers: 1024-thread blocks fit only at "
                         "%u registers per thread or fewer", i, g->registers_per_block, g->registers_per_block / 1024);
    }
    md_check_add(c, MD_LINE_DETAIL, "library: %s", m->driver.library);
}

/* ---- nvidia-smi --------------------------------------------------------------------------- */

static bool run_smi(const char *smi, const char *query, md_run_result *res, md_error *err)
{
    char *argv[] = { (char *)(uintptr_t)smi, (char *)(uintptr_t)query,
                     (char *)(uintptr_t)"--format=csv,noheader,nounits", NULL };
    return md_run_capture(argv, NULL, SMI_TIMEOUT_S, 1 << 16, res, err) == MD_OK;
}

/* Splits "a, b, c" into at most N trimmed fields; returns how many. */
static size_t split_csv(char *line, char **fields, size_t n)
{
    size_t k = 0;
    char *p = line;
    while (k < n) {
        p += strspn(p, " ");
        fields[k++] = p;
        char *comma = strchr(p, ',');
        char *end = comma ? comma : p + strlen(p);
        while (end > p && end[-1] == ' ')
            end--;
        if (!comma) {
            *end = '\0';
            break;
        }
        *end = '\0';
        p = comma + 1;
    }
    return k;
}

void md_smi_parse(md_smi_facts *s, char *out, bool with_cc)
{
    for (char *line = out, *next; line && *line && s->n_gpus < MD_DIAG_MAX_GPUS; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        char *f[4];
        size_t want = with_cc ? 4 : 3;
        if (split_csv(line, f, want) != want)
            continue;
        md_smi_gpu *g = &s->gpus[s->n_gpus++];
        snprintf(g->name, sizeof g->name, "%s", f[0]);
        size_t k = 1;
        if (with_cc) {
            unsigned ma = 0, mi = 0;
            g->has_sm = sscanf(f[k++], "%u.%u", &ma, &mi) == 2;
            g->sm = ma * 10 + mi;
        }
        snprintf(s->driver_release, sizeof s->driver_release, "%s", f[k++]);
        g->memory_mib = strtoull(f[k], NULL, 10);
    }
}

static void first_line(const char *text, char *out, size_t size)
{
    text += strspn(text, "\n ");
    snprintf(out, size, "%.*s", (int)strcspn(text, "\n"), text);
}

/* Compares nvidia-smi's answers with the driver API's; each disagreement is a problem line. */
static void cross_check(md_machine *m, md_check *c)
{
    const md_smi_facts *s = &m->smi;
    if (!m->driver_loaded) {
        md_check_add(c, MD_LINE_PROBLEM, "nvidia-smi lists %zu GPU%s but the driver API could not be used (%s)",
                     s->n_gpus, s->n_gpus == 1 ? "" : "s", m->driver_error);
        md_check_raise(c, MD_CHECK_WARN);
        return;
    }
    if (s->n_gpus != m->driver.n_gpus) {
        md_check_add(c, MD_LINE_PROBLEM, "nvidia-smi lists %zu GPU%s, the driver API %zu (CUDA_VISIBLE_DEVICES "
                     "hides GPUs from the driver API only)", s->n_gpus, s->n_gpus == 1 ? "" : "s", m->driver.n_gpus);
        md_check_raise(c, MD_CHECK_WARN);
        return;
    }
    for (size_t i = 0; i < s->n_gpus; i++) {
        const md_smi_gpu *g = &s->gpus[i];
        const md_gpu *d = &m->driver.gpus[i];
        if (strcmp(g->name, d->name) != 0) {
            md_check_add(c, MD_LINE_PROBLEM, "GPU %zu: nvidia-smi says '%s', the driver API '%s'", i, g->name, d->name);
            md_check_raise(c, MD_CHECK_WARN);
        }
        if (g->has_sm && g->sm != d->sm) {
            md_check_add(c, MD_LINE_PROBLEM, "GPU %zu: nvidia-smi says compute capability %u.%u, the driver API %u.%u",
                         i, g->sm / 10, g->sm % 10, d->sm / 10, d->sm % 10);
            md_check_raise(c, MD_CHECK_WARN);
        }
        /* nvidia-smi counts memory the driver reserves, so its total is slightly larger */
        unsigned long long api_mib = d->memory_bytes / (1024ULL * 1024ULL);
        if (api_mib && g->memory_mib && (g->memory_mib * 100 > api_mib * 103 || g->memory_mib * 103 < api_mib * 100)) {
            md_check_add(c, MD_LINE_PROBLEM, "GPU %zu: nvidia-smi says %llu MiB, the driver API %llu MiB", i,
                         g->memory_mib, api_mib);
            md_check_raise(c, MD_CHECK_WARN);
        }
    }
}

void md_probe_smi(md_machine *m, md_check *c)
{
    c->id = "nvidia-smi";
    c->name = "nvidia-smi";
    c->status = MD_CHECK_OK;
    md_smi_facts *s = &m->smi;
    if (md_which("nvidia-smi", s->path, sizeof s->path) != 0) {
        if (m->driver_loaded && m->driver.n_gpus > 0 && !m->jetson.present) {
            c->status = MD_CHECK_WARN;
            snprintf(c->summary, sizeof c->summary, "not found on PATH; the driver API answered");
        } else {
            c->status = MD_CHECK_SKIPPED;
            snprintf(c->summary, sizeof c->summary, "not found%s", m->jetson.present ?
                     " (Jetson before JetPack 6 has none; the driver API is used)" : "");
        }
        return;
    }
    s->found = true;
    md_error err;
    md_run_result res;
    if (!run_smi(s->path, SMI_FULL_QUERY, &res, &err)) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "cannot run it: %s", err.message);
        return;
    }
    bool with_cc = true;
    if (res.exit_code != 0 && strstr(res.output, "is not a valid field to query")) {
        /* drivers before the 510 series know no compute_cap field: ask for the rest */
        md_run_result_free(&res);
        s->compute_cap_fallback = true;
        with_cc = false;
        if (!run_smi(s->path, SMI_OLD_QUERY, &res, &err)) {
            c->status = MD_CHECK_ERROR;
            snprintf(c->summary, sizeof c->summary, "cannot run it: %s", err.message);
            return;
        }
    }
    if (res.timed_out || res.exit_code != 0) {
        first_line(res.output, s->error, sizeof s->error);
        c->status = res.exit_code == 6 ? MD_CHECK_WARN : MD_CHECK_FAIL; /* 6: "No devices were found" */
        snprintf(c->summary, sizeof c->summary, "%s", res.timed_out ? "timed out" : "failed");
        md_check_add(c, MD_LINE_PROBLEM, "%s (exit %d)", s->error[0] ? s->error : "no output", res.exit_code);
        md_run_result_free(&res);
        return;
    }
    s->answered = true;
    md_smi_parse(s, res.output, with_cc);
    md_run_result_free(&res);
    if (s->driver_release[0])
        snprintf(m->driver_release, sizeof m->driver_release, "%s", s->driver_release);
    snprintf(c->summary, sizeof c->summary, "driver %s, %zu GPU%s", s->driver_release[0] ? s->driver_release : "unknown",
             s->n_gpus, s->n_gpus == 1 ? "" : "s");
    if (s->compute_cap_fallback)
        md_check_add(c, MD_LINE_DETAIL, "this driver rejects the compute_cap field (older than the 510 series); "
                                        "compute capabilities come from the driver API");
    for (size_t i = 0; i < s->n_gpus; i++) {
        if (s->gpus[i].has_sm)
            md_check_add(c, MD_LINE_DETAIL, "GPU %zu: %s, compute capability %u.%u, %llu MiB", i, s->gpus[i].name,
                         s->gpus[i].sm / 10, s->gpus[i].sm % 10, s->gpus[i].memory_mib);
        else
            md_check_add(c, MD_LINE_DETAIL, "GPU %zu: %s, %llu MiB", i, s->gpus[i].name, s->gpus[i].memory_mib);
    }
    cross_check(m, c);
    if (c->status == MD_CHECK_OK)
        md_check_add(c, MD_LINE_DETAIL, "agrees with the driver API");
}
