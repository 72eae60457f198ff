/* Which embedded image libmsda loads, by GPU and driver: libmsda against the fake driver of
 * tests/fakes/fakelaunch.c, which takes or refuses each fatbin as a driver of the given CUDA
 * version does (docs/FACTS.md, "Drivers and the code each toolkit writes"), on the fatbins of the
 * wheel `make` built (shipped-fatbins.o, `build --arch all`). Each test runs in a process of its
 * own (Check's fork mode); each case is a new context, so the module is loaded again.
 * MSDA_PRINT_IMAGE_TABLE=1 prints the architecture x driver table as Markdown
 * (make image-table). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakelaunch.h"
#include "msda_driver.h"
#include "msda_module.h"
#include "kt.h"

static fake_launch_set_device_fn set_device;
static fake_launch_set_config_fn set_config;

/* sm_90's device config: any valid one will do, nothing is launched. */
static const msda_device_config any_config = {
    .abi = MSDA_DEVICE_ABI, .arch = 90, .max_threads = 256, .f16_enabled = 1, .bf16_enabled = 1,
    .f16_atomic = MSDA_ATOMIC_MIXED, .bf16_atomic = MSDA_ATOMIC_MIXED, .vector_atomics = 1,
    .points16_waves = 16, .backward_spread_log2 = 7, .bf16_half_sums = 1, .backward_head_phases_log2 = 1};

static void load_fake_driver(void) {
    const char *path = getenv("MSDA_FAKE_LAUNCH_DRIVER");
    ck_assert_msg(path && *path, "MSDA_FAKE_LAUNCH_DRIVER is not set: run these tests with make check-kernels");
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    ck_assert_msg(lib, "cannot load the fake driver: %s", dlerror());
    *(void **)&set_config = dlsym(lib, "fake_launch_set_config");
    *(void **)&set_device = dlsym(lib, "fake_launch_set_device");
    ck_assert(set_config && set_device);
    set_config(&any_config, sizeof any_config);
}

/* The image a device of compute capability CC loads with a driver of CUDA version CUDA (and the
 * fake's FLAGS), as its label and architecture ("CUDA 11.8 SASS sm_86"), or "none" with the
 * loader's message in WHY. */
static void pick(int cc, int cuda, int flags, char *out, size_t size, char *why, size_t why_size) {
    const msda_driver *drv;
    const msda_module *mod;
    msda_error err;
    set_device(cc, cuda, flags);
    ck_assert_int_eq(msda_driver_get(&drv, &err), MSDA_OK);
    why[0] = '\0';
    const msda_status st = msda_module_get(drv, &mod, &err);
    if (st != MSDA_OK) {
        ck_assert_msg(st == MSDA_ERR_NO_KERNEL_IMAGE, "sm_%d, CUDA %d: status %d: %s", cc, cuda, st, err.message);
        snprintf(out, size, "none");
        snprintf(why, why_size, "%s", err.message);
        return;
    }
    char label[32];
    msda_arch archs[64];
    const int n = msda_embedded_archs(archs, 64);
    int arch = 0;
    for (int i = 0; i < n && i < 64; i++)
        if (archs[i].fatbin == mod->fatbin) arch = archs[i].arch;
    msda_fatbin_label((uint32_t)mod->fatbin, label, sizeof label);
    snprintf(out, size, "%s %s_%d", label, msda_fatbin_table[mod->fatbin].ptx_isa ? "compute" : "sm", arch);
}

static void expect(int cc, int cuda, int flags, const char *want) {
    char got[64], why[320];
    pick(cc, cuda, flags, got, sizeof got, why, sizeof why);
    ck_assert_msg(strcmp(got, want) == 0, "sm_%d with a CUDA %d.%d driver: loaded '%s', expected '%s' %s", cc,
                  cuda / 1000, cuda % 1000 / 10, got, want, why);
}

/* The driver branches of the table: a name, its CUDA version, and whether it is a Jetson's. */
static const struct {
    const char *name;
    int cuda;
} branches[] = {{"r32", 10020}, {"r35", 11040}, {"450", 11000}, {"470", 11040}, {"525", 12000},
                {"535", 12020}, {"550", 12040}, {"570", 12080}, {"580", 13000}};
