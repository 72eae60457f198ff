/* The API: status messages, version, validation before any work, the CUDA entry points where
 * no GPU is usable, and the device code embedded in the library. */
#include <stdio.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "msda_module.h"

START_TEST(every_status_has_its_own_message) {
    for (int i = 0; i < MSDA_STATUS_COUNT; i++) {
        const char *m = msda_status_string((msda_status)i);
        ck_assert_ptr_nonnull(m);
        ck_assert_str_ne(m, "unknown status");
        for (int j = 0; j < i; j++) ck_assert_str_ne(m, msda_status_string((msda_status)j));
    }
    ck_assert_str_eq(msda_status_string((msda_status)MSDA_STATUS_COUNT), "unknown status");
    ck_assert_str_eq(msda_status_string((msda_status)-1), "unknown status");
    ck_assert_str_eq(msda_version(), MSDA_VERSION_STRING);
    ck_assert_int_eq(msda_abi_version(), MSDA_ABI_VERSION);
}
END_TEST


/* A valid forward problem (N=2, Lq=3, M=2, D=4, levels 3x4 and 2x2, P=2) on host buffers. */
typedef struct {
    int64_t shapes[4], starts[2];
    float value[2 * 16 * 2 * 4], loc[2 * 3 * 2 * 2 * 2 * 2], attn[2 * 3 * 2 * 2 * 2];
    float out[2 * 3 * 2 * 4], gv[2 * 16 * 2 * 4], gl[2 * 3 * 2 * 2 * 2 * 2], ga[2 * 3 * 2 * 2 * 2];
    msda_forward_args fwd;
    msda_backward_args bwd;
} fixture;

static void fixture_init(fixture *f) {
    memset(f, 0, sizeof *f);
    const int64_t shapes[] = {3, 4, 2, 2}, starts[] = {0, 12};
    memcpy(f->shapes, shapes, sizeof shapes);
    memcpy(f->starts, starts, sizeof starts);
    for (size_t i = 0; i < sizeof f->loc / sizeof f->loc[0]; i++) f->loc[i] = 0.3f;
    f->fwd = (msda_forward_args){.dtype = MSDA_F32, .sizes = {2, 16, 2, 4, 3, 2, 2},
                                 .spatial_shapes = f->shapes, .level_start = f->starts,
                                 .value = f->value, .sampling_locations = f->loc,
                                 .attention_weights = f->attn, .output = f->out};
    f->bwd = (msda_backward_args){.dtype = MSDA_F32, .sizes = {2, 16, 2, 4, 3, 2, 2},
                                  .spatial_shapes = f->shapes, .level_start = f->starts,
                                  .value = f->value, .sampling_locations = f->loc,
                                  .attention_weights = f->attn, .grad_output = f->out,
                                  .grad_value = f->gv, .grad_sampling_locations = f->gl,
                                  .grad_attention_weights = f->ga};
}

enum { MUT_N0, MUT_DNEG, MUT_P0, MUT_LEVELS, MUT_H0, MUT_SUM, MUT_START, MUT_START0, MUT_VALUE_NULL,
       MUT_SHAPES_NULL, MUT_OUT_NULL, MUT_DTYPE, MUT_COORD, MUT_COORD_F64, MUT_TABLE_WHERE,
       MUT_DEVICE_TABLE_NULL, MUT_DEVICE_TABLE_N0, MUT_WEIGHTS, MUT_OVERFLOW, MUT_COUNT };

