/* Out of memory inside the library, one allocation at a time, under ASan and LeakSanitizer.
 *
 * The unit tests are linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
 * (tests/tests.mk): every call the library's own code makes to those goes through the wrappers
 * below. They pass every call on, counting none, until a test calls fail_allocation(N): from then
 * the Nth counted call returns NULL with errno ENOMEM (the others succeed). A test sweeps N over
 * every allocation of one library call and checks each failure: the call says out of memory,
 * leaves nothing half made, and frees what it took (each test runs in a process of its own, which
 * LeakSanitizer checks when it exits: a leak fails the test). The release build's injector
 * (tests/faults/inject.c) fails allocations too, but cannot be used with the sanitizers, which
 * are what sees a leak; and a whole command makes thousands of allocations before these.
 * Allocations inside glibc (strdup, vasprintf, fopen) and jansson are not counted. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "build/build.h"
#include "fetch/fetch_cache.h"
#include "recipes/platform.h"
#include "recipes/product.h"
#include "unit.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

static unsigned long fail_at, counted;

/* Whether this allocation is the one to fail (counting only while a sweep is on). */
static int failing(void)
{
    if (!fail_at)
        return 0;
    if (++counted != fail_at)
        return 0;
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t size)
{
    return failing() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return failing() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    return failing() ? NULL : __real_realloc(p, size);
}

/* From now on, the Nth allocation fails; 0: none, and counting stops. */
static void fail_allocation(unsigned long n)
{
    fail_at = n;
    counted = 0;
}

/* Whether the failure asked for happened: the call made at least N allocations. */
static int failed_one(void)
{
    return counted >= fail_at;
}

/* ---- the platform table (recipes/platform.c) ------------------------------------------------ */

static const char platforms_json[] =
    "{\"platforms\": [{\"name\": \"x86_64\", \"machine\": 62, \"glibc_base\": \"2.2.5\", \"cross_compiler\": "
    "\"x86_64-linux-gnu-gcc\", \"qemu\": \"qemu-x86_64\", \"sysroot\": \"/usr/x86_64-linux-gnu\"}, "
    "{\"name\": \"aarch64\", \"machine\": 183, \"glibc_base\": \"2.17\", \"cross_compiler\": "
    "\"aarch64-linux-gnu-gcc\", \"qemu\": \"qemu-aarch64\", \"sysroot\": \"/usr/aarch64-linux-gnu\"}], "
    "\"manylinux_2_17_allowed_libraries\": [\"libc.so.6\", \"libm.so.6\"], \"glibc_pinned_symbols\": [\"dlopen\"]}";

