#include "build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "device_steps.h"
#include "package.h"
#include "up_to_date.h"
#include "recipes/platform.h"
#include "base/process.h"
#include "fetch/fetch_cache.h"
#include "fetch/sha256_file.h"
#include "recipes/product.h"

/* ---- platforms --------------------------------------------------------------------------------- */

const char *md_host_platform(void)
{
    struct utsname u;
    const md_platform *p = uname(&u) == 0 ? md_platform_find(u.machine) : NULL;
    return p ? p->name : "x86_64";
}

int md_platform_compiler(const char *platform, char *out, size_t size)
{
    if (strcmp(platform, md_host_platform()) == 0)
        return md_which("cc", out, size) == 0 || md_which("gcc", out, size) == 0 ? 0 : -1;
    const md_platform *p = md_platform_find(platform);
    return p && p->cross_compiler[0] ? md_which(p->cross_compiler, out, size) : -1;
}

static md_status compiler_version(const char *cc, char *out, size_t size, md_error *err)
{
    char *argv[] = { (char *)(uintptr_t)cc, "--version", NULL };
    md_run_result res;
    md_status st = md_run_capture(argv, NULL, 30, 4096, &res, err);
    if (st != MD_OK)
        return st;
    snprintf(out, size, "%.*s", (int)strcspn(res.output, "\n"), res.output);
    int code = res.exit_code;
    md_run_result_free(&res);
    return code == 0 ? MD_OK : md_fail(err, MD_ERR_UNSUPPORTED, "'%s --version' failed", cc);
}

/* ---- the host library per platform ------------------------------------------------------------- */

static const char *cuda_include_dir(const md_plan *plan)
{
    for (size_t i = 0; i < plan->n_toolkits; i++) /* newest first */
        if (plan->toolkits[i].include_dir[0])
            return plan->toolkits[i].include_dir;
    return NULL;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .c files of DIR, sorted, as malloc'd paths in a NULL-terminated array, into *OUT.
 * MD_ERR_IO when DIR cannot be read or holds none; MD_ERR_NOMEM. */
static md_status host_sources(const char *dir, char ***out, md_error *err)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return md_fail(err, MD_ERR_IO, "no C sources in '%s': %s", dir, strerror(errno));
    strv v = { 0 };
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 2 && strcmp(e->d_name + len - 2, ".c") == 0)
            ok = strv_add(&v, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!ok) {
        strv_free(v.items);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    if (!v.items)
        return md_fail(err, MD_ERR_IO, "no C sources in '%s'", dir);
    qsort(v.items, v.n, sizeof *v.items, compare_names);
    *out = v.items;
    return MD_OK;
}

static md_status add_host_object_steps(const md_build_config *cfg, const char *platform, const char *cc,
                                       const char *cc_version, const char *pins, char **sources, strv *objects,
                                       md_step_list *s, md_error *err)
{
    const char *cuda_inc = cuda_include_dir(cfg->plan);
    if (!cuda_inc)
        return md_fail(err, MD_ERR_UNSUPPORTED, "no toolkit with cuda.h found (needed to compile the host library)");
    for (size_t i = 0; sources[i]; i++) {
        strv v = { 0 };
        bool ok = strv_add(&v, "%s", cc) && strv_add_all(&v, cfg->recipe->host_cflags) &&
                  strv_add(&v, "-D%s=\"%s\"", cfg->recipe->version_define, cfg->version) && strv_add(&v, "-include") &&
                  strv_add(&v, "%s", pins) && strv_add(&v, "-I%s", cfg->kernels_dir) &&
                  strv_add(&v, "-I%s", cuda_inc) && strv_add(&v, "-c") && strv_add(&v, "-o") &&
                  strv_add(&v, "OUTPUT") && strv_add(&v, "%s", sources[i]);
        char key[65];
        if (ok && !md_content_key(cc_version, v.items, v.n - 2, cfg->source_dir, cfg->kernels_dir, sources[i], pins, key)) {
            strv_free(v.items);
            return md_fail(err, MD_ERR_IO, "cannot read '%s' or '%s' for the cache key", sources[i], pins);
        }
        char output[PATH_MAX], what[96];
        snprintf(output, sizeof output, "%s/%s.o", cfg->cache_dir, key);
        ok = ok && strv_add(objects, "%s", output);
        if (ok) {
            free(v.items[v.n - 2]);
            ok = (v.items[v.n - 2] = strdup(output)) != NULL;
        }
        snprintf(what, sizeof what, "%s %s", platform, strrchr(sources[i], '/') + 1);
        if (!ok) {
            strv_free(v.items);
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        }
        if (!md_steps_add(s, &v, NULL, what, output, true, err)) {
            strv_free(v.items);
            return err->code;
        }
    }
    return MD_OK;
}

