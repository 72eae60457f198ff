#include "build.h"

#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include "elf_glibc.h"
#include "process.h"
#include "product.h"
#include "recipes.h"
#include "wheel.h"

#define MAX_SOURCES 64
#define MAX_ARGS 64
#define LOG_TAIL_BYTES 1500

/* Flags every build of the device code gets; the per-architecture ones come from the plan. */
static const char *const NVCC_FLAGS[] = { "-O3", "-std=c++17", "-Wno-deprecated-gpu-targets", NULL };
/* -ffp-contract=off: the CPU path rounds h = y*H - 0.5 exactly as the device code does. */
static const char *const HOST_CFLAGS[] = { "-std=c11", "-D_GNU_SOURCE", "-O2", "-fPIC", "-fvisibility=hidden",
                                           "-ffp-contract=off", "-Wall", "-Wextra", NULL };
static const char *const LINK_FLAGS[] = { "-shared", "-Wl,-soname," MD_LIBRARY_NAME, "-Wl,-z,noexecstack",
                                          "-Wl,--no-undefined", NULL };
static const char *const LINK_LIBS[] = { "-ldl", "-lpthread", "-lm", NULL };

typedef struct {
    char **items;
    size_t n;
} strv;

static bool strv_add(strv *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool strv_add(strv *v, const char *fmt, ...)
{
    char **grown = realloc(v->items, (v->n + 2) * sizeof *grown);
    if (!grown)
        return false;
    v->items = grown;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&v->items[v->n], fmt, ap);
    va_end(ap);
    if (rc < 0)
        return false;
    v->items[++v->n] = NULL;
    return true;
}

static bool strv_add_all(strv *v, const char *const *list)
{
    for (; *list; list++)
        if (!strv_add(v, "%s", *list))
            return false;
    return true;
}

static void strv_free(char **items)
{
    if (!items)
        return;
    for (size_t i = 0; items[i]; i++)
        free(items[i]);
    free(items);
}

/* ---- content keys ------------------------------------------------------------------------------ */

static bool hash_file(EVP_MD_CTX *ctx, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate(ctx, buf, n);
    bool ok = !ferror(f);
    fclose(f);
    EVP_DigestUpdate(ctx, path, strlen(path) + 1);
    return ok;
}

/* The file and, recursively, the local headers it includes with #include "..." from DIR. */
static void source_closure(const char *dir, const char *file, char (*list)[PATH_MAX], size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i], file) == 0)
            return;
    if (*n == MAX_SOURCES)
        return;
    snprintf(list[(*n)++], PATH_MAX, "%s", file);
    FILE *f = fopen(file, "r");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "#include \"", 10) != 0)
            continue;
        p += 10;
        size_t len = strcspn(p, "\"");
        char inc[PATH_MAX];
        snprintf(inc, sizeof inc, "%s/%.*s", dir, (int)len, p);
        if (access(inc, R_OK) == 0)
            source_closure(dir, inc, list, n);
    }
    fclose(f);
}

/* sha256 over the tool version, the command (without its output path) and the sources. */
static bool content_key(const char *tool_version, char *const *argv, size_t skip_arg, const char *dir,
                        const char *source, const char *extra_file, char key[65])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx);
        return false;
    }
    EVP_DigestUpdate(ctx, tool_version, strlen(tool_version) + 1);
    for (size_t i = 0; argv[i]; i++)
        if (i != skip_arg)
            EVP_DigestUpdate(ctx, argv[i], strlen(argv[i]) + 1);
    char (*files)[PATH_MAX] = malloc(MAX_SOURCES * sizeof *files);
    size_t n = 0;
    bool ok = files != NULL;
    if (ok)
        source_closure(dir, source, files, &n);
    for (size_t i = 0; ok && i < n; i++)
        ok = hash_file(ctx, files[i]);
    if (ok && extra_file)
        ok = hash_file(ctx, extra_file);
    free(files);
    unsigned char md[32];
    unsigned len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; ok && i < 32; i++)
        snprintf(key + 2 * i, 3, "%02x", md[i]);
    return ok;
}

