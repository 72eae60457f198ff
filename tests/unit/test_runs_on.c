/* The --gpu verdicts, on binaries described directly (the fixture tests check real ones). */
#include <stdlib.h>
#include <string.h>
#include "binary/runs_on.h"
#include "unit.h"

static md_binary bin;

static void add(md_code_kind kind, unsigned sm, char variant)
{
    md_code_entry *e = md_binary_add_entry(&bin);
    ck_assert_ptr_nonnull(e);
    e->kind = kind;
    e->sm = sm;
    e->variant = variant;
}

static void add_kernel(unsigned registers, unsigned max_threads)
{
    md_code_entry *e = &bin.entries[bin.n_entries - 1];
    e->kernels = realloc(e->kernels, (e->n_kernels + 1) * sizeof *e->kernels);
    md_kernel *k = &e->kernels[e->n_kernels++];
    memset(k, 0, sizeof *k);
    k->name = strdup("kernel");
    k->registers = registers;
    k->max_threads = max_threads;
}

static md_verdict verdict_on(unsigned sm)
{
    md_error err;
    ck_assert_int_eq(md_arch_table_load(&err), MD_OK);
    md_verdict v;
    ck_assert_int_eq(md_runs_on(&bin, md_arch_by_sm(sm), 0, &v, &err), MD_OK);
    return v;
}

/* Under a driver of CUDA version DRIVER_CUDA. */
static md_verdict verdict_with(unsigned sm, int driver_cuda)
{
    md_error err;
    ck_assert_int_eq(md_arch_table_load(&err), MD_OK);
    md_verdict v;
    ck_assert_int_eq(md_runs_on(&bin, md_arch_by_sm(sm), driver_cuda, &v, &err), MD_OK);
    return v;
}

/* The last entry was written by TOOLKIT (SASS) or is of ISA (PTX); its need as the readers set it. */
static void written_by(unsigned toolkit, unsigned abi, unsigned isa)
{
    md_code_entry *e = &bin.entries[bin.n_entries - 1];
    e->toolkit = toolkit;
    e->cubin_abi = abi;
    e->ptx_isa = isa;
    md_code_entry_settle_needs(e);
}

static void setup(void) { memset(&bin, 0, sizeof bin); }
static void teardown(void) { md_binary_free(&bin); }

START_TEST(sm52_only_cannot_run_on_61)
{
    add(MD_CODE_SASS, 52, 0);
    md_verdict v = verdict_on(61);
    ck_assert_int_eq(v.how, MD_RUNS_NOT);
    md_verdict_free(&v);
    v = verdict_on(53); /* same major, higher minor: runs */
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    md_verdict_free(&v);
}
END_TEST

START_TEST(sm61_with_ptx_runs_on_86_through_jit)
{
    add(MD_CODE_SASS, 61, 0);
    add(MD_CODE_PTX, 61, 0);
    md_verdict v = verdict_on(86);
    ck_assert_int_eq(v.how, MD_RUNS_PTX_JIT);
    ck_assert_uint_eq(v.code_sm, 61);
    md_verdict_free(&v);
    v = verdict_on(61);
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    md_verdict_free(&v);
    v = verdict_on(60); /* PTX above the device: not even JIT */
    ck_assert_int_eq(v.how, MD_RUNS_NOT);
    md_verdict_free(&v);
}
END_TEST

START_TEST(sm80_runs_on_86_and_not_on_90)
{
    add(MD_CODE_SASS, 80, 0);
    md_verdict v = verdict_on(86);
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    ck_assert_uint_eq(v.code_sm, 80);
    md_verdict_free(&v);
    v = verdict_on(90);
    ck_assert_int_eq(v.how, MD_RUNS_NOT);
    md_verdict_free(&v);
}
END_TEST

START_TEST(newest_compatible_sass_wins)
{
    add(MD_CODE_SASS, 80, 0);
    add(MD_CODE_SASS, 86, 0);
    add(MD_CODE_SASS, 89, 0);
    add(MD_CODE_PTX, 89, 0);
    md_verdict v = verdict_on(87);
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    ck_assert_uint_eq(v.code_sm, 86);
    md_verdict_free(&v);
}
END_TEST

/* Family code (sm_100f) runs on its family's later members (10.3), not on another family's
 * (12.0), whatever the minor number. */
START_TEST(family_code_only_within_its_family)
{
    for (int kind = 0; kind < 2; kind++) {
        add(kind ? MD_CODE_PTX : MD_CODE_SASS, 100, 'f');
        md_verdict v = verdict_on(103);
        ck_assert_int_eq(v.how, kind ? MD_RUNS_PTX_JIT : MD_RUNS_SASS);
        md_verdict_free(&v);
        v = verdict_on(120);
        ck_assert_int_eq(v.how, MD_RUNS_NOT);
        md_verdict_free(&v);
        md_binary_free(&bin);
        memset(&bin, 0, sizeof bin);
    }
}
END_TEST