static int compare_targets_for_loader(const void *a, const void *b)
{
    /* The loader tries the fatbins in order and keeps the first that loads and that the driver
     * can take: SASS first, the device's own architecture before older ones and, for one
     * architecture, the newest toolkit's before the one older drivers load; then PTX, the
     * newest ISA first, the old drivers' last. */
    const md_plan_target *x = *(const md_plan_target *const *)a, *y = *(const md_plan_target *const *)b;
    if (x->ptx != y->ptx)
        return x->ptx ? 1 : -1;
    if (x->ptx && x->needs_cuda != y->needs_cuda)
        return x->needs_cuda > y->needs_cuda ? -1 : 1;
    if (x->sm != y->sm)
        return x->sm > y->sm ? -1 : 1;
    return x->needs_cuda > y->needs_cuda ? -1 : x->needs_cuda < y->needs_cuda;
}

/* Stage 1: every nvcc and every host object, to run in parallel. */
static md_status plan_compile_steps(const md_build_config *cfg, char **sources, char (*compilers)[PATH_MAX],
                                    strv *objects, md_step_list *compile, size_t *image_step, md_error *err)
{
    const md_device_inputs device = { .plan = cfg->plan, .recipe = cfg->recipe, .kernels_dir = cfg->kernels_dir,
                                      .source_dir = cfg->source_dir, .cache_dir = cfg->cache_dir,
                                      .work_dir = cfg->work_dir, .dry_run = cfg->dry_run };
    md_status st = md_device_steps_add(&device, compile, image_step, err);
    if (st != MD_OK)
        return st;
    for (size_t p = 0; p < cfg->n_platforms; p++) {
        char version[256];
        if (md_platform_compiler(cfg->platforms[p], compilers[p], sizeof compilers[p]) != 0) {
            /* Debian spells the package with dashes: gcc-x86-64-linux-gnu, gcc-aarch64-linux-gnu. */
            char package[32];
            snprintf(package, sizeof package, "%s", cfg->platforms[p]);
            for (char *c = package; *c; c++)
                *c = *c == '_' ? '-' : *c;
            return md_fail(err, MD_ERR_UNSUPPORTED, "no C compiler for %s: apt-get install gcc-%s-linux-gnu",
                           cfg->platforms[p], package);
        }
        char pins[PATH_MAX];
        snprintf(pins, sizeof pins, "%s/glibc-pins-%s.h", cfg->work_dir, cfg->platforms[p]);
        /* The pins are written in a dry run too: the objects' cache keys, which it prints, hash them. */
        if ((st = compiler_version(compilers[p], version, sizeof version, err)) != MD_OK ||
            (st = md_package_write_glibc_pins(cfg->platforms[p], pins, err)) != MD_OK ||
            (st = add_host_object_steps(cfg, cfg->platforms[p], compilers[p], version, pins, sources, &objects[p],
                                        compile, err)) != MD_OK)
            return st;
    }
    return MD_OK;
}