/* ---- platforms --------------------------------------------------------------------------------- */

const char *md_host_platform(void)
{
    struct utsname u;
    if (uname(&u) == 0 && strcmp(u.machine, "aarch64") == 0)
        return "aarch64";
    return "x86_64";
}

int md_platform_compiler(const char *platform, char *out, size_t size)
{
    if (strcmp(platform, md_host_platform()) == 0)
        return md_which("cc", out, size) == 0 || md_which("gcc", out, size) == 0 ? 0 : -1;
    char name[64];
    snprintf(name, sizeof name, "%s-linux-gnu-gcc", platform);
    return md_which(name, out, size);
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

/* ---- steps ------------------------------------------------------------------------------------- */

typedef struct {
    md_build_step *steps;
    size_t n;
    char **envs[256];   /* per step: NULL for ours */
    char tmp[256][PATH_MAX + 8];
} step_list;

static md_build_step *add_step(step_list *s, strv *argv, char **env, const char *what, const char *output,
                               bool cacheable, md_error *err)
{
    if (s->n == 256) {
        md_fail(err, MD_ERR_INTERNAL, "too many build steps");
        return NULL;
    }
    md_build_step *grown = realloc(s->steps, (s->n + 1) * sizeof *grown);
    if (!grown) {
        md_fail(err, MD_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->steps = grown;
    md_build_step *st = &s->steps[s->n];
    memset(st, 0, sizeof *st);
    st->argv = argv->items;
    argv->items = NULL;
    argv->n = 0;
    snprintf(st->what, sizeof st->what, "%s", what);
    snprintf(st->output, sizeof st->output, "%s", output);
    st->cacheable = cacheable;
    st->cached = cacheable && access(output, R_OK) == 0;
    s->envs[s->n] = env;
    s->n++;
    return st;
}

static md_status ensure_dir(const char *path, md_error *err)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", buf, strerror(errno));
    return MD_OK;
}

static void log_tail(const char *log, char *out, size_t size)
{
    out[0] = '\0';
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, len > LOG_TAIL_BYTES ? len - LOG_TAIL_BYTES : 0, SEEK_SET);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
    for (char *p = out; *p; p++) /* one line, as every error message */
        if (*p == '\n')
            *p = ' ';
}

/* Runs the steps that are not cached, JOBS at a time. Each writes OUTPUT.tmp (the last
 * "-o" argument is rewritten so) and is renamed into place only when it succeeds. */
static md_status run_steps(step_list *s, const char *log_dir, unsigned jobs, md_build_result *result, md_error *err)
{
    pid_t pids[256];
    size_t next = 0, running = 0;
    md_status st = MD_OK;
    char log[PATH_MAX + 64];
    for (;;) {
        while (st == MD_OK && running < jobs && next < s->n) {
            size_t i = next++;
            md_build_step *step = &s->steps[i];
            if (step->cached) {
                result->n_cached++;
                continue;
            }
            s->tmp[i][0] = '\0';
            for (size_t a = 1; step->argv[a]; a++)
                if (strcmp(step->argv[a - 1], "-o") == 0) {
                    snprintf(s->tmp[i], sizeof s->tmp[i], "%s.tmp", step->output);
                    free(step->argv[a]);
                    if (!(step->argv[a] = strdup(s->tmp[i])))
                        return md_fail(err, MD_ERR_NOMEM, "out of memory");
                }
            snprintf(log, sizeof log, "%s/step-%zu.log", log_dir, i);
            unlink(log);
            st = md_spawn_logged(step->argv, s->envs[i], log, &pids[i], err);
            if (st == MD_OK)
                running++;
        }
        if (running == 0)
            break;
        int status;
        pid_t done = waitpid(-1, &status, 0);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return md_fail(err, MD_ERR_INTERNAL, "waitpid: %s", strerror(errno));
        }
        size_t i = 0;
        while (i < next && (s->steps[i].cached || pids[i] != done))
            i++;
        if (i == next)
            continue;
        running--;
        pids[i] = 0;
        md_build_step *step = &s->steps[i];
        snprintf(log, sizeof log, "%s/step-%zu.log", log_dir, i);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && (!s->tmp[i][0] || rename(s->tmp[i], step->output) == 0)) {
            result->n_compiled += step->cacheable;
            continue;
        }
        if (s->tmp[i][0])
            unlink(s->tmp[i]);
        if (st == MD_OK) {
            char tail[LOG_TAIL_BYTES + 1];
            log_tail(log, tail, sizeof tail);
            snprintf(result->failed_log, sizeof result->failed_log, "%s", log);
            st = md_fail(err, MD_ERR_BUILD, "%s failed (log: %s): %s", step->what, log, tail);
        }
    }
    return st;
}

