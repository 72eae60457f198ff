#include "fetch_cache.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* "cuda-13.0" into 13 and 0; false for any other name. */
static bool folder_version(const char *name, unsigned *major, unsigned *minor)
{
    int used = 0;
    return strncmp(name, "cuda-", 5) == 0 && name[5] >= '0' && name[5] <= '9' &&
           sscanf(name + 5, "%3u.%3u%n", major, minor, &used) == 2 && name[5 + used] == '\0';
}

static int compare_cached(const void *a, const void *b)
{
    const md_cached_toolkit *x = a, *y = b;
    unsigned xm, xn, ym, yn;
    sscanf(x->version, "%u.%u", &xm, &xn);
    sscanf(y->version, "%u.%u", &ym, &yn);
    return xm != ym ? (xm < ym ? -1 : 1) : (xn < yn ? -1 : xn > yn);
}

md_status md_fetch_cache_list(const char *dir, md_cached_toolkit **out, size_t *count, md_error *err)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? MD_OK : md_fail(err, MD_ERR_IO, "cannot read '%s': %s", dir, strerror(errno));
    md_status st = MD_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && st == MD_OK) {
        unsigned major, minor;
        char path[PATH_MAX], nvcc[PATH_MAX + 16];
        struct stat sb;
        if (!folder_version(e->d_name, &major, &minor) ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || lstat(path, &sb) != 0 ||
            !S_ISDIR(sb.st_mode))
            continue;
        md_cached_toolkit *grown = realloc(*out, (*count + 1) * sizeof *grown);
        if (!grown) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            break;
        }
        *out = grown;
        md_cached_toolkit *t = &grown[(*count)++];
        snprintf(t->version, sizeof t->version, "%u.%u", major, minor);
        snprintf(t->path, sizeof t->path, "%s", path);
        snprintf(nvcc, sizeof nvcc, "%s/bin/nvcc", path);
        t->has_nvcc = access(nvcc, X_OK) == 0;
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

md_status md_fetch_cache_remove(const char *dir, const char *version, char *removed, size_t size, md_error *err)
{
    unsigned major, minor, patch;
    int used = 0;
    bool ok = version[0] >= '0' && version[0] <= '9' &&
              ((sscanf(version, "%3u.%3u%n", &major, &minor, &used) == 2 && version[used] == '\0') ||
               (used = 0, sscanf(version, "%3u.%3u.%3u%n", &major, &minor, &patch, &used) == 3 &&
                              version[used] == '\0'));
    if (!ok)
        return md_fail(err, MD_ERR_ARGUMENT, "'%s' is not a CUDA version such as 11.8", version);
    char folder[32];
    snprintf(folder, sizeof folder, "cuda-%u.%u", major, minor);
    struct stat sb;
    if (snprintf(removed, size, "%s/%s", dir, folder) >= (int)size)
        return md_fail(err, MD_ERR_ARGUMENT, "'%s' is too long a path", dir);
    if (lstat(removed, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return md_fail(err, MD_ERR_ARGUMENT, "CUDA %u.%u is not in '%s' (msda-doctor fetch --list shows what is)",
                       major, minor, dir);
    md_remove_tree(removed);
    if (lstat(removed, &sb) == 0)
        return md_fail(err, MD_ERR_IO, "cannot remove all of '%s'", removed);
    /* What an interrupted fetch of that version left: .cuda-X.Y-PLATFORM.download, .cuda-X.Y.tmp-*. */
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = strlen(folder);
    while (d && (e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        if (e->d_name[0] == '.' && strncmp(e->d_name + 1, folder, n) == 0 &&
            (e->d_name[1 + n] == '-' || strncmp(e->d_name + 1 + n, ".tmp-", 5) == 0) &&
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            md_remove_tree(path);
    }
    if (d)
        closedir(d);
    return MD_OK;
}