/* Stage 2: the fatbins, in the loader's order, embedded by the kernels' own generator; then per
 * platform, the fatbins assembled and the library linked. Run one after another, in that order. */
static md_status plan_pack_steps(const md_build_config *cfg, const md_step_list *compile,
                                 const size_t *image_step, char (*compilers)[PATH_MAX], strv *objects,
                                 md_step_list *pack, md_build_result *result, md_error *err)
{
    const md_plan_target *order[MD_MAX_STEPS];
    size_t n_order = 0;
    for (size_t i = 0; i < cfg->plan->n_targets && i < MD_MAX_STEPS; i++)
        order[n_order++] = &cfg->plan->targets[i];
    qsort(order, n_order, sizeof *order, compare_targets_for_loader);
    char asm_path[PATH_MAX];
    snprintf(asm_path, sizeof asm_path, "%s/fatbins.S", cfg->work_dir);
    strv gen = { 0 };
    bool ok = strv_add(&gen, "sh") && strv_add(&gen, "%s/gen-fatbin-asm.sh", cfg->kernels_dir) &&
              strv_add(&gen, "%s", asm_path) && strv_add(&gen, "%u", cfg->recipe->parts);
    /* Each image with what the loader needs to know of it before loading it: the driver's
     * CUDA version it needs, the toolkit that wrote it, and its PTX ISA (0 for SASS); then its
     * fatbins, one per part. */
    for (size_t i = 0; ok && i < n_order; i++) {
        const md_plan_target *t = order[i];
        const size_t first = (size_t)(t - cfg->plan->targets) * cfg->recipe->parts;
        ok = strv_add(&gen, "%d", t->needs_cuda) &&
             strv_add(&gen, "%u", t->toolkit->major * 1000 + t->toolkit->minor * 10) &&
             strv_add(&gen, "%u", t->ptx_isa);
        for (size_t p = 0; ok && p < cfg->recipe->parts; p++)
            ok = strv_add(&gen, "%s", compile->steps[image_step[first + p]].output);
    }
    if (!ok || !md_steps_add(pack, &gen, NULL, "embedding the fatbins", asm_path, false, err)) {
        strv_free(gen.items);
        return err->code ? err->code : md_fail(err, MD_ERR_NOMEM, "out of memory");
    }

    for (size_t p = 0; p < cfg->n_platforms; p++) {
        md_build_output *out = &result->outputs[result->n_outputs++];
        snprintf(out->platform, sizeof out->platform, "%s", cfg->platforms[p]);
        char dir[PATH_MAX], fatbins_o[PATH_MAX + 16], what[96];
        snprintf(dir, sizeof dir, "%s/%s", cfg->work_dir, cfg->platforms[p]);
        snprintf(fatbins_o, sizeof fatbins_o, "%s/fatbins.o", dir);
        snprintf(out->library, sizeof out->library, "%s/" MD_LIBRARY_NAME, dir);
        md_status st;
        if (!cfg->dry_run && (st = md_ensure_dir(dir, err)) != MD_OK)
            return st;
        strv as = { 0 }, link = { 0 };
        ok = strv_add(&as, "%s", compilers[p]) && strv_add(&as, "-c") && strv_add(&as, "-o") &&
             strv_add(&as, "%s", fatbins_o) && strv_add(&as, "%s", asm_path) &&
             strv_add(&link, "%s", compilers[p]) && strv_add_all(&link, cfg->recipe->link_flags) &&
             strv_add(&link, "-Wl,-soname," MD_LIBRARY_NAME) && strv_add(&link, "-o") && strv_add(&link, "%s", out->library);
        for (size_t i = 0; ok && i < objects[p].n; i++)
            ok = strv_add(&link, "%s", objects[p].items[i]);
        ok = ok && strv_add(&link, "%s", fatbins_o) && strv_add_all(&link, cfg->recipe->libs);
        snprintf(what, sizeof what, "%s fatbins.o", cfg->platforms[p]);
        if (!ok || !md_steps_add(pack, &as, NULL, what, fatbins_o, false, err)) {
            strv_free(as.items);
            strv_free(link.items);
            return err->code ? err->code : md_fail(err, MD_ERR_NOMEM, "out of memory");
        }
        snprintf(what, sizeof what, "%s " MD_LIBRARY_NAME, cfg->platforms[p]);
        if (!md_steps_add(pack, &link, NULL, what, out->library, false, err)) {
            strv_free(link.items);
            return err->code;
        }
    }
    return MD_OK;
}

