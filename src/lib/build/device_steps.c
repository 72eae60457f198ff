#include "device_steps.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/process.h"

/* The kernels' script that writes PTX for old drivers (kernels/ptx-for-old-drivers.sh). */
#define MD_OLD_PTX_SCRIPT "ptx-for-old-drivers.sh"

/* Debian puts CUDA 11's headers in /usr/include, behind any CUDA copy in /usr/local/include on
 * the default search path; a folder of links to them, given with -I, puts them first. */
static md_status header_shim(const md_toolkit *tk, const md_device_inputs *cfg, char *out, size_t size,
                             md_error *err)
{
    out[0] = '\0';
    if (strcmp(tk->include_dir, "/usr/include") != 0)
        return MD_OK;
    snprintf(out, size, "%s/cuda-%s-include", cfg->work_dir, tk->version);
    md_status st = md_ensure_dir(out, err);
    if (st != MD_OK || cfg->dry_run)
        return st;
    DIR *d = opendir("/usr/include");
    if (!d)
        return md_fail(err, MD_ERR_IO, "cannot read /usr/include: %s", strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char from[PATH_MAX], to[PATH_MAX + 300];
        snprintf(from, sizeof from, "/usr/include/%s", e->d_name);
        snprintf(to, sizeof to, "%s/%s", out, e->d_name);
        if (symlink(from, to) != 0 && errno != EEXIST) {
            closedir(d);
            return md_fail(err, MD_ERR_IO, "cannot link '%s': %s", to, strerror(errno));
        }
    }
    closedir(d);
    return MD_OK;
}

/* One target's two halves before they become steps. */
typedef struct {
    strv ptx_argv, image_argv;
    char ptx_key[65], ptx_path[PATH_MAX], image_path[PATH_MAX];
    unsigned ptx_arch, part;
    char ptx_what[96], image_what[96];
    bool image_cached;
    const md_toolkit *tk;
} device_target;

static void device_target_free(device_target *d)
{
    strv_free(d->ptx_argv.items);
    strv_free(d->image_argv.items);
    memset(d, 0, sizeof *d);
}

/* Replaces the argument after "-o" (a placeholder) with PATH. */
static bool set_output(strv *v, const char *path)
{
    for (size_t a = 1; a < v->n; a++)
        if (strcmp(v->items[a - 1], "-o") == 0) {
            char *copy = strdup(path);
            if (!copy)
                return false;
            free(v->items[a]);
            v->items[a] = copy;
            return true;
        }
    return false;
}

static bool same_defines(const md_plan_target *a, const md_plan_target *b)
{
    if (a->n_defines != b->n_defines)
        return false;
    for (size_t i = 0; i < a->n_defines; i++)
        if (strcmp(a->defines[i].name, b->defines[i].name) != 0 || a->defines[i].value != b->defines[i].value)
            return false;
    return true;
}

/* The architecture of the PTX that target T's image is made from. A PTX image is its own
 * architecture's PTX (the driver reads its architecture from it). A SASS image is made from the
 * PTX of its own architecture where the plan compiles that PTX anyway (for a PTX image of the
 * same toolkit and knobs), else from that of the lowest architecture of its same_ptx group
 * (libmsda.json): the same PTX, so the same SASS, for one cicc run instead of several. */
static unsigned ptx_arch(const md_device_inputs *cfg, const md_plan_target *t)
{
    if (t->ptx)
        return t->sm;
    for (size_t i = 0; i < cfg->plan->n_targets; i++) {
        const md_plan_target *o = &cfg->plan->targets[i];
        if (o->ptx && o->sm == t->sm && o->toolkit == t->toolkit && !strcmp(o->ccbin, t->ccbin) && same_defines(o, t))
            return t->sm;
    }
    return md_libmsda_ptx_arch(cfg->recipe, t->toolkit->major, t->toolkit->minor, t->sm);
}

/* The PTX of part D->part of target T: cicc for ptx_arch's architecture with the recipe's flags,
 * the target's knobs and the part's define. Targets with the same toolkit, PTX architecture, host compiler and knobs (a
 * SASS target and its PTX twin, the old drivers' PTX and the SASS of that architecture, the
 * architectures of a same_ptx group) get the same key, hence one step. */