#define N_BRANCHES (sizeof branches / sizeof branches[0])

START_TEST(newer_drivers_get_the_newest_sass_and_older_ones_the_sass_they_read) {
    load_fake_driver();
    /* A100, A10, H100 and T4: 13.0 SASS from 580 on, 11.8 SASS on every driver from 450 on. */
    expect(80, 13000, 0, "CUDA 13.0 SASS sm_80");
    expect(80, 12020, 0, "CUDA 11.8 SASS sm_80");
    expect(86, 12080, 0, "CUDA 11.8 SASS sm_86");
    expect(90, 12040, 0, "CUDA 11.8 SASS sm_90");
    expect(90, 13000, 0, "CUDA 13.0 SASS sm_90");
    expect(75, 11000, 0, "CUDA 11.8 SASS sm_75");
    expect(89, 11040, 0, "CUDA 11.8 SASS sm_89");
    /* P40 and V100 have 11.8 SASS only. */
    expect(61, 13000, 0, "CUDA 11.8 SASS sm_61");
    expect(70, 11000, 0, "CUDA 11.8 SASS sm_70");
    /* Blackwell: 13.0 SASS; before 580, only PTX that the driver JIT-compiles. */
    expect(100, 13000, 0, "CUDA 13.0 SASS sm_100");
    expect(120, 13000, 0, "CUDA 13.0 SASS sm_120");
}
END_TEST

START_TEST(a_cuda_10_2_driver_jit_compiles_the_isa_6_5_ptx) {
    load_fake_driver();
    /* Jetson r32: TX1/Nano, TX2, Xavier. */
    expect(53, 10020, FAKE_DRIVER_NO_MINOR_COMPAT, "PTX ISA 6.5 compute_53");
    expect(62, 10020, FAKE_DRIVER_NO_MINOR_COMPAT, "PTX ISA 6.5 compute_62");
    expect(72, 10020, FAKE_DRIVER_NO_MINOR_COMPAT, "PTX ISA 6.5 compute_72");
    /* Xavier on r35 (11.4): the 11.8 SASS by minor-version compatibility. */
    expect(72, 11040, 0, "CUDA 11.8 SASS sm_72");
}
END_TEST

/* Images the headers say the driver takes, which it refuses all the same (200, 300, 222), are
 * passed over for the next: a driver that keeps to its own version, or one that does not say it. */
START_TEST(a_refused_image_is_passed_over_for_the_next) {
    load_fake_driver();
    /* r35 without minor-version compatibility refuses the 11.8 SASS (300); the PTX takes over. */
    expect(72, 11040, FAKE_DRIVER_NO_MINOR_COMPAT, "PTX ISA 6.5 compute_72");
    /* A 12.2 driver that hides its version: the 13.0 SASS is tried and refused (200). */
    expect(86, 12020, FAKE_DRIVER_HIDES_VERSION, "CUDA 11.8 SASS sm_86");
    /* An 11.4 one on sm_120: 13.0 SASS refused (200), 13.0 PTX refused (222), then 6.5 PTX. */
    expect(120, 11040, FAKE_DRIVER_HIDES_VERSION, "PTX ISA 6.5 compute_72");
}
END_TEST

START_TEST(when_nothing_loads_the_error_names_the_driver_the_gpu_and_each_image) {
    load_fake_driver();
    char got[64], why[320];
    /* sm_50 (Maxwell) on a 10.2 driver: its 11.8 SASS needs 11.0 and no PTX is at or below it. */
    pick(50, 10020, FAKE_DRIVER_NO_MINOR_COMPAT, got, sizeof got, why, sizeof why);
    ck_assert_str_eq(got, "none");
    ck_assert_msg(strstr(why, "sm_50") && strstr(why, "CUDA 10.2 driver") && strstr(why, "CUDA 11.8 SASS needs CUDA 11.0"),
                  "%s", why);
    /* A driver that hides its version and refuses everything: the refusals are named. */
    pick(50, 10020, FAKE_DRIVER_HIDES_VERSION | FAKE_DRIVER_NO_MINOR_COMPAT, got, sizeof got, why, sizeof why);
    ck_assert_str_eq(got, "none");
    ck_assert_msg(strstr(why, "a driver of unknown version") && strstr(why, "CUDA 11.8 SASS: CUDA_ERROR_INVALID_SOURCE"), "%s",
                  why);
}
END_TEST