static msda_status mutate(fixture *f, int which) {
    msda_forward_args *a = &f->fwd;
    switch (which) {
    case MUT_N0: a->sizes.batch = 0; return MSDA_ERR_BAD_SIZE;
    case MUT_DNEG: a->sizes.channels = -4; return MSDA_ERR_BAD_SIZE;
    case MUT_P0: a->sizes.points = 0; return MSDA_ERR_BAD_SIZE;
    case MUT_LEVELS: a->sizes.levels = MSDA_MAX_LEVELS + 1; return MSDA_ERR_TOO_MANY_LEVELS;
    case MUT_H0: f->shapes[2] = 0; return MSDA_ERR_BAD_SHAPE;
    case MUT_SUM: a->sizes.spatial = 17; return MSDA_ERR_SHAPE_SUM;
    case MUT_START: f->starts[1] = 11; return MSDA_ERR_LEVEL_START;
    case MUT_START0: f->starts[0] = 1; return MSDA_ERR_LEVEL_START; /* the first must be 0 */
    case MUT_VALUE_NULL: a->value = NULL; return MSDA_ERR_NULL_ARGUMENT;
    case MUT_SHAPES_NULL: a->spatial_shapes = NULL; return MSDA_ERR_NULL_ARGUMENT;
    case MUT_OUT_NULL: a->output = NULL; return MSDA_ERR_NULL_ARGUMENT;
    case MUT_DTYPE: a->dtype = (msda_dtype)9; return MSDA_ERR_BAD_DTYPE;
    case MUT_COORD: a->coord_type = (msda_coord_type)2; return MSDA_ERR_BAD_DTYPE;
    case MUT_COORD_F64: a->dtype = MSDA_F64, a->coord_type = MSDA_COORD_F32; return MSDA_ERR_BAD_DTYPE;
    case MUT_TABLE_WHERE: a->level_table = (msda_memory)2; return MSDA_ERR_BAD_ARGUMENT;
    /* A device table is not read on the host, but the checks that need no table still run. */
    case MUT_DEVICE_TABLE_NULL: a->level_table = MSDA_DEVICE, a->level_start = NULL; return MSDA_ERR_NULL_ARGUMENT;
    case MUT_DEVICE_TABLE_N0: a->level_table = MSDA_DEVICE, a->sizes.batch = 0; return MSDA_ERR_BAD_SIZE;
    case MUT_WEIGHTS: a->weights = (msda_weights)2; return MSDA_ERR_BAD_ARGUMENT;
    default: /* N*S*M*D far past 2^63 */
        a->sizes.batch = (int64_t)1 << 40;
        a->sizes.heads = (int64_t)1 << 30;
        return MSDA_ERR_SIZE_OVERFLOW;
    }
}

/* _i: the violation. Each has its status, a message, and the output stays untouched, on the
 * CPU path and on the CUDA path alike (validation comes before the driver is even opened). */
START_TEST(each_violation_has_its_status) {
    fixture f;
    fixture_init(&f);
    const msda_status want = mutate(&f, _i);
    msda_error err;
    memset(&err, 0x5a, sizeof err); /* whatever the caller's struct held before */
    ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), want);
    ck_assert_int_eq(err.status, want);
    ck_assert_msg(strlen(err.message) > 0, "no message");
    /* not a CUDA failure: no CUresult and no CUDA name (msda.h) */
    ck_assert_int_eq(err.cuda_result, 0);
    ck_assert_str_eq(err.cuda_name, "");
    for (size_t i = 0; i < sizeof f.out / sizeof f.out[0]; i++) f.out[i] = 42.0f;
    ck_assert_int_eq(msda_forward_cpu(&f.fwd, 0, NULL), want);
    ck_assert_int_eq(msda_forward_cuda(&f.fwd, NULL, &err), want);
    for (size_t i = 0; i < sizeof f.out / sizeof f.out[0]; i++) ck_assert(f.out[i] == 42.0f);
}
END_TEST

START_TEST(backward_checks_its_pointers) {
    fixture f;
    fixture_init(&f);
    msda_error err;
    ck_assert_int_eq(msda_validate_backward(&f.bwd, &err), MSDA_OK);
    f.bwd.grad_attention_weights = NULL;
    ck_assert_int_eq(msda_backward_cpu(&f.bwd, 0, &err), MSDA_ERR_NULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "grad_attention_weights"));
    ck_assert_int_eq(msda_backward_cuda(&f.bwd, NULL, &err), MSDA_ERR_NULL_ARGUMENT);
    ck_assert_int_eq(msda_validate_backward(NULL, &err), MSDA_ERR_NULL_ARGUMENT);
    fixture_init(&f);
    ck_assert_int_eq(msda_backward_cpu(&f.bwd, -1, &err), MSDA_ERR_BAD_ARGUMENT);
}
END_TEST

/* _i: the violation, now in a backward call whose pointers are all there: the problem is checked
 * before the pointers, and its status is the forward's. */