/* The work folder's lock, with this process's id written in it for a build that has to wait.
 * MD_ERR_BUILD when another holds it and CFG->no_wait; MD_ERR_STOPPED when stopped waiting. */
static md_status take_lock(const md_build_config *cfg, int *lock_fd, md_error *err)
{
    char lock_path[PATH_MAX + 8];
    snprintf(lock_path, sizeof lock_path, "%s/.lock", cfg->work_dir);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot open '%s': %s", lock_path, strerror(errno));
    *lock_fd = fd;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK)
            return md_fail(err, MD_ERR_IO, "cannot lock '%s': %s", lock_path, strerror(errno));
        char text[32] = "";
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        long holder = n > 0 ? strtol(text, NULL, 10) : 0;
        if (cfg->no_wait)
            return md_fail(err, MD_ERR_BUILD, "another build of this folder is running (process %ld holds '%s')",
                           holder, lock_path);
        if (cfg->on_wait)
            cfg->on_wait(cfg->wait_ctx, lock_path, holder);
        while (flock(fd, LOCK_EX) != 0) {
            if (errno != EINTR)
                return md_fail(err, MD_ERR_IO, "cannot lock '%s': %s", lock_path, strerror(errno));
            if (cfg->stop && *cfg->stop)
                return md_fail(err, MD_ERR_STOPPED, "stopped while waiting for '%s'", lock_path);
        }
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        /* The id only helps a waiting build's message: a lock without it still locks. */
    }
    return MD_OK;
}

/* Stage 3: the compile steps in parallel, then the pack steps one at a time. Every step's
 * temporary files (nvcc's) go to a folder of this build's own, removed at the end whatever
 * happened, so that a stopped or failed build leaves none in /tmp. */
static md_status run_steps(const md_build_config *cfg, md_step_list *compile, md_step_list *pack,
                           const char *log_dir, md_build_result *result, md_error *err)
{
    char tmp_dir[PATH_MAX];
    md_build_tmp_dir(cfg->work_dir, tmp_dir, sizeof tmp_dir);
    md_status st = md_ensure_dir(tmp_dir, err);
    if (st != MD_OK)
        return st;
    size_t to_run = 0;
    for (size_t i = 0; i < compile->n; i++)
        to_run += !compile->steps[i].cached;
    md_steps_options o = { .log_dir = log_dir, .tmp_dir = tmp_dir, .jobs = cfg->jobs ? cfg->jobs : 1,
                           .timeout_s = cfg->step_timeout_s, .stop = cfg->stop, .on_step = cfg->on_step,
                           .ctx = cfg->step_ctx, .started_ms = md_steps_now_ms(), .total = to_run + pack->n };
    st = md_steps_run(compile, &o, &result->counts, err);
    o.done_before = to_run;
    o.jobs = 1;
    /* The generator, then each platform's assembly and link, in that order. */
    for (size_t i = 0; i < pack->n && st == MD_OK; i++) {
        md_step_list *one = calloc(1, sizeof *one);
        if (!one) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            break;
        }
        one->steps = &pack->steps[i];
        one->n = 1;
        st = md_steps_run(one, &o, &result->counts, err);
        o.done_before++;
        free(one);
    }
    md_remove_tree(tmp_dir);
    return st;
}

/* ---- a rebuild with nothing changed ------------------------------------------------------------ */