static md_status plan_ptx(const md_device_inputs *cfg, const md_plan_target *t, const char *source,
                          device_target *d, md_error *err)
{
    const md_toolkit *tk = t->toolkit;
    const unsigned arch = ptx_arch(cfg, t);
    char shim[PATH_MAX];
    md_status st = header_shim(tk, cfg, shim, sizeof shim, err);
    if (st != MD_OK)
        return st;
    strv *v = &d->ptx_argv;
    bool ok = strv_add(v, "%s", tk->nvcc) && strv_add(v, "-ptx") && strv_add(v, "-arch=compute_%u", arch) &&
              strv_add_all(v, cfg->recipe->nvcc_flags) &&
              (!t->ccbin[0] || (strv_add(v, "-ccbin") && strv_add(v, "%s", t->ccbin))) &&
              (!shim[0] || strv_add(v, "-I%s", shim)) && strv_add(v, "-I%s", cfg->kernels_dir);
    for (size_t i = 0; ok && i < t->n_defines; i++)
        ok = strv_add(v, "-D%s=%ld", t->defines[i].name, t->defines[i].value);
    ok = ok && strv_add(v, "-D%s=%u", cfg->recipe->part_define, d->part) && strv_add(v, "-o") && strv_add(v, "OUTPUT") && strv_add(v, "%s", source);
    if (!ok)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    if (!md_content_key(tk->version_text, v->items, v->n - 2, cfg->source_dir, cfg->kernels_dir, source, NULL,
                        d->ptx_key))
        return md_fail(err, MD_ERR_IO, "cannot hash '%s' for the cache key", source);
    /* Not kept in the cache: 6 to 8 MB each, needed only while the images made from it are. */
    char tmp_dir[PATH_MAX];
    md_build_tmp_dir(cfg->work_dir, tmp_dir, sizeof tmp_dir);
    snprintf(d->ptx_path, sizeof d->ptx_path, "%s/%s.ptx", tmp_dir, d->ptx_key);
    snprintf(d->ptx_what, sizeof d->ptx_what, "compute_%u PTX (CUDA %s, part %u)", arch, tk->version, d->part);
    d->ptx_arch = arch;
    return set_output(v, d->ptx_path) ? MD_OK : md_fail(err, MD_ERR_NOMEM, "out of memory");
}

/* The image of target T made from its PTX: SASS by the toolkit's ptxas, the PTX itself, or the
 * old drivers' PTX by the kernels' script; each packed in a compressed fatbin. Its key is that of
 * its command with the PTX named by key, so that it is known before the PTX is written. */