START_TEST(msda_image_forces_one_kind_of_image) {
    load_fake_driver();
    char got[64], why[320];
    setenv(MSDA_IMAGE_ENV, "sass:11.8", 1);
    expect(90, 13000, 0, "CUDA 11.8 SASS sm_90");
    setenv(MSDA_IMAGE_ENV, "ptx:6.5", 1);
    expect(90, 13000, 0, "PTX ISA 6.5 compute_72");
    setenv(MSDA_IMAGE_ENV, "ptx:9.0", 1);
    expect(90, 13000, 0, "PTX ISA 9.0 compute_75");
    setenv(MSDA_IMAGE_ENV, "sass:13.0", 1);
    expect(90, 13000, 0, "CUDA 13.0 SASS sm_90");
    /* Forced, and the driver too old for it: nothing else is tried. */
    pick(90, 12020, 0, got, sizeof got, why, sizeof why);
    ck_assert_str_eq(got, "none");
    ck_assert_msg(strstr(why, "MSDA_IMAGE=sass:13.0") && strstr(why, "needs CUDA 13.0"), "%s", why);
    setenv(MSDA_IMAGE_ENV, "sass:12.4", 1);
    pick(90, 13000, 0, got, sizeof got, why, sizeof why);
    ck_assert_msg(strstr(why, "the library has no such image"), "%s", why);
    /* A malformed value is the caller's mistake, said as such. */
    setenv(MSDA_IMAGE_ENV, "cuda-11.8", 1);
    const msda_driver *drv;
    const msda_module *mod;
    msda_error err;
    set_device(90, 13000, 0);
    ck_assert_int_eq(msda_driver_get(&drv, &err), MSDA_OK);
    ck_assert_int_eq(msda_module_get(drv, &mod, &err), MSDA_ERR_BAD_ARGUMENT);
    ck_assert_msg(strstr(err.message, "MSDA_IMAGE='cuda-11.8'"), "%s", err.message);
    unsetenv(MSDA_IMAGE_ENV);
}
END_TEST

/* Every architecture of the table loads something on every driver from 450 on, SASS where the
 * driver reads SASS for it. One architecture a run (a loop test: a process each, as libmsda keeps
 * at most 64 contexts); with MSDA_PRINT_IMAGE_TABLE set, each prints its row of the table. */
static const int table_archs[] = {53, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 120};
#define N_TABLE_ARCHS (int)(sizeof table_archs / sizeof table_archs[0])

START_TEST(every_gpu_from_maxwell_loads_an_image_on_every_driver_from_450) {
    const int arch = table_archs[_i];
    load_fake_driver();
    const int print = getenv("MSDA_PRINT_IMAGE_TABLE") != NULL;
    if (print && _i == 0) {
        printf("\n| arch |");
        for (size_t d = 0; d < N_BRANCHES; d++) printf(" %s |", branches[d].name);
        printf("\n|---|");
        for (size_t d = 0; d < N_BRANCHES; d++) printf("---|");
        printf("\n");
    }
    if (print) printf("| sm_%d |", arch);
    for (size_t d = 0; d < N_BRANCHES; d++) {
        char got[64], why[320];
        const int tegra = branches[d].name[0] == 'r';
        pick(arch, branches[d].cuda, 0, got, sizeof got, why, sizeof why);
        if (print) printf(" %s |", strcmp(got, "none") == 0 ? "-" : got);
        if (!tegra && branches[d].cuda >= 11000)
            ck_assert_msg(strcmp(got, "none") != 0, "sm_%d on %s: %s", arch, branches[d].name, why);
        /* SASS wherever there is SASS the driver reads: no JIT where it is not needed. */
        if (branches[d].cuda >= 11000 && arch <= 90)
            ck_assert_msg(strstr(got, "SASS") != NULL, "sm_%d on %s: %s", arch, branches[d].name, got);
        /* The best code on the newest driver: the newest toolkit's SASS of the architecture. */
        if (branches[d].cuda >= 13000 && arch >= 75)
            ck_assert_msg(strncmp(got, "CUDA 13.0 SASS", 14) == 0, "sm_%d on %s: %s", arch, branches[d].name, got);
    }
    if (print) printf("\n");
    fflush(stdout);
}
END_TEST

