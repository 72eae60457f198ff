#include "toolkit.h"

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fetch/fetch_cache.h"
#include "base/process.h"
#include "base/strv.h"
#include "recipes/toolkit_table.h"

#define NVCC_TIMEOUT_S 60
#define GCC_MAJOR_MIN 5
#define GCC_MAJOR_MAX 20

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void dirname_of(const char *path, char *out, size_t size)
{
    snprintf(out, size, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash && slash != out)
        *slash = '\0';
}

/* Runs NVCC with ONE_ARG, its own folder first on PATH. */
static md_status ask_nvcc(const char *nvcc, const char *bin_dir, const char *one_arg, md_run_result *res,
                          md_error *err)
{
    const char *path = getenv("PATH");
    size_t len = strlen(bin_dir) + (path ? strlen(path) : 0) + 2;
    char *value = malloc(len);
    if (!value)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    snprintf(value, len, "%s:%s", bin_dir, path ? path : "/usr/bin:/bin");
    char **env = md_env_with_path(value);
    free(value);
    if (!env)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    char *argv[] = { (char *)(uintptr_t)nvcc, (char *)(uintptr_t)one_arg, NULL };
    md_status st = md_run_capture(argv, env, NVCC_TIMEOUT_S, 1 << 16, res, err);
    strv_free(env);
    if (st == MD_OK && res->exit_code != 0) {
        st = md_fail(err, MD_ERR_IO, "'%s %s' failed (exit %d)", nvcc, one_arg, res->exit_code);
        md_run_result_free(res);
    }
    return st;
}

unsigned md_toolkit_max_gcc(unsigned major, unsigned minor)
{
    const md_toolkit_row *row = md_toolkit_row_for(major, minor);
    return row ? row->max_gcc : 0;
}

void md_toolkits_supporting(unsigned sm, char *out, size_t size)
{
    const md_toolkit_row *oldest, *newest;
    if (!md_toolkit_rows_targeting(sm, &oldest, &newest))
        snprintf(out, size, "no CUDA toolkit in the table");
    else if (oldest == newest)
        snprintf(out, size, "CUDA %s", oldest->version);
    else
        snprintf(out, size, "CUDA %s to %s", oldest->version, newest->version);
}

bool md_toolkit_supports(const md_toolkit *tk, unsigned sm)
{
    for (size_t i = 0; i < tk->n_sms; i++)
        if (tk->sms[i] == sm)
            return true;
    return false;
}

