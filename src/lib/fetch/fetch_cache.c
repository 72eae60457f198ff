#include "fetch_cache.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "recipes/redist_table.h"

bool md_fetch_cache_dir(char *out, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(out, size, "%s/msda-doctor", xdg);
    else if (home && *home)
        n = snprintf(out, size, "%s/.cache/msda-doctor", home);
    else
        return false;
    return n > 0 && (size_t)n < size;
}

#define TOP_FOLDER "cuda"

md_status md_fetch_cache_paths(const char *dir, unsigned major, unsigned minor, const char *platform,
                               md_fetch_paths *out, md_error *err)
{
    int a = snprintf(out->version_dir, sizeof out->version_dir, "%s/" TOP_FOLDER "/%u.%u", dir, major, minor);
    bool fits = a > 0 && (size_t)a < sizeof out->version_dir;
    /* The platform's own names: two platforms' fetches of one version never share a folder. */
    fits = fits && (size_t)snprintf(out->toolkit, sizeof out->toolkit, "%s/%s", out->version_dir, platform) <
                       sizeof out->toolkit;
    fits = fits && (size_t)snprintf(out->download, sizeof out->download, "%s/.%s.download", out->version_dir,
                                    platform) < sizeof out->download;
    fits = fits && (size_t)snprintf(out->staging, sizeof out->staging, "%s/.%s.tmp-XXXXXX", out->version_dir,
                                    platform) < sizeof out->staging;
    return fits ? MD_OK : md_fail(err, MD_ERR_ARGUMENT, "'%s' is too long a path", dir);
}

/* "13.0" into 13 and 0; false for any other name, "13.00" included (it is not a folder fetch makes). */
static bool folder_version(const char *name, unsigned *major, unsigned *minor)
{
    int used = 0;
    char again[16];
    return name[0] >= '0' && name[0] <= '9' && sscanf(name, "%3u.%3u%n", major, minor, &used) == 2 &&
           name[used] == '\0' && snprintf(again, sizeof again, "%u.%u", *major, *minor) > 0 &&
           strcmp(again, name) == 0;
}

static int compare_cached(const void *a, const void *b)
{
    const md_cached_toolkit *x = a, *y = b;
    unsigned xm, xn, ym, yn;
    sscanf(x->version, "%u.%u", &xm, &xn);
    sscanf(y->version, "%u.%u", &ym, &yn);
    if (xm != ym || xn != yn)
        return xm != ym ? (xm < ym ? -1 : 1) : (xn < yn ? -1 : 1);
    /* Within a version: what runs here, preferred first; then the others by name. */
    if ((x->host_rank < 0) != (y->host_rank < 0))
        return x->host_rank < 0 ? 1 : -1;
    if (x->host_rank != y->host_rank)
        return x->host_rank < y->host_rank ? -1 : 1;
    return strcmp(x->platform, y->platform);
}