/* Every image is MSDA_PART_COUNT fatbins (kernels/msda_parts.h), distinct and of the same
 * architectures; each kernel is in the part the loader looks it up in: f16's kernels and bf16's
 * deterministic backward in MSDA_PART_F16, the rest in MSDA_PART_MAIN. The fake driver finds a
 * kernel only in the module that has it (where another module of the context has it). */
START_TEST(each_image_is_its_parts_and_each_kernel_is_in_its_own) {
    for (uint32_t i = 0; i < msda_fatbin_table_count; i++) {
        const msda_fatbin_ref *f = &msda_fatbin_table[i];
        ck_assert_uint_eq(f->parts, MSDA_PART_COUNT);
        for (uint32_t p = 0; p < f->parts; p++) {
            ck_assert_uint_gt(f->blobs[p].size, 16);
            for (uint32_t q = 0; q < p; q++)
                ck_assert(f->blobs[p].size != f->blobs[q].size ||
                          memcmp(f->blobs[p].data, f->blobs[q].data, f->blobs[p].size) != 0);
        }
    }
    load_fake_driver();
    set_device(90, 13000, 0);
    const msda_driver *drv;
    msda_error err;
    ck_assert_int_eq(msda_driver_get(&drv, &err), MSDA_OK);
    const msda_fatbin_ref *sm90 = NULL;
    for (uint32_t i = 0; i < msda_fatbin_table_count && !sm90; i++)
        if (msda_fatbin_table[i].toolkit == 13000 && !msda_fatbin_table[i].ptx_isa && msda_fatbin_runs_on(i, 90) == 1)
            sm90 = &msda_fatbin_table[i];
    ck_assert_ptr_nonnull(sm90);
    CUmodule parts[MSDA_PART_COUNT];
    for (int p = 0; p < MSDA_PART_COUNT; p++) ck_assert_int_eq(drv->ModuleLoadData(&parts[p], sm90->blobs[p].data), CUDA_SUCCESS);
    static const struct {
        const char *name;
        int part;
    } kernels[] = {{"msda_forward_f32_v4", MSDA_PART_MAIN},        {"msda_backward_f64_exact_v2", MSDA_PART_MAIN},
                   {"msda_backward_bf16_buffer_v4", MSDA_PART_MAIN}, {"msda_backward_bf16_half_v4", MSDA_PART_MAIN},
                   {"msda_forward_points_bf16_v8", MSDA_PART_MAIN}, {"msda_forward_f16_v8", MSDA_PART_F16},
                   {"msda_gather_replicas_f16", MSDA_PART_F16},     {"msda_backward_bf16_exact_v4", MSDA_PART_F16},
                   {"msda_exact_finish_bf16", MSDA_PART_F16},       {"msda_restride", MSDA_PART_MAIN}};
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++)
        for (int p = 0; p < MSDA_PART_COUNT; p++) {
            CUfunction fn;
            ck_assert_msg(drv->ModuleGetFunction(&fn, parts[p], kernels[k].name) ==
                              (p == kernels[k].part ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND),
                          "%s in part %d", kernels[k].name, p);
        }
    for (int p = 0; p < MSDA_PART_COUNT; p++) ck_assert_int_eq(drv->ModuleUnload(parts[p]), CUDA_SUCCESS);
    /* The loader finds every kernel of the image in its part. */
    const msda_module *mod;
    ck_assert_msg(msda_module_get(drv, &mod, &err) == MSDA_OK, "%s", err.message);
}
END_TEST