static int compare_uint(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/* Reads one nvcc into TK. */
static md_status probe_nvcc(const char *nvcc, md_toolkit *tk, md_error *err)
{
    memset(tk, 0, sizeof *tk);
    if (!realpath(nvcc, tk->nvcc))
        return md_fail(err, MD_ERR_IO, "cannot resolve '%s'", nvcc);
    dirname_of(tk->nvcc, tk->bin_dir, sizeof tk->bin_dir);
    md_run_result res;
    md_status st = ask_nvcc(tk->nvcc, tk->bin_dir, "--version", &res, err);
    if (st != MD_OK)
        return st;
    const char *line = strstr(res.output, "release ");
    if (!line || sscanf(line, "release %u.%u", &tk->major, &tk->minor) != 2) {
        md_run_result_free(&res);
        return md_fail(err, MD_ERR_IO, "'%s --version' names no release", tk->nvcc);
    }
    const char *start = strstr(res.output, "Cuda compilation tools");
    if (!start)
        start = line;
    snprintf(tk->version_text, sizeof tk->version_text, "%.*s", (int)strcspn(start, "\n"), start);
    md_run_result_free(&res);
    snprintf(tk->version, sizeof tk->version, "%u.%u", tk->major, tk->minor);
    tk->max_gcc = md_toolkit_max_gcc(tk->major, tk->minor);

    st = ask_nvcc(tk->nvcc, tk->bin_dir, "--list-gpu-code", &res, err);
    if (st != MD_OK)
        return st;
    for (char *p = res.output; (p = strstr(p, "sm_")) != NULL; p += 3) {
        char *end;
        unsigned long sm = strtoul(p + 3, &end, 10);
        /* arch-specific (sm_90a) and family (sm_100f) targets are variants, not architectures */
        if (end != p + 3 && *end != 'a' && *end != 'f' && tk->n_sms < MD_MAX_SMS)
            tk->sms[tk->n_sms++] = (unsigned)sm;
    }
    md_run_result_free(&res);
    if (tk->n_sms == 0)
        return md_fail(err, MD_ERR_IO, "'%s --list-gpu-code' lists no architecture", tk->nvcc);
    qsort(tk->sms, tk->n_sms, sizeof *tk->sms, compare_uint);


    char up[PATH_MAX], candidate[PATH_MAX + 16];
    dirname_of(tk->bin_dir, up, sizeof up);
    snprintf(candidate, sizeof candidate, "%s/include/cuda.h", up);
    if (file_exists(candidate))
        snprintf(tk->include_dir, sizeof tk->include_dir, "%s/include", up);
    else if (file_exists("/usr/include/cuda.h")) /* Debian's nvidia-cuda-toolkit */
        snprintf(tk->include_dir, sizeof tk->include_dir, "/usr/include");
    return MD_OK;
}

typedef struct {
    md_toolkit *items;
    size_t count;
    char seen[16][PATH_MAX];    /* every nvcc already run, resolved: wrappers and links lead to one */
    size_t n_seen;
} toolkit_list;

static md_status consider(toolkit_list *list, const char *nvcc, bool required, md_error *err)
{
    if (access(nvcc, X_OK) != 0) {
        if (required)
            return md_fail(err, MD_ERR_ARGUMENT, "no nvcc in '%s'", nvcc);
        return MD_OK;
    }
    /* /usr/local/cuda, /usr/local/cuda-13, /bin and /usr/bin often lead to one nvcc: run it once */
    char real[PATH_MAX];
    if (realpath(nvcc, real)) {
        for (size_t i = 0; i < list->n_seen; i++)
            if (strcmp(list->seen[i], real) == 0)
                return MD_OK;
        if (list->n_seen < sizeof list->seen / sizeof list->seen[0])
            snprintf(list->seen[list->n_seen++], PATH_MAX, "%s", real);
    }
    md_toolkit tk;
    md_error probe_err;
    if (probe_nvcc(nvcc, &tk, &probe_err) != MD_OK) {
        if (required)
            return md_fail(err, MD_ERR_ARGUMENT, "%s", probe_err.message);
        return MD_OK; /* a broken nvcc somewhere on the machine is not our build's problem */
    }
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].major == tk.major && list->items[i].minor == tk.minor)
            return MD_OK;
    md_toolkit *grown = realloc(list->items, (list->count + 1) * sizeof *grown);
    if (!grown)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    list->items = grown;
    list->items[list->count++] = tk;
    return MD_OK;
}

static md_status consider_dir(toolkit_list *list, const char *dir, bool required, md_error *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/bin/nvcc", dir);
    if (access(path, X_OK) != 0)
        snprintf(path, sizeof path, "%s/nvcc", dir);
    return consider(list, path, required, err);
}

static md_status consider_path_list(toolkit_list *list, const char *paths, md_error *err)
{
    const char *p = paths;
    while (*p) {
        size_t len = strcspn(p, ":");
        if (len > 0) {
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%.*s", (int)len, p);
            md_status st = consider_dir(list, dir, false, err);
            if (st != MD_OK)
                return st;
        }
        p += len + (p[len] == ':');
    }
    return MD_OK;
}

/* The toolkits `fetch` put in its cache for a platform that runs here, the preferred platform of
 * a version first so that it wins; the others' nvcc would not run. An unreadable cache is no
 * toolkit, as an unreadable /usr/local/cuda* is. */
static md_status consider_cache(toolkit_list *list, md_error *err)
{
    char cache[PATH_MAX];
    md_cached_toolkit *cached;
    size_t n;
    md_status st = MD_OK;
    if (!md_fetch_cache_dir(cache, sizeof cache) || md_fetch_cache_list(cache, NULL, NULL, &cached, &n, NULL) != MD_OK)
        return MD_OK;
    for (size_t i = 0; i < n && st == MD_OK; i++)
        if (cached[i].host_rank >= 0)
            st = consider_dir(list, cached[i].path, false, err);
    free(cached);
    return st;
}

