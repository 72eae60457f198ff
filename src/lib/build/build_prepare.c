/* From what the command line asks for to a config and a plan: the recipe, the toolkits and
 * host compilers here, the GPUs for "native", the platforms and the folders. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "build.h"
#include "embedded_source.h"
#include "fetch/fetch_cache.h"
#include "machine/gpu_probe.h"
#include "recipes/platform.h"
#include "recipes/product.h"

#define MAX_NATIVE 16

static bool add_platform(md_build_job *job, const char *name)
{
    md_build_config *cfg = &job->cfg;
    for (size_t i = 0; i < cfg->n_platforms; i++)
        if (strcmp(cfg->platforms[i], name) == 0)
            return true;
    if (cfg->n_platforms == MD_MAX_PLATFORMS)
        return false;
    snprintf(job->platform_names[cfg->n_platforms], sizeof job->platform_names[0], "%s", name);
    cfg->platforms[cfg->n_platforms] = job->platform_names[cfg->n_platforms];
    cfg->n_platforms++;
    return true;
}

/* SPEC "x86_64,aarch64"; NULL: this machine's, and the other where its cross compiler is. */
static md_status choose_platforms(const char *spec, md_build_job *job, md_error *err)
{
    /* Loaded here, where its failure (out of memory) is an error: lazily, in md_platform_find,
     * it would read as an unknown platform, a usage error. */
    md_status st = md_platform_table_load(err);
    if (st != MD_OK)
        return st;
    if (!spec) {
        const char *host = md_host_platform();
        const char *other = strcmp(host, "x86_64") == 0 ? "aarch64" : "x86_64";
        char cc[PATH_MAX];
        add_platform(job, host);
        if (md_platform_compiler(other, cc, sizeof cc) == 0)
            add_platform(job, other);
        return MD_OK;
    }
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ",");
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        if (!md_platform_find(name)) {
            char names[128];
            md_platform_names(names, sizeof names);
            return md_fail(err, MD_ERR_ARGUMENT, "unknown platform '%s' (%s)", name, names);
        }
        if (!add_platform(job, name))
            return md_fail(err, MD_ERR_ARGUMENT, "too many platforms");
        p += len + (p[len] == ',');
    }
    if (job->cfg.n_platforms == 0)
        return md_fail(err, MD_ERR_ARGUMENT, "empty platform list");
    return MD_OK;
}

/* The GPUs here and the driver's CUDA version (0 when it did not say). */
static md_status native_sms(unsigned *sms, size_t *n, int *driver_cuda, md_error *err)
{
    md_gpu_probe probe = { 0 };
    md_error probe_err;
    md_status st = md_gpu_probe_run(&probe, &probe_err);
    if (st == MD_OK) {
        for (size_t i = 0; i < probe.n_gpus && *n < MAX_NATIVE; i++)
            sms[(*n)++] = probe.gpus[i].sm;
        *driver_cuda = probe.driver_version;
    }
    else
        st = md_fail(err, MD_ERR_UNSUPPORTED, "native: %s", probe_err.message);
    md_gpu_probe_free(&probe);
    return st;
}

/* The cores this process may run on (taskset, a container's cpuset), which can be fewer than
 * the machine has: compilations past that number only share them. */
static long usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

md_build_request md_build_request_defaults(void)
{
    long cores = usable_cores();
    return (md_build_request){ .arch = MD_BUILD_DEFAULT_ARCH, .out_dir = MD_BUILD_DEFAULT_OUT, .cache_dir = MD_BUILD_DEFAULT_CACHE,
                               .jobs = cores > 0 ? (unsigned)cores : 1,
                               .step_timeout_s = MD_BUILD_DEFAULT_STEP_TIMEOUT_S };
}