/* An image built for the f32-buffer strategy (sm_61's, CUDA 11.8: no 16-bit atomics) has no mixed
 * 16-bit backward (msda_kernels.cu), and the loader, given that image's strategy, looks for none:
 * under FAKE_DRIVER_OWN_KERNELS a kernel the image lacks is not found, as on a GPU, so the module
 * loads only where the loader asks for exactly what was built. The same image with a config that
 * claims the mixed strategy is refused: the check can fail. */
START_TEST(an_f32_buffer_image_loads_with_no_mixed_16bit_backward) {
    load_fake_driver();
    msda_device_config own = any_config;
    own.arch = 61;
    own.f16_atomic = own.bf16_atomic = MSDA_ATOMIC_F32_BUFFER;
    own.vector_atomics = 0, own.bf16_half_sums = 0, own.f16_replica_adds = own.bf16_replica_adds = 0;
    set_config(&own, sizeof own);
    expect(61, 11080, FAKE_DRIVER_OWN_KERNELS, "CUDA 11.8 SASS sm_61");
    msda_device_config claims_mixed = own;
    claims_mixed.f16_atomic = MSDA_ATOMIC_MIXED;
    set_config(&claims_mixed, sizeof claims_mixed);
    set_device(61, 11080, FAKE_DRIVER_OWN_KERNELS);
    const msda_driver *drv;
    const msda_module *mod;
    msda_error err;
    ck_assert_int_eq(msda_driver_get(&drv, &err), MSDA_OK);
    ck_assert_int_ne(msda_module_get(drv, &mod, &err), MSDA_OK);
    ck_assert_msg(strstr(err.message, "msda_backward_f16_v"), "%s", err.message);
}
END_TEST

/* Every image loads with its own msda_config (which the fake reads from the cubin's symbol or the
 * PTX's initialiser) where a kernel the image lacks is not found, as on a GPU: the loader asks
 * each image for exactly the kernels its configuration says were built (kernel_built against
 * msda_kernels.cu's conditions: strategies, half sums, replicas). On every driver branch, the
 * image each architecture loads so is the one it loads under the test's configuration (the
 * SASS of each toolkit, the newest PTX, r32's ISA 6.5 PTX). */
START_TEST(every_image_loads_with_its_own_configuration) {
    const int arch = table_archs[_i];
    load_fake_driver();
    for (size_t d = 0; d < N_BRANCHES; d++) {
        char want[64], got[64], why[320];
        pick(arch, branches[d].cuda, 0, want, sizeof want, why, sizeof why);
        pick(arch, branches[d].cuda, FAKE_DRIVER_OWN_KERNELS | FAKE_DRIVER_OWN_CONFIG, got, sizeof got, why, sizeof why);
        ck_assert_msg(strcmp(got, want) == 0, "sm_%d on %s, own configuration: loaded '%s', expected '%s' %s", arch,
                      branches[d].name, got, want, why);
    }
}
END_TEST

TCase *kt_tcase_images(void) {
    TCase *tc = tcase_create("images");
    tcase_add_test(tc, newer_drivers_get_the_newest_sass_and_older_ones_the_sass_they_read);
    tcase_add_test(tc, a_cuda_10_2_driver_jit_compiles_the_isa_6_5_ptx);
    tcase_add_test(tc, a_refused_image_is_passed_over_for_the_next);
    tcase_add_test(tc, when_nothing_loads_the_error_names_the_driver_the_gpu_and_each_image);
    tcase_add_test(tc, msda_image_forces_one_kind_of_image);
    tcase_add_test(tc, each_image_is_its_parts_and_each_kernel_is_in_its_own);
    tcase_add_test(tc, an_f32_buffer_image_loads_with_no_mixed_16bit_backward);
    tcase_add_loop_test(tc, every_image_loads_with_its_own_configuration, 0, N_TABLE_ARCHS);
    tcase_add_loop_test(tc, every_gpu_from_maxwell_loads_an_image_on_every_driver_from_450, 0, N_TABLE_ARCHS);
    return tc;
}