START_TEST(backward_refuses_each_violation_of_the_problem) {
    fixture f;
    fixture_init(&f);
    const msda_status want = mutate(&f, _i);
    if (_i == MUT_VALUE_NULL || _i == MUT_OUT_NULL) return; /* pointers: backward_checks_its_pointers */
    f.bwd.dtype = f.fwd.dtype;
    f.bwd.sizes = f.fwd.sizes;
    f.bwd.spatial_shapes = f.fwd.spatial_shapes;
    f.bwd.level_start = f.fwd.level_start;
    f.bwd.coord_type = f.fwd.coord_type;
    f.bwd.level_table = f.fwd.level_table;
    f.bwd.weights = f.fwd.weights;
    msda_error err;
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(msda_validate_backward(&f.bwd, &err), want);
    ck_assert_int_eq(msda_backward_cpu(&f.bwd, 0, &err), want);
}
END_TEST

/* A side of 2^31 - 1 is the largest a level may have; 2^31 is refused, for H and for W. */
START_TEST(the_largest_level_side_is_accepted) {
    float v[1], loc[2], attn[1], out[1];
    for (int side = 0; side < 2; side++) {
        int64_t shapes[2] = {1, 1}, starts[1] = {0};
        shapes[side] = INT32_MAX;
        msda_forward_args a = {.dtype = MSDA_F32, .sizes = {1, INT32_MAX, 1, 1, 1, 1, 1},
                               .spatial_shapes = shapes, .level_start = starts, .value = v,
                               .sampling_locations = loc, .attention_weights = attn, .output = out};
        msda_error err;
        ck_assert_int_eq(msda_validate_forward(&a, &err), MSDA_OK);
        shapes[side] = (int64_t)INT32_MAX + 1;
        a.sizes.spatial = (int64_t)INT32_MAX + 1;
        ck_assert_int_eq(msda_validate_forward(&a, &err), MSDA_ERR_BAD_SHAPE);
    }
}
END_TEST

/* Levels that pass S part of the way through are refused at the level that passes it, before
 * its H*W is added to the running sum. */
START_TEST(a_level_past_s_is_refused_where_it_passes) {
    fixture f;
    fixture_init(&f);
    f.shapes[2] = 2;
    f.shapes[3] = 3; /* 12 + 6 > S = 16 */
    msda_error err;
    ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), MSDA_ERR_SHAPE_SUM);
    ck_assert_msg(strstr(err.message, "more than S = 16"), "message: %s", err.message);
}
END_TEST

/* Here no CUDA context is current (and usually no GPU or driver): the CUDA path must say so
 * with a status and a message, and not crash, whatever the machine has. */
START_TEST(cuda_path_without_context_fails_cleanly) {
    fixture f;
    fixture_init(&f);
    msda_error err;
    memset(&err, 0, sizeof err);
    const msda_status st = msda_forward_cuda(&f.fwd, NULL, &err);
    ck_assert_msg(st == MSDA_ERR_NO_DRIVER || st == MSDA_ERR_NO_CONTEXT || st == MSDA_ERR_CUDA ||
                      st == MSDA_ERR_DRIVER_TOO_OLD,
                  "status %d: %s", (int)st, err.message);
    ck_assert_int_eq(err.status, st);
    ck_assert_msg(strlen(err.message) > 0, "no message");
    if (st == MSDA_ERR_CUDA) {
        ck_assert_msg(strncmp(err.cuda_name, "CUDA_ERROR_", 11) == 0, "name '%s'", err.cuda_name);
        ck_assert_int_ne(err.cuda_result, 0);
    }
    ck_assert_int_eq(msda_backward_cuda(&f.bwd, NULL, NULL), st);
    size_t bytes = 7;
    ck_assert_int_eq(msda_backward_cuda_workspace(&f.bwd, &bytes, NULL), st);
    ck_assert_uint_eq(bytes, 7); /* untouched on failure */
    ck_assert_int_eq(msda_cuda_prepare(NULL), st);
}
END_TEST

#if !defined(MSDA_EXPECTED_ARCHS) || !defined(MSDA_EXPECTED_PTX)
#error "build with -DMSDA_EXPECTED_ARCHS=\"75 80 ...\" -DMSDA_EXPECTED_PTX=\"75 121\" (kernels/kernels.mk does)"
#endif