static md_status prepare(const md_build_request *req, const char *const *toolkit_dirs, size_t n_toolkit_dirs,
                         md_build_job *job, md_error *err)
{
    memset(job, 0, sizeof *job);
    md_build_config *cfg = &job->cfg;
    if (req->source_dir) {
        snprintf(job->source_dir, sizeof job->source_dir, "%s", req->source_dir);
    } else {
        md_status st = md_embedded_source_unpack(req->cache_dir, job->source_dir, sizeof job->source_dir, err);
        if (st != MD_OK)
            return st;
        job->embedded_source = true;
    }
    snprintf(job->kernels_dir, sizeof job->kernels_dir, "%s/kernels", job->source_dir);
    snprintf(job->package_dir, sizeof job->package_dir, "%s/wheels", job->source_dir);
    snprintf(job->work_dir, sizeof job->work_dir, "%s/build/msda", job->source_dir);
    *cfg = (md_build_config){ .recipe = &job->recipe, .plan = &job->plan, .source_dir = job->source_dir,
                              .kernels_dir = job->kernels_dir,
                              .package_dir = job->package_dir, .work_dir = job->work_dir, .out_dir = req->out_dir,
                              .cache_dir = req->cache_dir, .jobs = req->jobs ? req->jobs : 1,
                              .step_timeout_s = req->step_timeout_s,
                              .dry_run = req->dry_run, .version = MD_VERSION,
                              .source_date_epoch = req->source_date_epoch, .on_wait = req->on_wait,
                              .wait_ctx = req->ctx, .on_step = req->on_step, .step_ctx = req->ctx,
                              .stop = req->stop, .no_wait = req->no_wait };
    md_status st = choose_platforms(req->platforms, job, err);
    if (st == MD_OK)
        st = md_libmsda_recipe_load(job->kernels_dir, &job->recipe, err);
    if (st == MD_OK)
        st = md_toolkits_find(toolkit_dirs, n_toolkit_dirs, &job->toolkits, &job->n_toolkits, err);
    /* nvcc --help is asked only where the recipe wants ptxas on more than one thread */
    for (size_t i = 0; st == MD_OK && job->recipe.ptxas_threads > 1 && i < job->n_toolkits; i++)
        md_toolkit_probe_split_compile(&job->toolkits[i]);
    if (st == MD_OK)
        st = md_host_compilers_find(&job->compilers, &job->n_compilers, err);
    unsigned native[MAX_NATIVE];
    size_t n_native = 0;
    int driver_cuda = 0;
    md_arch_spec_kind kind = md_arch_spec_kind_of(req->arch);
    if (st == MD_OK && kind == MD_ARCH_SPEC_NATIVE)
        st = native_sms(native, &n_native, &driver_cuda, err);
    if (st == MD_OK) {
        md_plan_request plan_req = { .arch_spec = req->arch, .kind = kind, .native_sms = native, .n_native = n_native,
                                     .native_driver_cuda = driver_cuda,
                                     .toolkits = job->toolkits, .n_toolkits = job->n_toolkits,
                                     .compilers = job->compilers, .n_compilers = job->n_compilers,
                                     .recipe = &job->recipe, .defines = req->defines };
        st = md_plan_make(&plan_req, &job->plan, err);
    }
    return st;
}

/* Fetches CUDA RELEASE into the fetch cache, its folder into TOOLKIT_DIR. */
static md_status fetch_release(const md_build_request *req, const char *release, char *toolkit_dir, size_t size,
                               md_error *err)
{
    md_fetch_request fetch = md_fetch_request_defaults();
    char dest[PATH_MAX];
    if (!md_fetch_cache_dir(dest, sizeof dest))
        return md_fail(err, MD_ERR_ARGUMENT, "cannot fetch: neither XDG_CACHE_HOME nor HOME is set");
    fetch.version = release;
    fetch.dest = dest;
    fetch.http.progress = req->fetch_progress;
    fetch.http.progress_ctx = req->ctx;
    md_fetch_result *result = malloc(sizeof *result);
    if (!result)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = md_fetch_toolkit(&fetch, result, err);
    if (st == MD_OK)
        snprintf(toolkit_dir, size, "%s", result->toolkit_dir);
    free(result);
    return st;
}

md_status md_build_prepare(const md_build_request *req, md_build_job *job, md_error *err)
{
    md_status st = prepare(req, req->toolkit_dirs, req->n_toolkit_dirs, job, err);
    if (!req->fetch || (st != MD_OK && st != MD_ERR_UNSUPPORTED) || job->plan.n_fetch == 0)
        return st;
    md_plan_fetch wanted[MD_PLAN_MAX_FETCH];
    size_t n = job->plan.n_fetch, n_dirs = req->n_toolkit_dirs;
    memcpy(wanted, job->plan.fetch, sizeof wanted);
    const char *dirs[MD_MAX_TOOLKIT_DIRS];
    memcpy(dirs, req->toolkit_dirs, sizeof dirs);
    char fetched[MD_PLAN_MAX_FETCH][PATH_MAX];
    for (size_t i = 0; i < n; i++) {
        if (n_dirs == MD_MAX_TOOLKIT_DIRS)
            return md_fail(err, MD_ERR_ARGUMENT, "too many toolkits (at most %d)", MD_MAX_TOOLKIT_DIRS);
        if (req->on_fetch)
            req->on_fetch(req->ctx, wanted[i].release, wanted[i].n_sms);
        if ((st = fetch_release(req, wanted[i].release, fetched[i], sizeof fetched[i], err)) != MD_OK)
            return st;
        dirs[n_dirs++] = fetched[i];
    }
    md_build_job_free(job);
    return prepare(req, dirs, n_dirs, job, err);
}

void md_build_job_free(md_build_job *job)
{
    md_plan_free(&job->plan);
    md_libmsda_recipe_free(&job->recipe);
    free(job->toolkits);
    free(job->compilers);
    memset(job, 0, sizeof *job);
}