static bool is_folder(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Appends the toolkit folder PATH of VERSION and PLATFORM to *LIST. */
static md_status append(md_cached_toolkit **list, size_t *count, const char *version, const char *platform,
                        const char *path, int rank, md_error *err)
{
    md_cached_toolkit *grown = realloc(*list, (*count + 1) * sizeof *grown);
    if (!grown)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    *list = grown;
    md_cached_toolkit *t = &grown[(*count)++];
    char nvcc[PATH_MAX + 16];
    snprintf(t->version, sizeof t->version, "%s", version);
    snprintf(t->platform, sizeof t->platform, "%s", platform);
    snprintf(t->path, sizeof t->path, "%s", path);
    snprintf(nvcc, sizeof nvcc, "%s/bin/nvcc", path);
    t->has_nvcc = access(nvcc, X_OK) == 0;
    t->host_rank = rank;
    return MD_OK;
}

/* TABLE's platform PLATFORM, or an error naming those there are. */
static md_status known_platform(const md_redist_table *table, const char *platform, md_error *err)
{
    char names[128];
    if (md_redist_platform_known(table, platform))
        return MD_OK;
    md_redist_platform_names(table, names, sizeof names);
    return md_fail(err, MD_ERR_ARGUMENT, "unknown platform '%s' (%s)", platform, names);
}

md_status md_fetch_cache_list(const char *dir, const char *platform, const char *machine, md_cached_toolkit **out,
                              size_t *count, md_error *err)
{
    *out = NULL;
    *count = 0;
    const md_redist_table *table = md_redist_table_get(err);
    if (!table)
        return err ? err->code : MD_ERR_INTERNAL;
    md_status st = platform ? known_platform(table, platform, err) : MD_OK;
    if (st != MD_OK)
        return st;
    struct utsname u;
    if (!machine)
        machine = uname(&u) == 0 ? u.machine : "";
    char top[PATH_MAX];
    if (snprintf(top, sizeof top, "%s/" TOP_FOLDER, dir) >= (int)sizeof top)
        return md_fail(err, MD_ERR_ARGUMENT, "'%s' is too long a path", dir);
    DIR *d = opendir(top);
    if (!d)
        return errno == ENOENT ? MD_OK : md_fail(err, MD_ERR_IO, "cannot read '%s': %s", top, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL && st == MD_OK) {
        unsigned major, minor;
        md_fetch_paths paths;
        if (!folder_version(e->d_name, &major, &minor))
            continue;
        for (size_t i = 0; i < table->n_platforms && st == MD_OK; i++) {
            const char *p = table->platforms[i];
            if ((!platform || strcmp(p, platform) == 0) &&
                md_fetch_cache_paths(dir, major, minor, p, &paths, NULL) == MD_OK && is_folder(paths.toolkit))
                st = append(out, count, e->d_name, p, paths.toolkit, md_redist_host_rank(table, machine, p), err);
        }
    }
    closedir(d);
    if (st != MD_OK) {
        free(*out);
        *out = NULL;
        *count = 0;
        return st;
    }
    if (*count > 1)
        qsort(*out, *count, sizeof **out, compare_cached);
    return MD_OK;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void md_remove_tree(const char *path)
{
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The temporary folders in PATHS' version folder that unpacking for PATHS' platform left. */
static void remove_leftovers(const md_fetch_paths *paths)
{
    const char *base = strrchr(paths->staging, '/') + 1;
    size_t n = strlen(base) - strlen("XXXXXX");
    md_remove_tree(paths->download);
    DIR *d = opendir(paths->version_dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        if (strncmp(e->d_name, base, n) == 0 &&
            snprintf(path, sizeof path, "%s/%s", paths->version_dir, e->d_name) < (int)sizeof path)
            md_remove_tree(path);
    }
    if (d)
        closedir(d);
}

md_status md_fetch_cache_remove(const char *dir, const char *version, const char *platform,
                                md_cached_toolkit **removed, size_t *count, md_error *err)
{
    *removed = NULL;
    *count = 0;
    unsigned major, minor, patch;
    int used = 0;
    bool ok = version[0] >= '0' && version[0] <= '9' &&
              ((sscanf(version, "%3u.%3u%n", &major, &minor, &used) == 2 && version[used] == '\0') ||
               (used = 0, sscanf(version, "%3u.%3u.%3u%n", &major, &minor, &patch, &used) == 3 &&
                              version[used] == '\0'));
    if (!ok)
        return md_fail(err, MD_ERR_ARGUMENT, "'%s' is not a CUDA version such as 11.8", version);
    const md_redist_table *table = md_redist_table_get(err);
    if (!table)
        return err ? err->code : MD_ERR_INTERNAL;
    md_status st = platform ? known_platform(table, platform, err) : MD_OK;
    if (st != MD_OK)
        return st;
    char wanted[16];
    snprintf(wanted, sizeof wanted, "%u.%u", major, minor);
    md_fetch_paths paths;
    /* First what is there, so that a version that is not leaves everything as it was. */
    bool any = false;
    for (size_t i = 0; i < table->n_platforms && st == MD_OK; i++) {
        const char *p = table->platforms[i];
        if (!platform || strcmp(p, platform) == 0) {
            st = md_fetch_cache_paths(dir, major, minor, p, &paths, err);
            any = any || (st == MD_OK && is_folder(paths.toolkit));
        }
    }
    if (st != MD_OK)
        return st;
    if (!any)
        return md_fail(err, MD_ERR_ARGUMENT, "CUDA %s%s%s is not in '%s' (msda-doctor fetch --list shows what is)",
                       wanted, platform ? " for " : "", platform ? platform : "", dir);
    for (size_t i = 0; i < table->n_platforms && st == MD_OK; i++) {
        const char *p = table->platforms[i];
        if ((platform && strcmp(p, platform) != 0) ||
            (st = md_fetch_cache_paths(dir, major, minor, p, &paths, err)) != MD_OK)
            continue;
        remove_leftovers(&paths);
        if (!is_folder(paths.toolkit))
            continue;
        md_remove_tree(paths.toolkit);
        if (is_folder(paths.toolkit))
            st = md_fail(err, MD_ERR_IO, "cannot remove all of '%s'", paths.toolkit);
        else
            st = append(removed, count, wanted, p, paths.toolkit, -1, err);
    }
    /* Gone once empty, and the top folder with it; a folder still holding something stays. */
    rmdir(paths.version_dir);
    char top[PATH_MAX];
    if (snprintf(top, sizeof top, "%s/" TOP_FOLDER, dir) < (int)sizeof top)
        rmdir(top);
    if (st != MD_OK) {
        free(*removed);
        *removed = NULL;
        *count = 0;
    }
    return st;
}