/* ---- the plan's device code -------------------------------------------------------------------- */

/* Debian puts CUDA 11's headers in /usr/include, behind any CUDA copy in /usr/local/include on
 * the default search path; a folder of links to them, given with -I, puts them first. */
static md_status header_shim(const md_toolkit *tk, const md_build_config *cfg, char *out, size_t size,
                             md_error *err)
{
    out[0] = '\0';
    if (strcmp(tk->include_dir, "/usr/include") != 0)
        return MD_OK;
    snprintf(out, size, "%s/cuda-%s-include", cfg->work_dir, tk->version);
    md_status st = ensure_dir(out, err);
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

static md_status add_device_steps(const md_build_config *cfg, step_list *s, md_error *err)
{
    char source[PATH_MAX];
    snprintf(source, sizeof source, "%s/msda_kernels.cu", cfg->kernels_dir);
    if (access(source, R_OK) != 0)
        return md_fail(err, MD_ERR_IO, "cannot read '%s': %s", source, strerror(errno));
    for (size_t i = 0; i < cfg->plan->n_targets; i++) {
        const md_plan_target *t = &cfg->plan->targets[i];
        const md_toolkit *tk = t->toolkit;
        char shim[PATH_MAX];
        md_status st = header_shim(tk, cfg, shim, sizeof shim, err);
        if (st != MD_OK)
            return st;
        strv v = { 0 };
        bool ok = strv_add(&v, "%s", tk->nvcc) && strv_add(&v, "-fatbin") && strv_add(&v, "-gencode") &&
                  strv_add(&v, "arch=compute_%u,code=%s_%u", t->sm, t->ptx ? "compute" : "sm", t->sm) &&
                  strv_add_all(&v, NVCC_FLAGS) && (!t->ccbin[0] || (strv_add(&v, "-ccbin") && strv_add(&v, "%s", t->ccbin))) &&
                  (!shim[0] || strv_add(&v, "-I%s", shim)) && strv_add(&v, "-I%s", cfg->kernels_dir) &&
                  strv_add(&v, "-DMSDA_MAX_THREADS=%u", t->max_threads) &&
                  strv_add(&v, "-DMSDA_ENABLE_F16=%d", t->f16) && strv_add(&v, "-DMSDA_ENABLE_BF16=%d", t->bf16) &&
                  strv_add(&v, "-DMSDA_F16_ATOMIC=%d", (int)t->f16_atomic) &&
                  strv_add(&v, "-DMSDA_BF16_ATOMIC=%d", (int)t->bf16_atomic) && strv_add(&v, "-o") &&
                  strv_add(&v, "OUTPUT") && strv_add(&v, "%s", source);
        char key[65];
        ok = ok && content_key(tk->version_text, v.items, v.n - 2, cfg->kernels_dir, source, NULL, key);
        if (!ok) {
            strv_free(v.items);
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        }
        char output[PATH_MAX], what[96];
        snprintf(output, sizeof output, "%s/%s.fatbin", cfg->cache_dir, key);
        free(v.items[v.n - 2]);
        v.items[v.n - 2] = strdup(output);
        snprintf(what, sizeof what, "%s_%u (CUDA %s)", t->ptx ? "compute" : "sm", t->sm, tk->version);
        char path_value[PATH_MAX + 32];
        snprintf(path_value, sizeof path_value, "%s:/usr/bin:/bin", tk->bin_dir);
        char **env = md_env_with_path(path_value);
        if (!env) {
            strv_free(v.items);
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        }
        if (!add_step(s, &v, env, what, output, true, err)) {
            strv_free(v.items);
            md_env_free(env);
            return err->code;
        }
    }
    return MD_OK;
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

/* The .c files of DIR, sorted, as malloc'd paths in a NULL-terminated array. */
static char **host_sources(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    strv v = { 0 };
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 2 && strcmp(e->d_name + len - 2, ".c") == 0)
            ok = strv_add(&v, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!ok || !v.items) {
        strv_free(v.items);
        return NULL;
    }
    qsort(v.items, v.n, sizeof *v.items, compare_names);
    return v.items;
}

static md_status add_host_object_steps(const md_build_config *cfg, const char *platform, const char *cc,
                                       const char *cc_version, const char *pins, char **sources, strv *objects,
                                       step_list *s, md_error *err)
{
    const char *cuda_inc = cuda_include_dir(cfg->plan);
    if (!cuda_inc)
        return md_fail(err, MD_ERR_UNSUPPORTED, "no toolkit with cuda.h found (needed to compile the host library)");
    for (size_t i = 0; sources[i]; i++) {
        strv v = { 0 };
        bool ok = strv_add(&v, "%s", cc) && strv_add_all(&v, HOST_CFLAGS) && strv_add(&v, "-include") &&
                  strv_add(&v, "%s", pins) && strv_add(&v, "-I%s", cfg->kernels_dir) &&
                  strv_add(&v, "-I%s", cuda_inc) && strv_add(&v, "-c") && strv_add(&v, "-o") &&
                  strv_add(&v, "OUTPUT") && strv_add(&v, "%s", sources[i]);
        char key[65];
        if (ok && !content_key(cc_version, v.items, v.n - 2, cfg->kernels_dir, sources[i], pins, key)) {
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
        if (!add_step(s, &v, NULL, what, output, true, err)) {
            strv_free(v.items);
            return err->code;
        }
    }
    return MD_OK;
}

static int compare_targets_for_loader(const void *a, const void *b)
{
    /* The loader tries the fatbins in order and keeps the first that loads: newest SASS first
     * gives the best code a device can run, and PTX comes last, for devices no SASS fits. */
    const md_plan_target *x = *(const md_plan_target *const *)a, *y = *(const md_plan_target *const *)b;
    if (x->ptx != y->ptx)
        return x->ptx ? 1 : -1;
    return x->sm > y->sm ? -1 : x->sm < y->sm;
}

static void move_steps(step_list *from, md_build_result *result)
{
    md_build_step *grown = from->n ? realloc(result->steps, (result->n_steps + from->n) * sizeof *grown) : NULL;
    if (grown) {
        result->steps = grown;
        memcpy(result->steps + result->n_steps, from->steps, from->n * sizeof *from->steps);
        result->n_steps += from->n;
    } else {
        for (size_t i = 0; i < from->n; i++)
            strv_free(from->steps[i].argv);
    }
    for (size_t i = 0; i < from->n; i++)
        md_env_free(from->envs[i]);
    free(from->steps);
    memset(from, 0, sizeof *from);
}

/* ---- glibc floor and wheels ---------------------------------------------------------------------- */

/* A header binding the functions glibc 2.34 moved into libc to the platform's base version
 * (recipes/platforms.json), given to every host compilation with -include. */
static md_status write_glibc_pins(const char *platform, const char *path, md_error *err)
{
    /* Written in a dry run too: the objects' cache keys, which a dry run prints, hash it. */
    json_t *doc = md_recipe_load("platforms.json", err);
    if (!doc)
        return err->code;
    const char *base = NULL;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(doc, "platforms"), i, item)
        if (strcmp(json_string_value(json_object_get(item, "name")), platform) == 0)
            base = json_string_value(json_object_get(item, "glibc_base"));
    md_status st = MD_OK;
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = base ? fopen(tmp, "w") : NULL;
    if (!f) {
        st = base ? md_fail(err, MD_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno))
                  : md_fail(err, MD_ERR_INTERNAL, "platforms.json has no glibc_base for %s", platform);
        goto end;
    }
    fprintf(f, "/* generated by msda-doctor build: keep the glibc floor at %s */\n", base);
    json_array_foreach(json_object_get(doc, "glibc_pinned_symbols"), i, item) {
        const char *sym = json_string_value(item);
        fprintf(f, "__asm__(\".symver %s,%s@GLIBC_%s\");\n", sym, sym, base);
    }
    /* The objects' content keys hash this file, so rewriting the same text rebuilds nothing. */
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        st = md_fail(err, MD_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
end:
    json_decref(doc);
    return st;
}

static md_status check_manylinux(md_build_output *out, md_error *err)
{
    md_elf_glibc info;
    md_status st = md_elf_glibc_read_file(out->library, MD_GLIBC_FLOOR_MAJOR, MD_GLIBC_FLOOR_MINOR, &info, err);
    if (st != MD_OK)
        return st;
    if ((st = md_elf_check_libraries(&info, err)) != MD_OK)
        goto end;
    out->glibc_major = info.glibc.major;
    out->glibc_minor = info.glibc.minor;
    if (info.n_above > 0 || info.glibc_private) {
        char symbols[256] = "";
        for (size_t i = 0; i < info.n_above && i < 6; i++)
            snprintf(symbols + strlen(symbols), sizeof symbols - strlen(symbols), "%s%s@%s", i ? ", " : "",
                     info.above[i].symbol, info.above[i].version_name);
        st = md_fail(err, MD_ERR_BUILD,
                     "%s: needs %s (%s): a manylinux_2_17 wheel would lie; pin these in recipes/platforms.json",
                     out->library, info.glibc_private ? "GLIBC_PRIVATE" : info.glibc_name, symbols);
        goto end;
    }
    for (size_t i = 0; i < info.n_needed; i++) {
        if (!info.needed[i].allowed) {
            st = md_fail(err, MD_ERR_BUILD, "%s: links %s, which manylinux_2_17 does not allow", out->library,
                         info.needed[i].soname);
            goto end;
        }
    }
    st = md_wheel_platform_tag(out->platform, MD_GLIBC_FLOOR_MAJOR, MD_GLIBC_FLOOR_MINOR, out->platform_tag, sizeof out->platform_tag, err);
end:
    md_elf_glibc_free(&info);
    return st;
}

/* The Python package: the folders of DIR that hold an __init__.py and DIR's own *.py files,
 * without caches; paths relative to DIR. */
static bool collect_package(const char *dir, const char *rel, bool top, strv *paths)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return false;
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "__pycache__") == 0 || (top && strcmp(e->d_name, "tests") == 0))
            continue;
        char child[PATH_MAX], full[PATH_MAX * 2];
        snprintf(child, sizeof child, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", dir, child);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        size_t len = strlen(e->d_name);
        if (S_ISDIR(st.st_mode)) {
            char init[PATH_MAX * 2 + 16];
            snprintf(init, sizeof init, "%s/__init__.py", full);
            if (!top || access(init, R_OK) == 0)
                ok = collect_package(dir, child, false, paths);
        } else if (S_ISREG(st.st_mode) && !(len > 4 && strcmp(e->d_name + len - 4, ".pyc") == 0) &&
                   (!top || (len > 3 && strcmp(e->d_name + len - 3, ".py") == 0))) {
            ok = strv_add(paths, "%s", child);
        }
    }
    closedir(d);
    return ok;
}

