#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fetch/fetch_cache.h"
#include "fetch/sha256_file.h"
#include "recipes/redist_table.h"
#include "unit.h"

/* A fresh folder under TMPDIR into DIR. */
static void temp_dir(char *dir, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, size, "%s/msda-fetch-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* DIR/REL as a folder, its parents made as needed, with a bin/nvcc when NVCC. */
static void make_folder(const char *dir, const char *rel, bool nvcc)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s%s", dir, rel, nvcc ? "/bin" : "");
    for (char *p = path + strlen(dir) + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        ck_assert(mkdir(path, 0755) == 0 || access(path, F_OK) == 0);
        *p = c;
        if (!c)
            break;
    }
    if (nvcc) {
        strncat(path, "/nvcc", sizeof path - strlen(path) - 1);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
        ck_assert_int_eq(chmod(path, 0755), 0);
    }
}

static bool exists(const char *dir, const char *rel)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return lstat(path, &sb) == 0;
}

static void remove_dir(const char *dir)
{
    md_remove_tree(dir);
    ck_assert(!exists(dir, ""));
}

/* The list as "VERSION PLATFORM RANK" lines, for one comparison per case. */
static void list_text(const md_cached_toolkit *t, size_t n, char *out, size_t size)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s %s %d%s\n", t[i].version, t[i].platform, t[i].host_rank,
                 t[i].has_nvcc ? "" : " no-nvcc");
}

START_TEST(paths_keep_each_platform_apart)
{
    md_fetch_paths a, b;
    md_error err;
    ck_assert_int_eq(md_fetch_cache_paths("/c", 12, 6, "linux-sbsa", &a, &err), MD_OK);
    ck_assert_int_eq(md_fetch_cache_paths("/c", 12, 6, "linux-x86_64", &b, &err), MD_OK);
    ck_assert_str_eq(a.version_dir, "/c/cuda/12.6");
    ck_assert_str_eq(a.toolkit, "/c/cuda/12.6/linux-sbsa");
    ck_assert_str_eq(a.download, "/c/cuda/12.6/.linux-sbsa.download");
    ck_assert_str_eq(a.staging, "/c/cuda/12.6/.linux-sbsa.tmp-XXXXXX");
    ck_assert_str_eq(b.version_dir, a.version_dir);
    ck_assert_str_ne(b.download, a.download);
    ck_assert_str_ne(b.staging, a.staging);
    char longdir[PATH_MAX];
    memset(longdir, 'x', sizeof longdir - 1);
    longdir[sizeof longdir - 1] = '\0';
    longdir[0] = '/';
    ck_assert_int_eq(md_fetch_cache_paths(longdir, 12, 6, "linux-sbsa", &a, &err), MD_ERR_ARGUMENT);
}
END_TEST

START_TEST(list_ranks_the_platforms_that_run_on_the_machine_first)
{
    char dir[PATH_MAX], text[1024];
    md_cached_toolkit *list;
    size_t n;
    md_error err;
    temp_dir(dir, sizeof dir);
    ck_assert_int_eq(md_fetch_cache_list(dir, NULL, "aarch64", &list, &n, &err), MD_OK);
    ck_assert_ptr_null(list);
    ck_assert_int_eq((int)n, 0);
    make_folder(dir, "cuda/12.6/linux-aarch64", true);
    make_folder(dir, "cuda/12.6/linux-x86_64", true);
    make_folder(dir, "cuda/12.6/linux-sbsa", true);
    make_folder(dir, "cuda/11.8/linux-x86_64", false);
    /* Not fetch's: a platform the recipe lacks, a version fetch would not name so, a temporary folder */
    make_folder(dir, "cuda/12.6/linux-mips", true);
    make_folder(dir, "cuda/12.06/linux-sbsa", true);
    make_folder(dir, "cuda/12.6/.linux-sbsa.tmp-abcdef", true);
    make_folder(dir, "cuda-13.0", true);

    /* aarch64 runs the server build first, Jetson's second, not x86_64's */
    ck_assert_int_eq(md_fetch_cache_list(dir, NULL, "aarch64", &list, &n, &err), MD_OK);
    list_text(list, n, text, sizeof text);
    ck_assert_str_eq(text, "11.8 linux-x86_64 -1 no-nvcc\n12.6 linux-sbsa 0\n12.6 linux-aarch64 1\n"
                           "12.6 linux-x86_64 -1\n");
    free(list);
    ck_assert_int_eq(md_fetch_cache_list(dir, NULL, "x86_64", &list, &n, &err), MD_OK);
    list_text(list, n, text, sizeof text);
    ck_assert_str_eq(text, "11.8 linux-x86_64 0 no-nvcc\n12.6 linux-x86_64 0\n12.6 linux-aarch64 -1\n"
                           "12.6 linux-sbsa -1\n");
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/cuda/12.6/linux-x86_64", dir);
    ck_assert_str_eq(list[1].path, want);
    free(list);
    ck_assert_int_eq(md_fetch_cache_list(dir, "linux-sbsa", "mips", &list, &n, &err), MD_OK);
    list_text(list, n, text, sizeof text);
    ck_assert_str_eq(text, "12.6 linux-sbsa -1\n");
    free(list);
    ck_assert_int_eq(md_fetch_cache_list(dir, "linux-mips", NULL, &list, &n, &err), MD_ERR_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "unknown platform 'linux-mips' (linux-x86_64, linux-sbsa or linux-aarch64)"));
    remove_dir(dir);
    md_redist_table_free();
}
END_TEST