/* Where plain and arch-specific SASS of the same number both run, the plain one is named: it is
 * what the driver picks on a device of a later variant, and either order in the file gives it. */
START_TEST(plain_sass_preferred_over_its_variant)
{
    for (int order = 0; order < 2; order++) {
        add(MD_CODE_SASS, 90, order ? 0 : 'a');
        add(MD_CODE_SASS, 90, order ? 'a' : 0);
        md_verdict v = verdict_on(90);
        ck_assert_int_eq(v.how, MD_RUNS_SASS);
        ck_assert_uint_eq(v.code_sm, 90);
        ck_assert_int_eq(v.code_variant, 0);
        md_verdict_free(&v);
        md_binary_free(&bin);
        memset(&bin, 0, sizeof bin);
    }
}
END_TEST

START_TEST(arch_specific_code_only_on_its_own_cc)
{
    add(MD_CODE_SASS, 90, 'a');
    add(MD_CODE_PTX, 90, 'a');
    md_verdict v = verdict_on(90);
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    ck_assert_int_eq(v.code_variant, 'a');
    md_verdict_free(&v);
    v = verdict_on(100);
    ck_assert_int_eq(v.how, MD_RUNS_NOT);
    md_verdict_free(&v);
}
END_TEST

START_TEST(regs40_1024_threads_too_many_on_62_fits_on_86)
{
    add(MD_CODE_SASS, 62, 0);
    add_kernel(40, 1024);
    add(MD_CODE_SASS, 86, 0);
    add_kernel(40, 1024);
    md_verdict v = verdict_on(62);
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    ck_assert_uint_eq(v.n_kernels, 1);
    ck_assert(!v.kernels[0].fits);
    ck_assert_uint_eq(v.kernels[0].registers_needed, 40960);
    ck_assert_uint_eq(v.kernels[0].registers_per_block, 32768);
    ck_assert_uint_eq(v.kernels[0].max_threads_that_fit, 800);
    ck_assert_uint_eq(v.n_not_fitting, 1);
    md_verdict_free(&v);
    v = verdict_on(86);
    ck_assert(v.kernels[0].fits);
    ck_assert_uint_eq(v.n_not_fitting, 0);
    md_verdict_free(&v);
}
END_TEST

START_TEST(no_bounds_is_checked_at_1024_threads)
{
    add(MD_CODE_SASS, 62, 0);
    add_kernel(33, 0);
    add_kernel(32, 0);
    md_verdict v = verdict_on(62);
    ck_assert_uint_eq(v.n_kernels, 2);
    ck_assert(!v.kernels[0].bounds_declared);
    ck_assert_uint_eq(v.kernels[0].threads, 1024);
    ck_assert(!v.kernels[0].fits); /* 33*32 = 1056 rounds up to 1280 per warp: 40960 */
    ck_assert(v.kernels[1].fits);  /* exactly 32K */
    md_verdict_free(&v);
}
END_TEST

START_TEST(block_register_arithmetic)
{
    ck_assert_uint_eq(md_block_registers(40, 1024), 40960);
    ck_assert_uint_eq(md_block_registers(32, 1024), 32768);
    ck_assert_uint_eq(md_block_registers(33, 1024), 40960); /* 33*32=1056 -> 1280 per warp */
    ck_assert_uint_eq(md_block_registers(255, 32), 8192);
    ck_assert_uint_eq(md_block_registers(10, 1), 512);
    ck_assert_uint_eq(md_threads_that_fit(64, 65536, 1024), 1024);
    ck_assert_uint_eq(md_threads_that_fit(64, 32768, 1024), 512);
    ck_assert_uint_eq(md_threads_that_fit(255, 32768, 1024), 128);
    /* not even one warp of 255 registers fits 4096: no thread count does */
    ck_assert_uint_eq(md_threads_that_fit(255, 4096, 1024), 0);
}
END_TEST

START_TEST(needs_follow_the_toolkit_tables)
{
    add(MD_CODE_SASS, 80, 0);
    written_by(11080, 7, 0);
    ck_assert_int_eq(bin.entries[0].needs_cuda, 11000);
    add(MD_CODE_SASS, 80, 0);
    written_by(13000, 8, 0);
    ck_assert_int_eq(bin.entries[1].needs_cuda, 13000);
    add(MD_CODE_SASS, 100, 0);
    written_by(0, 8, 0); /* ABI 8 of an unknown release: at least 12.8's rule */
    ck_assert_int_eq(bin.entries[2].needs_cuda, 12000);
    add(MD_CODE_SASS, 61, 0);
    written_by(0, 7, 0);
    ck_assert_int_eq(bin.entries[3].needs_cuda, 0);
    add(MD_CODE_PTX, 61, 0);
    written_by(0, 0, 65);
    ck_assert_int_eq(bin.entries[4].needs_cuda, 10020);
    add(MD_CODE_PTX, 90, 0);
    written_by(0, 0, 90);
    ck_assert_int_eq(bin.entries[5].needs_cuda, 13000);
}
END_TEST