static int compare_toolkits(const void *a, const void *b)
{
    const md_toolkit *x = a, *y = b;
    unsigned vx = x->major * 100 + x->minor, vy = y->major * 100 + y->minor;
    return vx > vy ? -1 : vx < vy;
}

md_status md_toolkits_find(const char *const *extra_dirs, size_t n_extra, md_toolkit **out, size_t *count,
                           md_error *err)
{
    toolkit_list list = { 0 };
    md_status st = MD_OK;
    for (size_t i = 0; i < n_extra && st == MD_OK; i++)
        st = consider_dir(&list, extra_dirs[i], true, err);
    const char *only = getenv("MSDA_TOOLKIT_PATHS");
    if (st == MD_OK && only) {
        st = consider_path_list(&list, only, err);
    } else if (st == MD_OK) {
        const char *home = getenv("CUDA_HOME");
        if (home && *home)
            st = consider_dir(&list, home, false, err);
        glob_t g;
        if (st == MD_OK && glob("/usr/local/cuda*", GLOB_ONLYDIR, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc && st == MD_OK; i++)
                st = consider_dir(&list, g.gl_pathv[i], false, err);
            globfree(&g);
        }
        if (st == MD_OK)
            st = consider_dir(&list, "/usr/lib/nvidia-cuda-toolkit", false, err);
        const char *path = getenv("PATH");
        if (st == MD_OK && path)
            st = consider_path_list(&list, path, err);
        /* Last, so that an installed toolkit of the same version wins over a fetched one. */
        if (st == MD_OK)
            st = consider_cache(&list, err);
    }
    if (st != MD_OK) {
        free(list.items);
        return st;
    }
    if (list.count > 1)
        qsort(list.items, list.count, sizeof *list.items, compare_toolkits);
    *out = list.items;
    *count = list.count;
    return MD_OK;
}

static int compare_compilers(const void *a, const void *b)
{
    const md_host_compiler *x = a, *y = b;
    if (x->major != y->major)
        return x->major > y->major ? -1 : 1;
    return (int)y->is_default - (int)x->is_default;
}

md_status md_host_compilers_find(md_host_compiler **out, size_t *count, md_error *err)
{
    md_host_compiler *list = calloc(GCC_MAJOR_MAX - GCC_MAJOR_MIN + 2, sizeof *list);
    if (!list)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (unsigned v = GCC_MAJOR_MIN - 1; v <= GCC_MAJOR_MAX; v++) {
        char name[16], found[PATH_MAX];
        if (v == GCC_MAJOR_MIN - 1)
            snprintf(name, sizeof name, "g++");
        else
            snprintf(name, sizeof name, "g++-%u", v);
        if (md_which(name, found, sizeof found) != 0)
            continue;
        char *argv[] = { found, "-dumpversion", NULL };
        md_run_result res;
        if (md_run_capture(argv, NULL, 30, 256, &res, err) != MD_OK)
            continue;
        unsigned major = (unsigned)strtoul(res.output, NULL, 10);
        bool ok = res.exit_code == 0 && major > 0;
        md_run_result_free(&res);
        if (!ok)
            continue;
        md_host_compiler *c = &list[n++];
        snprintf(c->path, sizeof c->path, "%s", found);
        c->major = major;
        c->is_default = v == GCC_MAJOR_MIN - 1;
    }
    if (n > 1)
        qsort(list, n, sizeof *list, compare_compilers);
    *out = list;
    *count = n;
    return MD_OK;
}

void md_toolkit_probe_split_compile(md_toolkit *tk)
{
    md_run_result res;
    md_error err; /* an nvcc that does not answer --help only loses the option */
    tk->split_compile = false;
    if (ask_nvcc(tk->nvcc, tk->bin_dir, "--help", &res, &err) == MD_OK) {
        tk->split_compile = strstr(res.output, "--split-compile ") != NULL;
        md_run_result_free(&res);
    }
}