static md_status plan_image(const md_device_inputs *cfg, const md_plan_target *t, device_target *d,
                            md_error *err)
{
    const md_toolkit *tk = t->toolkit;
    char script[PATH_MAX], ptx_name[80];
    snprintf(script, sizeof script, "%s/%s", cfg->kernels_dir, MD_OLD_PTX_SCRIPT);
    snprintf(ptx_name, sizeof ptx_name, "%s.ptx", d->ptx_key);
    strv *v = &d->image_argv;
    bool ok;
    if (t->lowered)
        ok = strv_add(v, "sh") && strv_add(v, "%s", script) &&
             strv_add(v, "%u.%u", t->ptx_isa / 10, t->ptx_isa % 10) && strv_add(v, "%u", t->sm);
    else
        ok = strv_add(v, "%s", tk->nvcc) && strv_add(v, "-fatbin") &&
             strv_add_all(v, cfg->recipe->fatbin_compress_flags) && strv_add(v, "-gencode") &&
             strv_add(v, "arch=compute_%u,code=%s_%u", d->ptx_arch, t->ptx ? "compute" : "sm", t->sm) &&
             strv_add_all(v, cfg->recipe->nvcc_flags) && /* -Werror holds for ptxas's warnings too */
             (t->ptx || !tk->split_compile || strv_add(v, "--split-compile=%u", cfg->recipe->ptxas_threads));
    ok = ok && strv_add(v, "-o") && strv_add(v, "OUTPUT") && strv_add(v, "%s", ptx_name);
    if (!ok)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    char key[65];
    if (!md_content_key(tk->version_text, v->items, v->n - 2, cfg->source_dir, NULL, NULL,
                        t->lowered ? script : NULL, key))
        return md_fail(err, MD_ERR_IO, "cannot hash '%s' for the cache key", script);
    snprintf(d->image_path, sizeof d->image_path, "%s/%s.fatbin", cfg->cache_dir, key);
    char *ptx_arg = strdup(d->ptx_path);
    if (!ptx_arg || !set_output(v, d->image_path)) {
        free(ptx_arg);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    free(v->items[v->n - 1]);
    v->items[v->n - 1] = ptx_arg;
    if (t->lowered)
        snprintf(d->image_what, sizeof d->image_what, "compute_%u (CUDA %s, ISA %u.%u, part %u)", t->sm,
                 tk->version, t->ptx_isa / 10, t->ptx_isa % 10, d->part);
    else
        snprintf(d->image_what, sizeof d->image_what, "%s_%u (CUDA %s, part %u)", t->ptx ? "compute" : "sm", t->sm,
                 tk->version, d->part);
    d->image_cached = access(d->image_path, R_OK) == 0;
    d->tk = tk;
    return MD_OK;
}

/* Adds ARGV as a compile step of S that runs with TK's bin folder first on PATH (its own ptxas
 * and fatbinary); its index in *INDEX. */
static md_status add_step(md_step_list *s, strv *argv, const md_toolkit *tk, const char *what, const char *output,
                          long after, size_t *index, md_error *err)
{
    char path_value[PATH_MAX + 32];
    snprintf(path_value, sizeof path_value, "%s:/usr/bin:/bin", tk->bin_dir);
    char **env = md_env_with_path(path_value);
    if (!env)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_build_step *step = md_steps_add(s, argv, env, what, output, true, err);
    if (!step) {
        strv_free(env);
        return err->code;
    }
    step->after = after;
    *index = s->n - 1;
    return MD_OK;
}

md_status md_device_steps_add(const md_device_inputs *cfg, md_step_list *s, size_t *image_step, md_error *err)
{
    char source[PATH_MAX];
    snprintf(source, sizeof source, "%s/%s", cfg->kernels_dir, cfg->recipe->device_source);
    if (access(source, R_OK) != 0)
        return md_fail(err, MD_ERR_IO, "cannot read '%s': %s", source, strerror(errno));
    /* Target t's part p is d[t * parts + p]. */
    const size_t parts = cfg->recipe->parts, n = cfg->plan->n_targets * parts;
    device_target *d = calloc(n ? n : 1, sizeof *d);
    if (!d)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = MD_OK;
    for (size_t i = 0; i < n && st == MD_OK; i++) {
        const md_plan_target *t = &cfg->plan->targets[i / parts];
        d[i].part = (unsigned)(i % parts);
        st = plan_ptx(cfg, t, source, &d[i], err);
        if (st == MD_OK)
            st = plan_image(cfg, t, &d[i], err);
    }
    /* Each PTX in the order of its first target, followed by the images made from it: the pool
     * starts the first step that can run, so an image starts as soon as its PTX is written. */
    for (size_t i = 0; i < n && st == MD_OK; i++) {
        bool first = true, wanted = false;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(d[j].ptx_key, d[i].ptx_key) != 0;
        if (!first)
            continue;
        for (size_t j = i; j < n; j++)
            wanted = wanted || (!d[j].image_cached && strcmp(d[j].ptx_key, d[i].ptx_key) == 0);
        long after = -1;
        size_t index;
        if (wanted) {
            st = add_step(s, &d[i].ptx_argv, d[i].tk, d[i].ptx_what, d[i].ptx_path, -1, &index, err);
            after = (long)index;
        }
        for (size_t j = i; j < n && st == MD_OK; j++)
            if (strcmp(d[j].ptx_key, d[i].ptx_key) == 0)
                st = add_step(s, &d[j].image_argv, d[j].tk, d[j].image_what, d[j].image_path,
                              d[j].image_cached ? -1 : after, &image_step[j], err);
    }
    for (size_t i = 0; i < n; i++)
        device_target_free(&d[i]);
    free(d);
    return st;
}