START_TEST(driver_too_old_for_the_best_sass_takes_the_older_one)
{
    add(MD_CODE_SASS, 80, 0);
    written_by(13000, 8, 0);
    add_kernel(30, 0);
    add(MD_CODE_SASS, 80, 0);
    written_by(11080, 7, 0);
    add_kernel(40, 0);
    add_kernel(41, 0);
    md_verdict v = verdict_with(80, 12020);
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    ck_assert_uint_eq(v.code_toolkit, 11080);
    ck_assert_int_eq(v.code_needs_cuda, 11000);
    ck_assert_int_eq(v.passed_over.how, MD_RUNS_SASS);
    ck_assert_uint_eq(v.passed_over.toolkit, 13000);
    ck_assert_uint_eq(v.n_kernels, 2); /* the kernels of the code that runs, not of both */
    md_verdict_free(&v);
    v = verdict_with(80, 13000); /* a new driver runs the newest code, nothing passed over */
    ck_assert_uint_eq(v.code_toolkit, 13000);
    ck_assert_int_eq(v.passed_over.how, MD_RUNS_NOT);
    ck_assert_uint_eq(v.n_kernels, 1);
    md_verdict_free(&v);
    v = verdict_with(80, 0); /* no driver: the code that asks least */
    ck_assert_uint_eq(v.code_toolkit, 11080);
    ck_assert_int_eq(v.passed_over.how, MD_RUNS_NOT);
    md_verdict_free(&v);
}
END_TEST

START_TEST(driver_too_old_for_everything_cannot_run)
{
    add(MD_CODE_SASS, 80, 0);
    written_by(13000, 8, 0);
    add(MD_CODE_PTX, 75, 0);
    written_by(0, 0, 90);
    md_verdict v = verdict_with(80, 12020);
    ck_assert_int_eq(v.how, MD_RUNS_NOT);
    ck_assert_int_eq(v.passed_over.how, MD_RUNS_SASS);
    ck_assert_int_eq(v.passed_over.needs_cuda, 13000);
    md_verdict_free(&v);
    v = verdict_with(75, 12020); /* no SASS for sm_75: the passed-over code is the PTX */
    ck_assert_int_eq(v.how, MD_RUNS_NOT);
    ck_assert_int_eq(v.passed_over.how, MD_RUNS_PTX_JIT);
    ck_assert_uint_eq(v.passed_over.ptx_isa, 90);
    md_verdict_free(&v);
}
END_TEST

START_TEST(older_sass_through_lowered_ptx_on_a_cuda_102_driver)
{
    add(MD_CODE_SASS, 62, 0);
    written_by(11080, 7, 0);
    add(MD_CODE_PTX, 61, 0);
    written_by(0, 0, 65);
    md_verdict v = verdict_with(62, 10020);
    ck_assert_int_eq(v.how, MD_RUNS_PTX_JIT);
    ck_assert_uint_eq(v.code_sm, 61);
    ck_assert_uint_eq(v.code_ptx_isa, 65);
    ck_assert_int_eq(v.passed_over.how, MD_RUNS_SASS);
    ck_assert(!v.minor_version_compat);
    md_verdict_free(&v);
    v = verdict_with(62, 11040); /* r35: 11.8 SASS through minor-version compatibility */
    ck_assert_int_eq(v.how, MD_RUNS_SASS);
    ck_assert(v.minor_version_compat);
    md_verdict_free(&v);
}
END_TEST

Suite *suite_runs_on(void)
{
    Suite *s = suite_create("runs_on");
    TCase *tc = tcase_create("verdicts");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, sm52_only_cannot_run_on_61);
    tcase_add_test(tc, sm61_with_ptx_runs_on_86_through_jit);
    tcase_add_test(tc, sm80_runs_on_86_and_not_on_90);
    tcase_add_test(tc, newest_compatible_sass_wins);
    tcase_add_test(tc, arch_specific_code_only_on_its_own_cc);
    tcase_add_test(tc, family_code_only_within_its_family);
    tcase_add_test(tc, plain_sass_preferred_over_its_variant);
    tcase_add_test(tc, regs40_1024_threads_too_many_on_62_fits_on_86);
    tcase_add_test(tc, no_bounds_is_checked_at_1024_threads);
    tcase_add_test(tc, block_register_arithmetic);
    tcase_add_test(tc, needs_follow_the_toolkit_tables);
    tcase_add_test(tc, driver_too_old_for_the_best_sass_takes_the_older_one);
    tcase_add_test(tc, driver_too_old_for_everything_cannot_run);
    tcase_add_test(tc, older_sass_through_lowered_ptx_on_a_cuda_102_driver);
    suite_add_tcase(s, tc);
    return s;
}