static md_status write_wheel(const md_build_config *cfg, md_build_output *out, md_error *err)
{
    strv paths = { 0 };
    if (!collect_package(cfg->package_dir, "", true, &paths) || paths.n == 0) {
        strv_free(paths.items);
        return md_fail(err, MD_ERR_IO, "no Python package (a folder with __init__.py) in '%s'", cfg->package_dir);
    }
    md_wheel_file *files = calloc(paths.n + 1, sizeof *files);
    char (*sources)[PATH_MAX] = calloc(paths.n, sizeof *sources);
    if (!files || !sources) {
        free(files);
        free(sources);
        strv_free(paths.items);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < paths.n; i++) {
        snprintf(sources[i], PATH_MAX, "%s/%s", cfg->package_dir, paths.items[i]);
        files[i] = (md_wheel_file){ .path = paths.items[i], .source_path = sources[i] };
    }
    files[paths.n] = (md_wheel_file){ .path = MD_LIBRARY_MEMBER, .source_path = out->library, .executable = true };
    md_wheel_spec spec = {
        .dist = MD_DIST_NAME,
        .version = cfg->version,
        .python_tag = MD_PYTHON_TAG,
        .abi_tag = MD_ABI_TAG,
        .platform_tag = out->platform_tag,
        .output_dir = cfg->out_dir,
        .summary = MD_SUMMARY,
        .requires_python = MD_REQUIRES_PYTHON,
        .files = files,
        .n_files = paths.n + 1,
        .source_date_epoch = cfg->source_date_epoch,
    };
    char *written = NULL;
    md_status st = md_wheel_write(&spec, &written, err);
    if (st == MD_OK)
        snprintf(out->wheel, sizeof out->wheel, "%s", written);
    free(written);
    free(files);
    free(sources);
    strv_free(paths.items);
    return st;
}