static void stamp_path(const md_build_config *cfg, const char *platform, char *out, size_t size)
{
    snprintf(out, size, "%s/wheel-%s.stamp", cfg->work_dir, platform);
}

/* Each platform's pack key into KEYS; false when one cannot be computed (then nothing is
 * skipped and no stamp written). */
static bool pack_keys(const md_build_config *cfg, const md_step_list *pack, char (*keys)[65])
{
    strv files = { 0 };
    bool ok = md_package_files(cfg->package_dir, &files);
    for (size_t p = 0; ok && p < cfg->n_platforms; p++)
        ok = md_pack_key(pack, cfg->package_dir, files.items, cfg->version, (long long)cfg->source_date_epoch,
                         cfg->platforms[p], keys[p]);
    strv_free(files.items);
    return ok;
}

/* Whether the last build left every platform's wheel with the same key, its library and its
 * wheel still there and the wheel unchanged; if so, RESULT's outputs are those. */
static bool up_to_date(const md_build_config *cfg, const md_step_list *compile, char (*keys)[65],
                       md_build_result *result)
{
    for (size_t i = 0; i < compile->n; i++)
        if (!compile->steps[i].cached)
            return false;
    md_build_output outputs[MD_MAX_PLATFORMS];
    for (size_t p = 0; p < cfg->n_platforms; p++) {
        char path[PATH_MAX + 32], sha[65];
        md_pack_stamp s;
        stamp_path(cfg, cfg->platforms[p], path, sizeof path);
        size_t out_len = strlen(cfg->out_dir);
        /* the same library, and the wheel in this build's output folder, unchanged */
        if (!md_pack_stamp_read(path, &s) || strcmp(s.key, keys[p]) != 0 ||
            strcmp(s.library, result->outputs[p].library) != 0 || access(s.library, R_OK) != 0 ||
            strncmp(s.wheel, cfg->out_dir, out_len) != 0 || s.wheel[out_len] != '/' ||
            strchr(s.wheel + out_len + 1, '/') || md_sha256_file(s.wheel, sha, NULL) != MD_OK || strcmp(sha, s.wheel_sha256) != 0)
            return false;
        outputs[p] = result->outputs[p];
        snprintf(outputs[p].wheel, sizeof outputs[p].wheel, "%s", s.wheel);
        outputs[p].glibc_major = s.glibc_major;
        outputs[p].glibc_minor = s.glibc_minor;
        snprintf(outputs[p].platform_tag, sizeof outputs[p].platform_tag, "%s", s.platform_tag);
    }
    memcpy(result->outputs, outputs, cfg->n_platforms * sizeof *outputs);
    result->counts.n_cached = compile->n;
    return true;
}

/* After a build: each platform's stamp, with the keys taken before the steps ran (running them
 * renames their outputs in their commands), for the next build to find it up to date. A stamp
 * that cannot be written only costs the next build its shortcut. */
static void write_stamps(const md_build_config *cfg, char (*keys)[65], const md_build_result *result)
{
    for (size_t p = 0; p < result->n_outputs; p++) {
        const md_build_output *o = &result->outputs[p];
        md_pack_stamp s = { .glibc_major = o->glibc_major, .glibc_minor = o->glibc_minor };
        char path[PATH_MAX + 32];
        md_error ignored;
        snprintf(s.key, sizeof s.key, "%s", keys[p]);
        snprintf(s.library, sizeof s.library, "%s", o->library);
        snprintf(s.wheel, sizeof s.wheel, "%s", o->wheel);
        snprintf(s.platform_tag, sizeof s.platform_tag, "%s", o->platform_tag);
        stamp_path(cfg, o->platform, path, sizeof path);
        if (md_sha256_file(o->wheel, s.wheel_sha256, NULL) == MD_OK)
            md_pack_stamp_write(path, &s, &ignored);
    }
}