START_TEST(platform_table_out_of_memory_at_each_allocation)
{
    json_error_t jerr;
    json_t *doc = json_loads(platforms_json, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    md_error err;
    ck_assert_int_eq(md_platform_table_load_json(doc, &err), MD_OK); /* the text is valid */
    md_platform_table_free();
    unsigned recipe_libraries = 0, recipe_symbols = 0;
    md_platform_allowed_libraries(&recipe_libraries);
    md_platform_pinned_symbols(&recipe_symbols);
    ck_assert_uint_gt(recipe_libraries, 2);
    ck_assert_uint_gt(recipe_symbols, 1);
    md_platform_table_free();
    unsigned long n;
    for (n = 1;; n++) {
        fail_allocation(n);
        md_status st = md_platform_table_load_json(doc, &err);
        const int hit = failed_one();
        fail_allocation(0);
        if (!hit) {
            ck_assert_int_eq(st, MD_OK);
            break;
        }
        ck_assert_msg(st == MD_ERR_NOMEM && strcmp(err.message, "out of memory") == 0,
                      "allocation %lu failing: status %d, '%s'", n, (int)st, err.message);
        /* nothing half loaded: the next use loads the recipe's own table, not what is left of
         * this one (whose lists are shorter) */
        unsigned libraries = 0, symbols = 0, count = 0;
        md_platform_allowed_libraries(&libraries);
        md_platform_pinned_symbols(&symbols);
        md_platform_all(&count);
        ck_assert_msg(libraries == recipe_libraries && symbols == recipe_symbols && count == 2,
                      "allocation %lu failing left part of the table: %u libraries, %u symbols", n, libraries,
                      symbols);
        md_platform_table_free();
    }
    /* the table (calloc), each platform's names and the two lists */
    ck_assert_uint_gt(n, 3);
    md_platform_table_free();
    json_decref(doc);
}
END_TEST

/* ---- the build's steps (build/build.c) -------------------------------------------------------- */

/* A fake CUDA 13.0 toolkit in DIR (an nvcc answering --version and --list-gpu-code, as
 * tests/cli/plan/fake-nvcc.bash's). */
static void fake_toolkit(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/bin", dir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/bin/nvcc", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#!/bin/sh\ncase \"$1\" in\n"
          "  --version) echo 'nvcc: NVIDIA (R) Cuda compiler driver'; echo 'Cuda compilation tools, release 13.0, V13.0.0' ;;\n"
          "  --list-gpu-code) for c in sm_75 sm_80 sm_86 sm_90 sm_100 sm_120; do echo $c; done ;;\n"
          "  *) exit 1 ;;\nesac\n",
          f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

/* Every allocation of a dry run's md_build_run (the compile and pack steps' argument vectors, the
 * step lists; the plan made before) failing in turn. Among them the realloc of md_steps_add
 * for the last step, the library's link, after which build.c frees the link's argument vector
 * itself: without that free LeakSanitizer fails this test. */
START_TEST(build_dry_run_out_of_memory_at_each_allocation)
{
    char tmp[] = "/tmp/msda-unit-alloc-XXXXXX", toolkit[PATH_MAX], out[PATH_MAX], cache[PATH_MAX], source[PATH_MAX];
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    snprintf(toolkit, sizeof toolkit, "%s/cuda-13.0", tmp);
    snprintf(out, sizeof out, "%s/dist", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    fake_toolkit(toolkit);
    ck_assert_int_eq(setenv("MSDA_TOOLKIT_PATHS", toolkit, 1), 0);
    /* the unit tests run from the repository's root (make check-unit, tests/mutation) */
    ck_assert_ptr_nonnull(realpath(".", source));
    ck_assert_msg(access("kernels/libmsda.json", R_OK) == 0, "run the unit tests from the repository's root");

    md_build_request req = md_build_request_defaults();
    req.arch = "sm_90";
    req.platforms = md_host_platform();
    req.source_dir = source;
    req.out_dir = out;
    req.cache_dir = cache;
    req.dry_run = true;
    req.jobs = 1;
    md_build_job job;
    md_error err;
    md_status st = md_build_prepare(&req, &job, &err);
    ck_assert_msg(st == MD_OK, "prepare: %s", err.message);

    md_build_result result;
    ck_assert_int_eq(md_build_run(&job.cfg, &result, &err), MD_OK);
    const size_t n_steps = result.n_steps;
    ck_assert_uint_gt(n_steps, 3);
    /* the last step is the library's link */
    ck_assert_msg(strstr(result.steps[n_steps - 1].what, MD_LIBRARY_NAME), "last step: %s",
                  result.steps[n_steps - 1].what);
    md_build_result_free(&result);

    unsigned long n;
    for (n = 1;; n++) {
        fail_allocation(n);
        st = md_build_run(&job.cfg, &result, &err);
        const int hit = failed_one();
        fail_allocation(0);
        if (!hit) {
            ck_assert_int_eq(st, MD_OK);
            ck_assert_uint_eq(result.n_steps, n_steps);
            md_build_result_free(&result);
            break;
        }
        /* a list cut short would print a dry run's commands with some missing, as if complete.
         * md_content_key (build_steps.c) answers only whether it could hash, so an allocation
         * failing there is told as a key it could not make: the one other message allowed. */
        ck_assert_msg(st == MD_ERR_NOMEM ? strstr(err.message, "out of memory") != NULL
                                         : st == MD_ERR_IO && strstr(err.message, "for the cache key"),
                      "allocation %lu failing: status %d, '%s'", n, (int)st, err.message);
        md_build_result_free(&result);
    }
    ck_assert_uint_gt(n, n_steps);
    md_build_job_free(&job);
    unsetenv("MSDA_TOOLKIT_PATHS");
    md_remove_tree(tmp);
    ck_assert_int_ne(access(tmp, F_OK), 0);
}
END_TEST

Suite *suite_alloc_failures(void)
{
    Suite *s = suite_create("alloc_failures");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, platform_table_out_of_memory_at_each_allocation);
    tcase_add_test(tc, build_dry_run_out_of_memory_at_each_allocation);
    suite_add_tcase(s, tc);
    return s;
}