md_status md_build_run(const md_build_config *cfg, md_build_result *result, md_error *err)
{
    memset(result, 0, sizeof *result);
    md_error_clear(err);
    step_list *compile = calloc(1, sizeof *compile), *pack = calloc(1, sizeof *pack);
    char **sources = NULL;
    strv objects[MD_MAX_PLATFORMS] = { { 0 } };
    char compilers[MD_MAX_PLATFORMS][PATH_MAX];
    char log_dir[PATH_MAX];
    md_status st = MD_OK;
    if (!compile || !pack) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    snprintf(log_dir, sizeof log_dir, "%s/logs", cfg->work_dir);
    if ((st = ensure_dir(cfg->cache_dir, err)) != MD_OK || (st = ensure_dir(log_dir, err)) != MD_OK ||
        (!cfg->dry_run && (st = ensure_dir(cfg->out_dir, err)) != MD_OK))
        goto end;
    if (!(sources = host_sources(cfg->kernels_dir))) {
        st = md_fail(err, MD_ERR_IO, "no C sources in '%s'", cfg->kernels_dir);
        goto end;
    }

    /* Stage 1: every nvcc and every host object, in parallel. */
    if ((st = add_device_steps(cfg, compile, err)) != MD_OK)
        goto end;
    for (size_t p = 0; p < cfg->n_platforms; p++) {
        char version[256];
        if (md_platform_compiler(cfg->platforms[p], compilers[p], sizeof compilers[p]) != 0) {
            st = md_fail(err, MD_ERR_UNSUPPORTED, "no C compiler for %s: apt-get install gcc-%s-linux-gnu",
                         cfg->platforms[p], cfg->platforms[p]);
            goto end;
        }
        char pins[PATH_MAX];
        snprintf(pins, sizeof pins, "%s/glibc-pins-%s.h", cfg->work_dir, cfg->platforms[p]);
        if ((st = compiler_version(compilers[p], version, sizeof version, err)) != MD_OK ||
            (st = write_glibc_pins(cfg->platforms[p], pins, err)) != MD_OK ||
            (st = add_host_object_steps(cfg, cfg->platforms[p], compilers[p], version, pins, sources, &objects[p],
                                        compile, err)) != MD_OK)
            goto end;
    }

    /* Stage 2: the fatbins, in the loader's order, embedded by the kernels' own generator. */
    const md_plan_target *order[256];
    size_t n_order = 0;
    for (size_t i = 0; i < cfg->plan->n_targets && i < 256; i++)
        order[n_order++] = &cfg->plan->targets[i];
    qsort(order, n_order, sizeof *order, compare_targets_for_loader);
    char asm_path[PATH_MAX];
    snprintf(asm_path, sizeof asm_path, "%s/fatbins.S", cfg->work_dir);
    strv gen = { 0 };
    bool ok = strv_add(&gen, "sh") && strv_add(&gen, "%s/gen-fatbin-asm.sh", cfg->kernels_dir) &&
              strv_add(&gen, "%s", asm_path);
    for (size_t i = 0; ok && i < n_order; i++)
        ok = strv_add(&gen, "%s", compile->steps[order[i] - cfg->plan->targets].output);
    if (!ok || !add_step(pack, &gen, NULL, "embedding the fatbins", asm_path, false, err)) {
        strv_free(gen.items);
        st = err->code ? err->code : md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }

    /* Stage 3: per platform, assemble the fatbins and link the library. */
    for (size_t p = 0; p < cfg->n_platforms; p++) {
        md_build_output *out = &result->outputs[result->n_outputs++];
        snprintf(out->platform, sizeof out->platform, "%s", cfg->platforms[p]);
        char dir[PATH_MAX], fatbins_o[PATH_MAX + 16], what[96];
        snprintf(dir, sizeof dir, "%s/%s", cfg->work_dir, cfg->platforms[p]);
        snprintf(fatbins_o, sizeof fatbins_o, "%s/fatbins.o", dir);
        snprintf(out->library, sizeof out->library, "%s/" MD_LIBRARY_NAME, dir);
        if (!cfg->dry_run && (st = ensure_dir(dir, err)) != MD_OK)
            goto end;
        strv as = { 0 }, link = { 0 };
        ok = strv_add(&as, "%s", compilers[p]) && strv_add(&as, "-c") && strv_add(&as, "-o") &&
             strv_add(&as, "%s", fatbins_o) && strv_add(&as, "%s", asm_path) &&
             strv_add(&link, "%s", compilers[p]) && strv_add_all(&link, LINK_FLAGS) && strv_add(&link, "-o") &&
             strv_add(&link, "%s", out->library);
        for (size_t i = 0; ok && i < objects[p].n; i++)
            ok = strv_add(&link, "%s", objects[p].items[i]);
        ok = ok && strv_add(&link, "%s", fatbins_o) && strv_add_all(&link, LINK_LIBS);
        snprintf(what, sizeof what, "%s fatbins.o", cfg->platforms[p]);
        if (!ok || !add_step(pack, &as, NULL, what, fatbins_o, false, err)) {
            strv_free(as.items);
            strv_free(link.items);
            st = err->code ? err->code : md_fail(err, MD_ERR_NOMEM, "out of memory");
            goto end;
        }
        snprintf(what, sizeof what, "%s " MD_LIBRARY_NAME, cfg->platforms[p]);
        if (!add_step(pack, &link, NULL, what, out->library, false, err)) {
            strv_free(link.items);
            st = err->code;
            goto end;
        }
    }
    if (cfg->dry_run)
        goto end;

    unsigned jobs = cfg->jobs ? cfg->jobs : 1;
    if ((st = run_steps(compile, log_dir, jobs, result, err)) != MD_OK)
        goto end;
    /* The generator, then each platform's assembly and link, in that order. */
    for (size_t i = 0; i < pack->n && st == MD_OK; i++) {
        step_list one = { 0 };
        one.steps = &pack->steps[i];
        one.n = 1;
        one.envs[0] = pack->envs[i];
        st = run_steps(&one, log_dir, 1, result, err);
    }
    for (size_t p = 0; p < result->n_outputs && st == MD_OK; p++) {
        if ((st = check_manylinux(&result->outputs[p], err)) == MD_OK)
            st = write_wheel(cfg, &result->outputs[p], err);
    }
end:
    if (compile)
        move_steps(compile, result);
    if (pack)
        move_steps(pack, result);
    free(compile);
    free(pack);
    strv_free(sources);
    for (size_t p = 0; p < MD_MAX_PLATFORMS; p++)
        strv_free(objects[p].items);
    return st;
}

void md_build_result_free(md_build_result *result)
{
    for (size_t i = 0; i < result->n_steps; i++)
        strv_free(result->steps[i].argv);
    free(result->steps);
    memset(result, 0, sizeof *result);
}