/* Stage 4: each library checked against the manylinux floor, then packed into its wheel. */
static md_status package_outputs(const md_build_config *cfg, md_build_result *result, md_error *err)
{
    md_status st = MD_OK;
    for (size_t p = 0; p < result->n_outputs && st == MD_OK; p++) {
        md_build_output *out = &result->outputs[p];
        st = md_package_check_manylinux(out->library, out->platform, &out->glibc_major, &out->glibc_minor,
                                        out->platform_tag, sizeof out->platform_tag, err);
        if (st == MD_OK) {
            md_package_spec spec = { .package_dir = cfg->package_dir, .library = out->library,
                                     .platform_tag = out->platform_tag, .version = cfg->version,
                                     .out_dir = cfg->out_dir, .source_date_epoch = cfg->source_date_epoch };
            st = md_package_write_wheel(&spec, out->wheel, sizeof out->wheel, err);
        }
    }
    return st;
}

md_status md_build_run(const md_build_config *cfg, md_build_result *result, md_error *err)
{
    memset(result, 0, sizeof *result);
    md_error_clear(err);
    md_step_list *compile = calloc(1, sizeof *compile), *pack = calloc(1, sizeof *pack);
    char **sources = NULL;
    size_t *image_step = NULL; /* per target and part: the compile step that writes its fatbin */
    strv objects[MD_MAX_PLATFORMS] = { { 0 } };
    char compilers[MD_MAX_PLATFORMS][PATH_MAX];
    char log_dir[PATH_MAX];
    int lock_fd = -1;
    md_status st = MD_OK;
    if (!compile || !pack) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    snprintf(log_dir, sizeof log_dir, "%s/logs", cfg->work_dir);
    if ((st = md_ensure_dir(cfg->cache_dir, err)) != MD_OK || (st = md_ensure_dir(log_dir, err)) != MD_OK ||
        (!cfg->dry_run && (st = md_ensure_dir(cfg->out_dir, err)) != MD_OK))
        goto end;
    /* Two builds of one source folder share its work folder (the fatbin table, the pins, the
     * linked libraries): the second waits for the first, then finds its objects cached. A dry
     * run only writes the pins, each by rename, and takes no lock. */
    if (!cfg->dry_run && (st = take_lock(cfg, &lock_fd, err)) != MD_OK)
        goto end;
    if ((st = host_sources(cfg->kernels_dir, &sources, err)) != MD_OK)
        goto end;

    if (!(image_step = calloc(cfg->plan->n_targets * cfg->recipe->parts + 1, sizeof *image_step))) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = plan_compile_steps(cfg, sources, compilers, objects, compile, image_step, err)) != MD_OK ||
        (st = plan_pack_steps(cfg, compile, image_step, compilers, objects, pack, result, err)) != MD_OK ||
        cfg->dry_run)
        goto end;
    char keys[MD_MAX_PLATFORMS][65];
    bool keyed = pack_keys(cfg, pack, keys);
    if (keyed && up_to_date(cfg, compile, keys, result)) {
        result->up_to_date = true;
        goto end;
    }
    if ((st = run_steps(cfg, compile, pack, log_dir, result, err)) == MD_OK &&
        (st = package_outputs(cfg, result, err)) == MD_OK && keyed)
        write_stamps(cfg, keys, result);
end:
    if (lock_fd >= 0)
        close(lock_fd); /* releases the lock */
    /* A list cut short would print a dry run's commands with some missing, as if complete. */
    if (compile && !md_steps_move(compile, &result->steps, &result->n_steps) && st == MD_OK)
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
    if (pack && !md_steps_move(pack, &result->steps, &result->n_steps) && st == MD_OK)
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
    free(compile);
    free(pack);
    free(image_step);
    strv_free(sources);
    for (size_t p = 0; p < MD_MAX_PLATFORMS; p++)
        strv_free(objects[p].items);
    return st;
}

void md_build_result_free(md_build_result *result)
{
    md_build_steps_free(result->steps, result->n_steps);
    memset(result, 0, sizeof *result);
}