START_TEST(remove_takes_one_platform_or_all_with_their_leftovers)
{
    char dir[PATH_MAX], text[1024];
    md_cached_toolkit *removed;
    size_t n;
    md_error err;
    temp_dir(dir, sizeof dir);
    make_folder(dir, "cuda/12.6/linux-sbsa", true);
    make_folder(dir, "cuda/12.6/.linux-sbsa.download", false);
    make_folder(dir, "cuda/12.6/.linux-sbsa.tmp-abcdef", true);
    make_folder(dir, "cuda/12.6/linux-x86_64", true);
    make_folder(dir, "cuda/12.6/.linux-aarch64.download", false);
    make_folder(dir, "cuda/11.8/linux-x86_64", true);

    ck_assert_int_eq(md_fetch_cache_remove(dir, "12.6.3", "linux-sbsa", &removed, &n, &err), MD_OK);
    list_text(removed, n, text, sizeof text);
    ck_assert_str_eq(text, "12.6 linux-sbsa -1 no-nvcc\n");
    free(removed);
    ck_assert(!exists(dir, "cuda/12.6/linux-sbsa") && !exists(dir, "cuda/12.6/.linux-sbsa.download") &&
              !exists(dir, "cuda/12.6/.linux-sbsa.tmp-abcdef"));
    /* another platform's toolkit and leftovers stay */
    ck_assert(exists(dir, "cuda/12.6/linux-x86_64") && exists(dir, "cuda/12.6/.linux-aarch64.download"));
    ck_assert_int_eq(md_fetch_cache_remove(dir, "12.6", "linux-sbsa", &removed, &n, &err), MD_ERR_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "CUDA 12.6 for linux-sbsa is not in"));
    ck_assert_ptr_null(removed);

    /* without a platform, every platform's, and the version's folder once empty */
    make_folder(dir, "cuda/12.6/linux-aarch64", true);
    ck_assert_int_eq(md_fetch_cache_remove(dir, "12.6", NULL, &removed, &n, &err), MD_OK);
    list_text(removed, n, text, sizeof text);
    ck_assert_str_eq(text, "12.6 linux-x86_64 -1 no-nvcc\n12.6 linux-aarch64 -1 no-nvcc\n");
    free(removed);
    ck_assert(!exists(dir, "cuda/12.6") && exists(dir, "cuda/11.8/linux-x86_64"));
    ck_assert_int_eq(md_fetch_cache_remove(dir, "12.6", NULL, &removed, &n, &err), MD_ERR_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "CUDA 12.6 is not in"));
    ck_assert_int_eq(md_fetch_cache_remove(dir, "11.8", "linux-mips", &removed, &n, &err), MD_ERR_ARGUMENT);
    ck_assert_int_eq(md_fetch_cache_remove(dir, "11.8/..", NULL, &removed, &n, &err), MD_ERR_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "is not a CUDA version"));
    ck_assert(exists(dir, "cuda/11.8/linux-x86_64"));
    /* the last one takes the top folder with it */
    ck_assert_int_eq(md_fetch_cache_remove(dir, "11.8", NULL, &removed, &n, &err), MD_OK);
    free(removed);
    ck_assert(!exists(dir, "cuda") && exists(dir, ""));
    remove_dir(dir);
    md_redist_table_free();
}
END_TEST

/* The sum that decides whether a download or a kept wheel is used: a file's bytes, and a read
 * that fails after the open (a folder opens, then reads EISDIR) is an error, not the empty sum. */
START_TEST(sha256_of_a_file_and_of_what_cannot_be_read)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], hex[65];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/abc", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("abc", f);
    fclose(f);
    md_error err;
    ck_assert_int_eq(md_sha256_file(path, hex, &err), MD_OK);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_int_eq(md_sha256_file(dir, hex, &err), MD_ERR_IO);
    ck_assert_msg(strstr(err.message, "cannot read '") && strstr(err.message, strerror(EISDIR)), "%s", err.message);
    snprintf(path, sizeof path, "%s/missing", dir);
    ck_assert_int_eq(md_sha256_file(path, hex, NULL), MD_ERR_IO);
    md_remove_tree(dir);
}
END_TEST

Suite *suite_fetch_cache(void)
{
    Suite *s = suite_create("fetch_cache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, paths_keep_each_platform_apart);
    tcase_add_test(tc, list_ranks_the_platforms_that_run_on_the_machine_first);
    tcase_add_test(tc, remove_takes_one_platform_or_all_with_their_leftovers);
    tcase_add_test(tc, sha256_of_a_file_and_of_what_cannot_be_read);
    suite_add_tcase(s, tc);
    return s;
}