static int has_image(const msda_arch *a, int n, int arch, int is_ptx) {
    for (int i = 0; i < n; i++)
        if (a[i].arch == arch && a[i].is_ptx == is_ptx) return 1;
    return 0;
}

/* Every architecture of LIST is among ARCHS as SASS (IS_PTX 0) or PTX; returns how many. */
static int expect_all(const msda_arch *archs, int n, const char *list, int is_ptx) {
    const char *p = list;
    char *end;
    int expected = 0;
    for (long arch = strtol(p, &end, 10); end != p; p = end, arch = strtol(p, &end, 10)) {
        ck_assert_msg(has_image(archs, n, (int)arch, is_ptx), "no %s for %ld", is_ptx ? "PTX" : "SASS", arch);
        expected++;
    }
    return expected;
}

/* The library carries SASS for every architecture of build's plan and the PTX it chose, no
 * more; and the shipped library (MSDA_SHIPPED_LIBRARY, from the wheel) lists the same. */
START_TEST(library_embeds_every_arch) {
    msda_arch archs[128];
    const int n = msda_embedded_archs(archs, 128);
    ck_assert_int_ge(msda_fatbin_count(), 1);
    ck_assert_msg(n > 0 && n <= 128, "%d images", n);
    const int sass = expect_all(archs, n, MSDA_EXPECTED_ARCHS, 0);
    const int ptx = expect_all(archs, n, MSDA_EXPECTED_PTX, 1);
    ck_assert_int_ge(sass, 1);
    ck_assert_int_ge(ptx, 1);
    ck_assert_int_eq(n, sass + ptx);

    char text[2048], small[8];
    const int len = msda_embedded_archs_string(text, sizeof text);
    ck_assert_int_eq(len, (int)strlen(text));
    ck_assert_int_eq(msda_embedded_archs_string(small, sizeof small), len);
    ck_assert_int_eq((int)strlen(small), (int)sizeof small - 1);
    ck_assert(strncmp(small, text, sizeof small - 1) == 0);

    const char *shipped = getenv("MSDA_SHIPPED_LIBRARY");
    ck_assert_msg(shipped && *shipped, "MSDA_SHIPPED_LIBRARY names the library out of the wheel");
    void *lib = dlopen(shipped, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen %s: %s", shipped, dlerror());
    int (*shipped_archs)(char *, size_t) = (int (*)(char *, size_t))dlsym(lib, "msda_embedded_archs_string");
    ck_assert_ptr_nonnull(shipped_archs);
    char shipped_text[2048];
    ck_assert_int_eq(shipped_archs(shipped_text, sizeof shipped_text), len);
    ck_assert_str_eq(shipped_text, text);
    dlclose(lib);
}
END_TEST

/* The loader tries only the fatbins a device can load: on a 9.0 device the SASS sm_90 one and
 * the PTX at or below 9.0; on a GPU newer than every SASS only the PTX; on 3.0 none. */
START_TEST(loader_skips_fatbins_the_device_cannot_load) {
    msda_arch archs[128];
    const int n = msda_embedded_archs(archs, 128);
    ck_assert_int_gt(n, 0);
    for (uint32_t i = 0; i < msda_fatbin_table_count; i++) {
        int sass90 = 0, ptx_le90 = 0, ptx = 0;
        for (int k = 0; k < n; k++) {
            if (archs[k].fatbin != (int)i) continue;
            sass90 |= !archs[k].is_ptx && archs[k].arch == 90;
            ptx_le90 |= archs[k].is_ptx && archs[k].arch <= 90;
            ptx |= archs[k].is_ptx;
        }
        ck_assert_int_eq(msda_fatbin_runs_on(i, 90), sass90 || ptx_le90);
        ck_assert_int_eq(msda_fatbin_runs_on(i, 990), ptx);
        ck_assert_int_eq(msda_fatbin_runs_on(i, 30), 0);
    }
    ck_assert_int_eq(msda_fatbin_runs_on(msda_fatbin_table_count, 90), 0);
}
END_TEST

/* The boundary itself: MSDA_MAX_LEVELS levels are accepted (one more is MUT_LEVELS above), on
 * the CPU path with 1x1 levels, and each level's value is sampled. */
START_TEST(the_maximum_number_of_levels_is_accepted) {
    enum { L = MSDA_MAX_LEVELS };
    int64_t shapes[2 * L], starts[L];
    float value[L], loc[L * 2], attn[L], out[1] = {-1.0f};
    for (int l = 0; l < L; l++) {
        shapes[2 * l] = shapes[2 * l + 1] = 1;
        starts[l] = l;
        value[l] = (float)(l + 1);
        loc[2 * l] = loc[2 * l + 1] = 0.5f; /* the centre of a 1x1 map: its one value, whole */
        attn[l] = 1.0f;
    }
    const msda_forward_args a = {.dtype = MSDA_F32, .sizes = {1, L, 1, 1, 1, L, 1}, .spatial_shapes = shapes,
                                 .level_start = starts, .value = value, .sampling_locations = loc,
                                 .attention_weights = attn, .output = out};
    msda_error err;
    ck_assert_int_eq(msda_forward_cpu(&a, 1, &err), MSDA_OK);
    ck_assert_float_eq_tol(out[0], (float)(L * (L + 1) / 2), 1e-4f);
}
END_TEST

/* The level table in device memory: validation on the host never reads it (here it points at
 * numbers that are no table at all, so reading them would fail the check), the CPU path refuses
 * it, and the CUDA path gets past validation to the driver (absent or without a context here). */
START_TEST(a_device_table_is_not_read_on_the_host) {
    fixture f;
    fixture_init(&f);
    f.shapes[0] = -7, f.shapes[3] = 0, f.starts[1] = 99; /* inconsistent in every way */
    f.fwd.level_table = f.bwd.level_table = MSDA_DEVICE;
    msda_error err;
    ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), MSDA_OK);
    ck_assert_int_eq(msda_validate_backward(&f.bwd, &err), MSDA_OK);
    ck_assert_int_eq(msda_forward_cpu(&f.fwd, 1, &err), MSDA_ERR_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "host memory"));
    ck_assert_int_eq(msda_backward_cpu(&f.bwd, 1, &err), MSDA_ERR_BAD_ARGUMENT);
    const msda_status st = msda_forward_cuda(&f.fwd, NULL, &err);
    ck_assert_msg(st == MSDA_ERR_NO_DRIVER || st == MSDA_ERR_NO_CONTEXT || st == MSDA_ERR_CUDA ||
                      st == MSDA_ERR_DRIVER_TOO_OLD,
                  "status %d: %s", (int)st, err.message);
    /* On the host the same numbers are refused, with the status the kernels would store. */
    f.fwd.level_table = MSDA_HOST;
    ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), MSDA_ERR_BAD_SHAPE);
}
END_TEST

/* f32 coordinates go with every 16-bit dtype and with f32 (the same as MSDA_COORD_SAME). */
START_TEST(f32_coordinates_are_accepted_beside_16_bit_values) {
    fixture f;
    fixture_init(&f);
    msda_error err;
    const msda_dtype ok[] = {MSDA_F32, MSDA_F16, MSDA_BF16};
    for (size_t i = 0; i < 3; i++) {
        f.fwd.dtype = ok[i], f.fwd.coord_type = MSDA_COORD_F32;
        ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), MSDA_OK);
    }
}
END_TEST

TCase *kt_tcase_api(void) {
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, every_status_has_its_own_message);
    tcase_add_test(tc, a_device_table_is_not_read_on_the_host);
    tcase_add_test(tc, f32_coordinates_are_accepted_beside_16_bit_values);
    tcase_add_loop_test(tc, each_violation_has_its_status, 0, MUT_COUNT);
    tcase_add_test(tc, backward_checks_its_pointers);
    tcase_add_loop_test(tc, backward_refuses_each_violation_of_the_problem, 0, MUT_COUNT);
    tcase_add_test(tc, the_largest_level_side_is_accepted);
    tcase_add_test(tc, a_level_past_s_is_refused_where_it_passes);
    tcase_add_test(tc, cuda_path_without_context_fails_cleanly);
    tcase_add_test(tc, library_embeds_every_arch);
    tcase_add_test(tc, loader_skips_fatbins_the_device_cannot_load);
    tcase_add_test(tc, the_maximum_number_of_levels_is_accepted);
    return tc;
}
