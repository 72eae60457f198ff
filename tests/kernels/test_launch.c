/* The CUDA launcher's choices, on a machine without a GPU: libmsda runs against the fake driver
 * of tests/fakes/fakelaunch.c (MSDA_FAKE_LAUNCH_DRIVER, which make check-kernels sets), loaded
 * here before libmsda opens "libcuda.so.1", so that libmsda's dlopen finds it by its soname.
 * Nothing runs; the tests read which kernels libmsda launched, on what grid, with what plan.
 * Each test runs in a child process of its own (Check's fork mode), where libmsda has not yet
 * opened a driver.
 * The fake device has 132 multiprocessors with 4 blocks of 256 resident on each: a wave is 528
 * blocks. Its module's msda_config is sm_90's defaults (kernels/msda_device.cuh). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "fakelaunch.h"
#include "msda_plan.h"
#include "kt.h"

#define WAVE (FAKE_SMS * FAKE_BLOCKS_PER_SM)

/* Deformable-DETR's levels (docs/FACTS.md). */
static const int64_t detr_shapes[8] = {100, 134, 50, 67, 25, 34, 13, 17};
static const int64_t detr_starts[4] = {0, 13400, 16750, 17600};
#define DETR_S 17821

static fake_launch_ops_fn fake_ops;
static fake_launch_clear_fn fake_clear;

/* What sm_90's device code says of itself (msda_device.cuh, kernels/libmsda.json), built with
 * MSDA_F16_REPLICA_ADDS=0 MSDA_BF16_REPLICA_ADDS=0: the f32 buffer for the coarse levels. */
static const msda_device_config sm90_config = {
    .abi = MSDA_DEVICE_ABI, .arch = 90, .max_threads = 256, .f16_enabled = 1, .bf16_enabled = 1,
    .f16_atomic = MSDA_ATOMIC_MIXED, .bf16_atomic = MSDA_ATOMIC_MIXED, .vector_atomics = 1,
    .points16_waves = 16, .backward_spread_log2 = 7, .bf16_half_sums = 1, .backward_head_phases_log2 = 1};
/* The same with its defaults: f16 replicas of at most 128 adds (f16) and 32 (bf16). */
static const msda_device_config sm90_replicas_config = {
    .abi = MSDA_DEVICE_ABI, .arch = 90, .max_threads = 256, .f16_enabled = 1, .bf16_enabled = 1,
    .f16_atomic = MSDA_ATOMIC_MIXED, .bf16_atomic = MSDA_ATOMIC_MIXED, .vector_atomics = 1,
    .points16_waves = 16, .backward_spread_log2 = 7, .bf16_half_sums = 1, .f16_replica_adds = 128,
    .bf16_replica_adds = 32, .backward_head_phases_log2 = 1};

static void load_fake_driver_as(const msda_device_config *cfg) {
    const char *fork_mode = getenv("CK_FORK");
    ck_assert_msg(!fork_mode || strcmp(fork_mode, "no") != 0,
                  "CK_FORK=no: these tests need a process of their own (libmsda opens its driver once)");
    const char *path = getenv("MSDA_FAKE_LAUNCH_DRIVER");
    ck_assert_msg(path && *path, "MSDA_FAKE_LAUNCH_DRIVER is not set: run these tests with make check-kernels");
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    ck_assert_msg(lib, "cannot load the fake driver: %s", dlerror());
    fake_launch_set_config_fn set_config;
    *(void **)&set_config = dlsym(lib, "fake_launch_set_config");
    *(void **)&fake_ops = dlsym(lib, "fake_launch_ops");
    *(void **)&fake_clear = dlsym(lib, "fake_launch_clear");
    ck_assert(set_config && fake_ops && fake_clear);
    set_config(cfg, sizeof *cfg);
    fake_clear();
}

static void load_fake_driver(void) { load_fake_driver_as(&sm90_config); }

/* Addresses that are never read (nothing runs), aligned as torch's allocations are. */
#define NOWHERE(i) ((void *)(uintptr_t)(0x100000u * (i)))

static msda_sizes detr_sizes(int64_t N, int64_t Lq) {
    return (msda_sizes){.batch = N, .spatial = DETR_S, .heads = 8, .channels = 32, .queries = Lq, .levels = 4,
                        .points = 4};
}

/* The launches recorded since the last call, and how many. */
static int recorded(const fake_launch_op **ops) {
    const int n = fake_ops(ops);
    fake_clear();
    return n;
}

static const fake_launch_op *forward(msda_dtype dtype, int64_t N, int64_t Lq, msda_memory table) {
    const msda_forward_args a = {.dtype = dtype, .sizes = detr_sizes(N, Lq), .spatial_shapes = detr_shapes,
                                 .level_start = detr_starts, .value = NOWHERE(1), .sampling_locations = NOWHERE(2),
                                 .attention_weights = NOWHERE(3), .output = NOWHERE(4), .level_table = table};
    msda_error err;
    const msda_status st = msda_forward_cuda(&a, NULL, &err);
    ck_assert_msg(st == MSDA_OK, "forward: %s", err.message);
    const fake_launch_op *ops;
    ck_assert_int_eq(recorded(&ops), 1);
    ck_assert_int_eq(ops[0].kind, FAKE_LAUNCH);
    ck_assert_uint_eq(ops[0].block, 256);
    return &ops[0];
}

static unsigned blocks_of(const fake_launch_op *op) {
    return (unsigned)((op->params.threads + op->block - 1) / op->block);
}

START_TEST(the_16bit_points_forward_runs_as_one_wave_up_to_16_waves) {
    load_fake_driver();
    /* enc_b2: 4456 blocks of work (8.4 waves), in one wave of 528 looping over them. */
    const fake_launch_op *op = forward(MSDA_F16, 2, DETR_S, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_points_f16_v8");
    ck_assert_int_eq(op->params.threads, 2 * DETR_S * 8 * 4);
    ck_assert_uint_eq(blocks_of(op), 4456);
    ck_assert_uint_eq(op->grid, WAVE);
    op = forward(MSDA_BF16, 2, DETR_S, MSDA_DEVICE);
    ck_assert_str_eq(op->name, "msda_forward_points_bf16_v8");
    ck_assert_uint_eq(op->grid, WAVE);
    /* Exactly 16 waves of work: still one wave; one block more: a block per tile. */
    op = forward(MSDA_F16, 1, 16 * WAVE * 8, MSDA_HOST);
    ck_assert_uint_eq(blocks_of(op), 16 * WAVE);
    ck_assert_uint_eq(op->grid, WAVE);
    op = forward(MSDA_F16, 1, 16 * WAVE * 8 + 8, MSDA_HOST);
    ck_assert_uint_eq(op->grid, 16 * WAVE + 1);
    /* enc_b16 (67 waves): a block per tile. */
    op = forward(MSDA_F16, 16, DETR_S, MSDA_HOST);
    ck_assert_uint_eq(op->grid, blocks_of(op));
    ck_assert_uint_eq(op->grid, 35642);
    /* At most one wave of work even with the points split over every level: as it is. */
    op = forward(MSDA_F16, 1, 8, MSDA_HOST);
    ck_assert_int_eq(op->params.parts_log2, 2);
    ck_assert_uint_eq(blocks_of(op), 4);
    ck_assert_uint_eq(op->grid, 4);
}
END_TEST

START_TEST(the_decoder_forward_splits_its_points_then_takes_one_wave) {
    load_fake_driver();
    /* 900 queries: 14400 groups of 4 lanes, under two waves of threads, so the levels are split
     * over 4 parts (L = 4): 900 blocks, then one wave of them. */
    const fake_launch_op *op = forward(MSDA_F16, 2, 900, MSDA_DEVICE);
    ck_assert_int_eq(op->params.parts_log2, 2);
    ck_assert_uint_eq(blocks_of(op), 900);
    ck_assert_uint_eq(op->grid, WAVE);
    /* f32: the same split, 8 lanes a head: 1800 blocks, past two waves, so one wave. */
    op = forward(MSDA_F32, 2, 900, MSDA_DEVICE);
    ck_assert_str_eq(op->name, "msda_forward_points_f32_v4");
    ck_assert_int_eq(op->params.parts_log2, 2);
    ck_assert_uint_eq(blocks_of(op), 1800);
    ck_assert_uint_eq(op->grid, WAVE);
    /* Batch 1: 900 blocks, under two waves: a block per tile. */
    op = forward(MSDA_F32, 1, 900, MSDA_HOST);
    ck_assert_int_eq(op->params.parts_log2, 2);
    ck_assert_uint_eq(blocks_of(op), 900);
    ck_assert_uint_eq(op->grid, 900);
    /* Exactly two waves of work: a block per tile; 8 blocks more: one wave. */
    op = forward(MSDA_F32, 1, 2 * WAVE, MSDA_HOST);
    ck_assert_int_eq(op->params.parts_log2, 2);
    ck_assert_uint_eq(blocks_of(op), 2 * WAVE);
    ck_assert_uint_eq(op->grid, 2 * WAVE);
    op = forward(MSDA_F32, 1, 2 * WAVE + 8, MSDA_HOST);
    ck_assert_uint_eq(blocks_of(op), 2 * WAVE + 8);
    ck_assert_uint_eq(op->grid, WAVE);
}
END_TEST

START_TEST(the_unsplit_f32_points_forward_keeps_a_block_per_tile) {
    load_fake_driver();
    const fake_launch_op *op = forward(MSDA_F32, 2, DETR_S, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_points_f32_v4");
    ck_assert_int_eq(op->params.threads, 2 * DETR_S * 8 * 8);
    ck_assert_uint_eq(op->grid, 8911);
}
END_TEST

/* The forward of `dtype` with coordinates of `coords`, its value `offset` bytes off NOWHERE(1). */
static const fake_launch_op *forward_at(msda_dtype dtype, msda_coord_type coords, size_t offset) {
    const msda_forward_args a = {.dtype = dtype, .coord_type = coords, .sizes = detr_sizes(2, 900),
                                 .spatial_shapes = detr_shapes, .level_start = detr_starts,
                                 .value = (const char *)NOWHERE(1) + offset, .sampling_locations = NOWHERE(2),
                                 .attention_weights = NOWHERE(3), .output = NOWHERE(4), .level_table = MSDA_HOST};
    msda_error err;
    ck_assert_msg(msda_forward_cuda(&a, NULL, &err) == MSDA_OK, "forward: %s", err.message);
    const fake_launch_op *ops;
    ck_assert_int_eq(recorded(&ops), 1);
    return &ops[0];
}

/* 8-byte vectors of a 16-bit value are built for its own coordinates only (msda_kernels.cu,
 * MSDA_16BIT_SET): f32 coordinates beside a value whose rows allow 8-byte vectors but not
 * 16-byte ones are staged (a_problem_no_vector_fits_is_staged_in_padded_copies). */
START_TEST(each_coordinate_type_takes_the_widths_built_for_it) {
    load_fake_driver();
    const fake_launch_op *op = forward_at(MSDA_F16, MSDA_COORD_SAME, 8);
    ck_assert_str_eq(op->name, "msda_forward_points_f16_v4");
    ck_assert_int_eq(op->params.chunks, 8);
    op = forward_at(MSDA_BF16, MSDA_COORD_F32, 0);
    ck_assert_str_eq(op->name, "msda_forward_points_bf16c32_v8");
}
END_TEST

static msda_backward_args backward_args(msda_dtype dtype, int64_t N, int64_t Lq, msda_memory table) {
    return (msda_backward_args){
        .dtype = dtype, .sizes = detr_sizes(N, Lq), .spatial_shapes = detr_shapes, .level_start = detr_starts,
        .value = NOWHERE(1), .sampling_locations = NOWHERE(2), .attention_weights = NOWHERE(3),
        .grad_output = NOWHERE(4), .grad_value = NOWHERE(5), .grad_sampling_locations = NOWHERE(6),
        .grad_attention_weights = NOWHERE(7), .level_table = table};
}

/* The first launch of a kernel whose name starts with `prefix`, of the n recorded. */
static const fake_launch_op *launch_of(const fake_launch_op *ops, int n, const char *prefix) {
    for (int i = 0; i < n; i++)
        if (ops[i].kind == FAKE_LAUNCH && strncmp(ops[i].name, prefix, strlen(prefix)) == 0) return &ops[i];
    ck_abort_msg("no launch of %s*", prefix);
    return NULL;
}

/* A backward call's recorded operations. */
static int backward_of(const msda_backward_args *a, const fake_launch_op **ops) {
    msda_error err;
    const msda_status st = msda_backward_cuda(a, NULL, &err);
    ck_assert_msg(st == MSDA_OK, "backward: %s", err.message);
    return recorded(ops);
}

static int backward(msda_dtype dtype, int64_t N, int64_t Lq, msda_memory table, const fake_launch_op **ops) {
    const msda_backward_args a = backward_args(dtype, N, Lq, table);
    return backward_of(&a, ops);
}

/* grad_value zeroed, the buffer of `rows` rows allocated and zeroed, `kernel` with that plan,
 * then the conversion. */
static void assert_buffered(const fake_launch_op *ops, int n, int zeroes_grad_value, const char *kernel,
                            int64_t N, int64_t rows, uint32_t levels, int32_t max_adds, const char *convert) {
    const size_t value_elems = (size_t)N * DETR_S * 8 * 32, buffer_bytes = (size_t)N * rows * 8 * 32 * 4;
    int i = 0;
    ck_assert_int_eq(n, 4 + zeroes_grad_value);
    if (zeroes_grad_value) {
        ck_assert_int_eq(ops[i].kind, FAKE_MEMSET);
        ck_assert_uint_eq(ops[i].address, (uintptr_t)NOWHERE(5));
        ck_assert_uint_eq(ops[i++].bytes, value_elems * 2);
    }
    ck_assert_int_eq(ops[i].kind, FAKE_ALLOC);
    ck_assert_uint_eq(ops[i++].bytes, buffer_bytes);
    ck_assert_int_eq(ops[i].kind, FAKE_MEMSET);
    ck_assert_uint_eq(ops[i].address, ops[i - 1].address);
    ck_assert_uint_eq(ops[i++].bytes, buffer_bytes);
    ck_assert_int_eq(ops[i].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[i].name, kernel);
    ck_assert_int_eq(ops[i].params.buffer_spatial, rows);
    ck_assert_uint_eq(ops[i].params.buffer_levels, levels);
    ck_assert_int_eq(ops[i++].params.buffer_max_adds, max_adds);
    ck_assert_int_eq(ops[i].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[i].name, convert);
    ck_assert_int_eq(ops[i].params.buffer_spatial, rows);
}

START_TEST(the_16bit_backward_buffers_what_the_plan_says) {
    load_fake_driver();
    const fake_launch_op *ops;
    /* f16 encoder, host table: levels 2 and 3 (850 + 221 rows) in the buffer, the rest native. */
    int n = backward(MSDA_F16, 2, DETR_S, MSDA_HOST, &ops);
    assert_buffered(ops, n, 1, "msda_backward_f16_v8", 2, 850 + 221, 0xcu, 0, "msda_convert_f16");
    /* The same on a device table: the kernels plan, in room for any table (4 levels of 1113). */
    n = backward(MSDA_F16, 2, DETR_S, MSDA_DEVICE, &ops);
    assert_buffered(ops, n, 1, "msda_backward_f16_v8", 2, 4 * 1113, 0u, 256, "msda_convert_f16");
    /* bf16 past 2^20 adds an element (no half sums), on a device table: every table of these
     * sizes buffers every level by bf16's own limit (32), so the all-buffer kernel, which writes
     * every element (grad_value not zeroed). */
    n = backward(MSDA_BF16, 1, 262145, MSDA_DEVICE, &ops);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(ops[0].kind, FAKE_ALLOC);
    ck_assert_uint_eq(ops[0].bytes, (size_t)DETR_S * 8 * 32 * 4);
    ck_assert_str_eq(ops[2].name, "msda_backward_bf16_buffer_v4");
    ck_assert_uint_eq(ops[2].params.buffer_levels, 0xfu);
    ck_assert_uint_eq(ops[2].params.half_sums, 0);
    ck_assert_str_eq(ops[3].name, "msda_convert_bf16");
    /* The same past 2^20 adds on a host table, where bf16's own limit would leave the finest
     * level native: the device code has no mixed bf16 backward beside half sums, so every level
     * goes through the buffer. */
    n = backward(MSDA_BF16, 1, 262145, MSDA_HOST, &ops);
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(ops[2].name, "msda_backward_bf16_buffer_v4");
    ck_assert_uint_eq(ops[2].params.buffer_levels, 0xfu);
    ck_assert_uint_eq(ops[2].params.buffer_spatial, DETR_S);
    ck_assert_str_eq(ops[3].name, "msda_convert_bf16");
    /* f16 decoder, host table: no level over the limit, no buffer, no conversion. */
    n = backward(MSDA_F16, 2, 900, MSDA_HOST, &ops);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(ops[0].kind, FAKE_MEMSET);
    ck_assert_int_eq(ops[1].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[1].name, "msda_backward_f16_v8");
    ck_assert_int_eq(ops[1].params.buffer_spatial, 0);
}
END_TEST

/* The f32-buffer strategy (a variant build, `--define MSDA_F16_ATOMIC=3`, as make gpu-check's
 * f32buf): every level of the f16 backward through the buffer, so the all-buffer kernel, which
 * writes every element (grad_value not zeroed), then the conversion; on the decoder too, which the
 * mixed strategy adds natively. */
static const msda_device_config sm90_f16_buffer_config = {
    .abi = MSDA_DEVICE_ABI, .arch = 90, .max_threads = 256, .f16_enabled = 1, .bf16_enabled = 1,
    .f16_atomic = MSDA_ATOMIC_F32_BUFFER, .bf16_atomic = MSDA_ATOMIC_MIXED, .vector_atomics = 1,
    .points16_waves = 16, .backward_spread_log2 = 7, .bf16_half_sums = 1, .backward_head_phases_log2 = 1};

START_TEST(the_f32_buffer_strategy_buffers_every_level) {
    load_fake_driver_as(&sm90_f16_buffer_config);
    const fake_launch_op *ops;
    for (int table = 0; table < 2; table++) {
        const int n = backward(MSDA_F16, 2, 900, table ? MSDA_DEVICE : MSDA_HOST, &ops);
        ck_assert_int_eq(n, 4);
        ck_assert_int_eq(ops[0].kind, FAKE_ALLOC);
        ck_assert_uint_eq(ops[0].bytes, (size_t)2 * DETR_S * 8 * 32 * 4);
        ck_assert_str_eq(ops[2].name, "msda_backward_f16_buffer_v4");
        ck_assert_uint_eq(ops[2].params.buffer_levels, 0xfu);
        ck_assert_int_eq(ops[2].params.buffer_spatial, DETR_S);
        ck_assert_str_eq(ops[3].name, "msda_convert_f16");
    }
    /* Its kernels take either coordinate type: f32 ones keep 4 elements a lane. */
    msda_backward_args a = backward_args(MSDA_F16, 2, 900, MSDA_HOST);
    a.coord_type = MSDA_COORD_F32;
    ck_assert_int_eq(backward_of(&a, &ops), 4);
    ck_assert_str_eq(ops[2].name, "msda_backward_f16_buffer_v4");
    ck_assert_int_eq(ops[2].params.coord_f32, 1);
}
END_TEST

/* bf16's half sums: grad_value zeroed; the workspace, the f32 buffer of `rows` rows then 16
 * bytes of bounds (the buffer at the start keeps its alignment), allocated and zeroed; the bounds; `kernel`, the levels outside the buffer
 * adding into grad_value; their rounding in place; then, where there is a buffer, its conversion. */
static void assert_half_sums(const fake_launch_op *ops, int n, const char *kernel, int64_t N, int64_t Lq,
                             int64_t rows, uint32_t levels, int32_t max_adds, int logits) {
    const size_t value_elems = (size_t)N * DETR_S * 8 * 32, buffer_bytes = (size_t)N * rows * 8 * 32 * 4;
    ck_assert_int_eq(n, rows ? 7 : 6);
    ck_assert_int_eq(ops[0].kind, FAKE_MEMSET);
    ck_assert_uint_eq(ops[0].address, (uintptr_t)NOWHERE(5));
    ck_assert_uint_eq(ops[0].bytes, value_elems * 2);
    ck_assert_int_eq(ops[1].kind, FAKE_ALLOC);
    ck_assert_uint_eq(ops[1].bytes, 16 + buffer_bytes);
    const uintptr_t ws = ops[1].address, bounds = ws + buffer_bytes;
    ck_assert_int_eq(ops[2].kind, FAKE_MEMSET);
    ck_assert_uint_eq(ops[2].address, ws);
    ck_assert_uint_eq(ops[2].bytes, 16 + buffer_bytes);
    /* The bounds: over grad_output and, unless they are logits, the weights, in one wave at most. */
    ck_assert_int_eq(ops[3].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[3].name, "msda_half_bounds_bf16");
    ck_assert_uint_eq(ops[3].params.half_sums, bounds);
    ck_assert_uint_eq(ops[3].params.grad_output, (uintptr_t)NOWHERE(4));
    ck_assert_uint_eq(ops[3].params.weights, logits ? 0 : (uintptr_t)NOWHERE(3));
    ck_assert_int_eq(ops[3].params.groups, N * Lq * 8);
    ck_assert_int_eq(ops[3].params.channels, 32);
    ck_assert_uint_le(ops[3].grid, WAVE);
    ck_assert_int_eq(ops[4].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[4].name, kernel);
    ck_assert_uint_eq(ops[4].params.half_sums, bounds);
    ck_assert_uint_eq(ops[4].params.buffer, rows ? ws : 0);
    ck_assert_int_eq(ops[4].params.buffer_spatial, rows);
    ck_assert_uint_eq(ops[4].params.buffer_levels, levels);
    ck_assert_int_eq(ops[4].params.buffer_max_adds, max_adds);
    ck_assert_int_eq(ops[5].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[5].name, "msda_finish_half_bf16");
    ck_assert_int_eq(ops[5].params.replica_adds, 0);
    ck_assert_uint_eq(ops[5].grid_y, 1);
    ck_assert_uint_eq(ops[5].params.output, (uintptr_t)NOWHERE(5));
    ck_assert_uint_eq(ops[5].params.half_sums, bounds);
    ck_assert_int_eq(ops[5].params.threads, value_elems);
    ck_assert_int_eq(ops[5].params.queries, Lq);
    ck_assert_int_eq(ops[5].params.points, 4);
    ck_assert_uint_le(ops[5].grid, WAVE);
    if (!rows) return;
    ck_assert_int_eq(ops[6].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[6].name, "msda_convert_bf16");
    ck_assert_uint_eq(ops[6].params.buffer, ws);
    ck_assert_int_eq(ops[6].params.threads, buffer_bytes / 4);
}

START_TEST(the_bf16_backward_adds_its_native_levels_as_scaled_halves) {
    load_fake_driver();
    const fake_launch_op *ops;
    /* Encoder, host table: f16's limit (256) buffers levels 2 and 3; levels 0 and 1 in halves,
     * lane pairs swapping for the buffer's f32 `red`s. */
    int n = backward(MSDA_BF16, 2, DETR_S, MSDA_HOST, &ops);
    assert_half_sums(ops, n, "msda_backward_bf16_half_v8", 2, DETR_S, 850 + 221, 0xcu, 0, 0);
    ck_assert_int_eq(ops[4].params.pair_exchange, 1);
    /* Device table: the kernels plan with that limit, in room for any table (4 levels of 1113). */
    n = backward(MSDA_BF16, 2, DETR_S, MSDA_DEVICE, &ops);
    assert_half_sums(ops, n, "msda_backward_bf16_half_v8", 2, DETR_S, 4 * 1113, 0u, 256, 0);
    /* Decoder: every level in halves, no f32 buffer, so 16 bytes of workspace and no conversion. */
    n = backward(MSDA_BF16, 2, 900, MSDA_HOST, &ops);
    assert_half_sums(ops, n, "msda_backward_bf16_half_v8", 2, 900, 0, 0u, 0, 0);
    /* Logits (the fused softmax): the softmaxed weights are at most 1, so the bounds skip them. */
    msda_backward_args a = backward_args(MSDA_BF16, 2, 900, MSDA_HOST);
    a.weights = MSDA_WEIGHTS_LOGITS;
    n = backward_of(&a, &ops);
    assert_half_sums(ops, n, "msda_backward_softmax_bf16_half_v8", 2, 900, 0, 0u, 0, 1);
    /* f32 coordinates beside the bf16 value. */
    a = backward_args(MSDA_BF16, 2, 900, MSDA_HOST);
    a.coord_type = MSDA_COORD_F32;
    n = backward_of(&a, &ops);
    ck_assert_str_eq(ops[3].name, "msda_half_bounds_bf16c32");
    ck_assert_str_eq(ops[4].name, "msda_backward_bf16c32_half_v8");
    /* A value 8 bytes off 16: bf16's own coordinates have a kernel of 4 elements a lane, f32 ones
     * none, so the call is staged into aligned copies, where both take 8; 2 bytes off: staged,
     * either type. */
    static const struct {
        size_t offset;
        msda_coord_type coords;
        const char *kernel;
        int staged;
    } narrower[] = {{8, MSDA_COORD_F32, "msda_backward_bf16c32_half_v8", 1},
                    {8, MSDA_COORD_SAME, "msda_backward_bf16_half_v4", 0},
                    {2, MSDA_COORD_F32, "msda_backward_bf16c32_half_v8", 1},
                    {2, MSDA_COORD_SAME, "msda_backward_bf16_half_v8", 1}};
    for (size_t i = 0; i < sizeof narrower / sizeof narrower[0]; i++) {
        a.value = (const char *)NOWHERE(1) + narrower[i].offset;
        a.coord_type = narrower[i].coords;
        n = backward_of(&a, &ops);
        const fake_launch_op *k = launch_of(ops, n, "msda_backward_");
        ck_assert_str_eq(k->name, narrower[i].kernel);
        ck_assert_int_eq(k->params.coord_f32, narrower[i].coords == MSDA_COORD_F32);
        ck_assert_int_eq(ops[1].kind == FAKE_LAUNCH && strcmp(ops[1].name, "msda_restride") == 0, narrower[i].staged);
    }
    /* The workspace the caller is told to bring is what the call takes. */
    a = backward_args(MSDA_BF16, 2, DETR_S, MSDA_HOST);
    size_t bytes = 0;
    msda_error err;
    ck_assert_int_eq(msda_backward_cuda_workspace(&a, &bytes, &err), MSDA_OK);
    ck_assert_uint_eq(bytes, 16 + (size_t)2 * (850 + 221) * 8 * 32 * 4);
    a.workspace = NOWHERE(9);
    a.workspace_bytes = bytes;
    n = backward_of(&a, &ops);
    ck_assert_int_eq(n, 6); /* no allocation */
    ck_assert_uint_eq(ops[1].address, (uintptr_t)NOWHERE(9));
    ck_assert_uint_eq(ops[3].params.buffer, (uintptr_t)NOWHERE(9));
    ck_assert_uint_eq(ops[3].params.half_sums, (uintptr_t)NOWHERE(9) + bytes - 16);
    a.workspace_bytes = bytes - 1; /* too small: refused before anything is queued */
    ck_assert_int_eq(msda_backward_cuda(&a, NULL, &err), MSDA_ERR_BAD_ARGUMENT);
    ck_assert_int_eq(recorded(&ops), 0);
    /* Enough bytes but not 16-byte aligned (the buffer's vector stores and the bounds' 16 bytes
     * need it): refused the same way, at 8 and at 1 byte past the boundary; 16 past it is fine. */
    for (uintptr_t off = 1; off <= 8; off += 7) {
        a.workspace = (char *)NOWHERE(9) + off;
        a.workspace_bytes = bytes + 16;
        ck_assert_int_eq(msda_backward_cuda(&a, NULL, &err), MSDA_ERR_BAD_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(err.message, "aligned to 16"));
        ck_assert_int_eq(recorded(&ops), 0);
    }
    a.workspace = (char *)NOWHERE(9) + 16;
    n = backward_of(&a, &ops);
    ck_assert_int_eq(n, 6);
    ck_assert_uint_eq(ops[1].address, (uintptr_t)NOWHERE(9) + 16);
    /* f16 keeps its own path: no bounds, no rounding in place. */
    n = backward(MSDA_F16, 2, 900, MSDA_HOST, &ops);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(ops[1].name, "msda_backward_f16_v8");
    ck_assert_uint_eq(ops[1].params.half_sums, 0);
}
END_TEST

/* Under replicas: the workspace (`rows` rows of f16 replicas, then under half sums 16 bytes of
 * bounds) allocated and zeroed with grad_value: by two memsets where the host knows the table,
 * else (`device`) by one kernel that plans as the backward, a wave at most; [the bounds];
 * `kernel` planning the replicas itself with `limit`; then f16's gather of the replicas (one wave
 * at most, 8 elements a thread), or under half sums the rounding in place that gathers them too,
 * a row of blocks a batch element. */
static void assert_replicas(const fake_launch_op *ops, int n, const char *kernel, int64_t N, int64_t rows,
                            int32_t limit, int half_sums, int device) {
    const size_t value_elems = (size_t)N * DETR_S * 8 * 32, replica_bytes = (size_t)N * rows * 8 * 32 * 2;
    int i = 0;
    ck_assert_int_eq(n, (half_sums ? 5 : 4) + !device);
    if (!device) {
        ck_assert_int_eq(ops[i].kind, FAKE_MEMSET);
        ck_assert_uint_eq(ops[i].address, (uintptr_t)NOWHERE(5));
        ck_assert_uint_eq(ops[i++].bytes, value_elems * 2);
    }
    ck_assert_int_eq(ops[i].kind, FAKE_ALLOC);
    ck_assert_uint_eq(ops[i++].bytes, replica_bytes + (half_sums ? 16 : 0));
    const uintptr_t ws = ops[i - 1].address;
    if (!device) {
        ck_assert_int_eq(ops[i].kind, FAKE_MEMSET);
        ck_assert_uint_eq(ops[i].address, ws);
        ck_assert_uint_eq(ops[i++].bytes, replica_bytes + (half_sums ? 16 : 0));
    } else {
        ck_assert_int_eq(ops[i].kind, FAKE_LAUNCH);
        ck_assert_str_eq(ops[i].name, half_sums ? "msda_zero_backward_bf16" : "msda_zero_backward_f16");
        ck_assert_uint_eq(ops[i].params.output, (uintptr_t)NOWHERE(5));
        ck_assert_int_eq(ops[i].params.threads, value_elems);
        ck_assert_uint_eq(ops[i].params.buffer, rows ? ws : 0);
        ck_assert_int_eq(ops[i].params.buffer_spatial, rows);
        ck_assert_int_eq(ops[i].params.replica_adds, limit);
        ck_assert_int_eq(ops[i].params.chunks, 8);
        ck_assert_uint_eq(ops[i].params.half_sums, half_sums ? ws + replica_bytes : 0);
        ck_assert_uint_eq(ops[i].grid_y, 1);
        ck_assert_uint_le(ops[i++].grid, WAVE);
    }
    if (half_sums) ck_assert_str_eq(ops[i++].name, "msda_half_bounds_bf16");
    ck_assert_int_eq(ops[i].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[i].name, kernel);
    ck_assert_uint_eq(ops[i].params.buffer, rows ? ws : 0);
    ck_assert_int_eq(ops[i].params.buffer_spatial, rows);
    ck_assert_int_eq(ops[i].params.replica_adds, limit);
    ck_assert_int_eq(ops[i].params.pair_exchange, 0);
    ck_assert_uint_eq(ops[i++].params.half_sums, half_sums ? ws + replica_bytes : 0);
    ck_assert_int_eq(ops[i].kind, FAKE_LAUNCH);
    ck_assert_str_eq(ops[i].name, half_sums ? "msda_finish_half_bf16" : "msda_gather_replicas_f16");
    ck_assert_uint_eq(ops[i].params.buffer, rows ? ws : 0);
    ck_assert_uint_eq(ops[i].params.output, (uintptr_t)NOWHERE(5));
    ck_assert_int_eq(ops[i].params.buffer_spatial, rows);
    ck_assert_int_eq(ops[i].params.replica_adds, limit);
    ck_assert_int_eq(ops[i].params.chunks, 8);
    ck_assert_uint_eq(ops[i].params.half_sums, half_sums ? ws + replica_bytes : 0);
    if (half_sums) {
        ck_assert_int_eq(ops[i].params.threads, value_elems);
        ck_assert_uint_eq(ops[i].grid_y, N);
        ck_assert_uint_le((uint64_t)ops[i].grid * ops[i].grid_y, WAVE);
    } else {
        ck_assert_uint_eq(ops[i].grid_y, 1);
        ck_assert_uint_le(ops[i].grid, WAVE);
    }
}

START_TEST(the_16bit_backward_sums_its_coarse_levels_in_f16_replicas) {
    load_fake_driver_as(&sm90_replicas_config);
    const fake_launch_op *ops;
    /* f16 encoder, host table: levels 2 and 3 over 3 and 11 replicas (msda_plan.h). */
    int n = backward(MSDA_F16, 2, DETR_S, MSDA_HOST, &ops);
    assert_replicas(ops, n, "msda_backward_f16_v8", 2, 3 * 850 + 11 * 221, 128, 0, 0);
    /* A device table: room for the replicas of any table of these sizes. */
    n = backward(MSDA_F16, 2, DETR_S, MSDA_DEVICE, &ops);
    assert_replicas(ops, n, "msda_backward_f16_v8", 2, msda_replica_rows_bound(4, DETR_S, DETR_S, 4, 128), 128, 0, 1);
    /* bf16 under half sums, at its own limit: levels 1-3 over 3, 11 and 41. */
    n = backward(MSDA_BF16, 2, DETR_S, MSDA_HOST, &ops);
    assert_replicas(ops, n, "msda_backward_bf16_half_v8", 2, 3 * 3350 + 11 * 850 + 41 * 221, 32, 1, 0);
    n = backward(MSDA_BF16, 2, DETR_S, MSDA_DEVICE, &ops);
    assert_replicas(ops, n, "msda_backward_bf16_half_v8", 2, msda_replica_rows_bound(4, DETR_S, DETR_S, 4, 32), 32, 1, 1);
    /* The bf16 decoder: the coarsest level over 3. */
    n = backward(MSDA_BF16, 2, 900, MSDA_HOST, &ops);
    assert_replicas(ops, n, "msda_backward_bf16_half_v8", 2, 3 * 221, 32, 1, 0);
    /* bf16 with nothing over its limit (300 queries: 22 adds an element on the coarsest level):
     * no replicas, the workspace only the bounds. */
    n = backward(MSDA_BF16, 2, 300, MSDA_HOST, &ops);
    assert_replicas(ops, n, "msda_backward_bf16_half_v8", 2, 0, 32, 1, 0);
    /* A device table whose plan replicates nothing (300 queries): the kernels find that, the
     * workspace having room for any table of the sizes. */
    n = backward(MSDA_BF16, 2, 300, MSDA_DEVICE, &ops);
    assert_replicas(ops, n, "msda_backward_bf16_half_v8", 2, msda_replica_rows_bound(4, DETR_S, 300, 4, 32), 32, 1, 1);
    /* A row of 4 elements (M * D = 1 * 4): one element a thread in the zeroing and the rounding. */
    msda_backward_args odd = backward_args(MSDA_BF16, 2, 900, MSDA_DEVICE);
    odd.sizes.heads = 1, odd.sizes.channels = 4;
    n = backward_of(&odd, &ops);
    ck_assert_int_eq(n, 5);
    ck_assert_str_eq(ops[1].name, "msda_zero_backward_bf16");
    ck_assert_int_eq(ops[1].params.chunks, 1);
    ck_assert_str_eq(ops[4].name, "msda_finish_half_bf16");
    ck_assert_int_eq(ops[4].params.chunks, 1);
    /* Replicas past what a tensor may hold (2^30 queries of 1024 points on a device table, 2^20
     * channels: about 2^57 elements): every level in the f32 buffer instead (S rows). */
    msda_backward_args huge = backward_args(MSDA_F16, 1, 1, MSDA_DEVICE);
    huge.sizes.heads = 1, huge.sizes.channels = (int64_t)1 << 20;
    huge.sizes.queries = (int64_t)1 << 30, huge.sizes.points = 1024;
    size_t bytes = 0;
    msda_error err;
    ck_assert_int_eq(msda_backward_cuda_workspace(&huge, &bytes, &err), MSDA_OK);
    ck_assert_uint_eq(bytes, (size_t)DETR_S * ((size_t)1 << 20) * 4);
    huge.workspace = NOWHERE(9), huge.workspace_bytes = bytes; /* the fake driver allocates for real */
    n = backward_of(&huge, &ops);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ops[0].kind, FAKE_MEMSET);
    ck_assert_str_eq(ops[1].name, "msda_backward_f16_buffer_v4");
    ck_assert_uint_eq(ops[1].params.buffer_levels, 0xfu);
    ck_assert_int_eq(ops[1].params.replica_adds, 0);
    ck_assert_str_eq(ops[2].name, "msda_convert_f16");
    /* The workspace the caller is told to bring is what the call takes. */
    msda_backward_args a = backward_args(MSDA_BF16, 2, 900, MSDA_HOST);
    ck_assert_int_eq(msda_backward_cuda_workspace(&a, &bytes, &err), MSDA_OK);
    ck_assert_uint_eq(bytes, (size_t)2 * 3 * 221 * 8 * 32 * 2 + 16);
    /* The f16 decoder: no level over the limit, nothing replicated, no gather. */
    n = backward(MSDA_F16, 2, 900, MSDA_HOST, &ops);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(ops[1].name, "msda_backward_f16_v8");
    ck_assert_int_eq(ops[1].params.buffer_spatial, 0);
    /* bf16 past half sums' 2^20 adds keeps the f32 buffer (bf16's own rule). */
    n = backward(MSDA_BF16, 1, 262145, MSDA_DEVICE, &ops);
    ck_assert_str_eq(ops[2].name, "msda_backward_bf16_buffer_v4");
    ck_assert_int_eq(ops[2].params.replica_adds, 0);
}
END_TEST

/* Device code whose msda_config contradicts itself is refused when loaded, naming what, before
 * anything is queued. */
static void assert_refused(const msda_device_config *cfg, msda_dtype dtype, const char *what) {
    load_fake_driver_as(cfg);
    const msda_backward_args a = backward_args(dtype, 2, 900, MSDA_HOST);
    msda_error err;
    ck_assert_int_eq(msda_backward_cuda(&a, NULL, &err), MSDA_ERR_NO_KERNEL_IMAGE);
    ck_assert_msg(strstr(err.message, what), "%s", err.message);
    const fake_launch_op *ops;
    ck_assert_int_eq(recorded(&ops), 0);
}

START_TEST(device_code_with_replicas_but_no_mixed_f16_strategy_is_refused) {
    msda_device_config cfg = sm90_replicas_config;
    cfg.f16_atomic = MSDA_ATOMIC_F32_BUFFER;
    assert_refused(&cfg, MSDA_F16, "replicas");
}
END_TEST

START_TEST(device_code_with_half_sums_but_no_mixed_bf16_strategy_is_refused) {
    msda_device_config cfg = sm90_config;
    cfg.bf16_atomic = MSDA_ATOMIC_F32_BUFFER;
    assert_refused(&cfg, MSDA_BF16, "half sums");
}
END_TEST

/* The backward's launch: its queries' spread and the threads that cover its slots. */
static const fake_launch_op *backward_kernel(msda_dtype dtype, int64_t N, int64_t Lq) {
    const fake_launch_op *ops;
    const int n = backward(dtype, N, Lq, MSDA_HOST, &ops);
    for (int i = 0; i < n; i++)
        if (ops[i].kind == FAKE_LAUNCH && strncmp(ops[i].name, "msda_backward_", 14) == 0) return &ops[i];
    ck_abort_msg("no backward kernel launched");
    return NULL;
}

START_TEST(the_backward_spreads_its_queries_in_runs_of_at_least_128) {
    load_fake_driver();
    /* The encoder: 128 runs (the most sm_90's code takes) of 140 queries, 99 slots past the end. */
    const fake_launch_op *op = backward_kernel(MSDA_F16, 2, DETR_S);
    ck_assert_int_eq(op->params.spread_log2, 7);
    ck_assert_int_eq(op->params.spread_run, 140);
    ck_assert_int_eq(op->params.spread_slots, 140 * 128);
    ck_assert_int_eq(op->params.threads, 2 * 140 * 128 * 8 * 4); /* 4 lanes a head */
    ck_assert_uint_eq(op->grid, blocks_of(op));
    op = backward_kernel(MSDA_F32, 2, DETR_S);
    ck_assert_int_eq(op->params.spread_log2, 7);
    ck_assert_int_eq(op->params.threads, 2 * 140 * 128 * 8 * 8); /* 8 lanes a head */
    /* The decoder's 900 queries: 4 runs of 225. */
    op = backward_kernel(MSDA_F16, 2, 900);
    ck_assert_int_eq(op->params.spread_log2, 2);
    ck_assert_int_eq(op->params.spread_run, 225);
    ck_assert_int_eq(op->params.threads, 2 * 900 * 8 * 4);
    /* 255 queries: two runs of 128 (four would be 64); 256: two (four: exactly 64); 127: in order. */
    op = backward_kernel(MSDA_F16, 1, 255);
    ck_assert_int_eq(op->params.spread_log2, 1);
    ck_assert_int_eq(op->params.spread_slots, 256);
    ck_assert_int_eq(op->params.threads, 256 * 8 * 4);
    op = backward_kernel(MSDA_F16, 1, 256);
    ck_assert_int_eq(op->params.spread_log2, 1);
    op = backward_kernel(MSDA_F16, 1, 127);
    ck_assert_int_eq(op->params.spread_log2, 0);
    ck_assert_int_eq(op->params.spread_run, 127);
    ck_assert_int_eq(op->params.spread_slots, 127);
    ck_assert_int_eq(op->params.threads, 127 * 8 * 4);
}
END_TEST

/* A batch element's heads in two phases (sm_90's most) where its slots need more than a wave of
 * threads (528 blocks of 256: 135168); within a wave, and where M is odd, all together. */
START_TEST(the_backward_takes_the_heads_in_phases_past_one_wave) {
    load_fake_driver();
    /* The encoder: 140 * 128 slots of 8 heads, 8 lanes a head (f32), 4 (f16): past a wave. */
    ck_assert_int_eq(backward_kernel(MSDA_F32, 2, DETR_S)->params.head_phases_log2, 1);
    ck_assert_int_eq(backward_kernel(MSDA_F16, 1, DETR_S)->params.head_phases_log2, 1);
    /* The decoder: 900 * 8 * 8 = 57600 threads an element, in one wave whatever the batch. */
    ck_assert_int_eq(backward_kernel(MSDA_F32, 2, 900)->params.head_phases_log2, 0);
    ck_assert_int_eq(backward_kernel(MSDA_F32, 64, 900)->params.head_phases_log2, 0);
    /* 2112 queries (16 runs of 132): 135168 threads, exactly a wave; 2113 (16 runs of 133): past it. */
    ck_assert_int_eq(backward_kernel(MSDA_F32, 1, 2112)->params.head_phases_log2, 0);
    ck_assert_int_eq(backward_kernel(MSDA_F32, 1, 2113)->params.head_phases_log2, 1);
    /* Three heads: no two phases of whole heads. */
    msda_backward_args a = backward_args(MSDA_F32, 1, DETR_S, MSDA_HOST);
    a.sizes.heads = 3;
    const fake_launch_op *ops;
    const int n = backward_of(&a, &ops);
    ck_assert_int_eq(ops[n - 1].kind, FAKE_LAUNCH);
    ck_assert_int_eq(ops[n - 1].params.heads, 3);
    ck_assert_int_eq(ops[n - 1].params.head_phases_log2, 0);
}
END_TEST

/* deterministic: the workspace (an int64 sum an element, a 4-bit flag an element, 32 bytes of
 * bounds) allocated and zeroed; the bounds; the exact-sum backward; then the rounding of every
 * element into grad_value, which is not zeroed first. Every dtype, whatever its strategy. */
static void assert_exact(const fake_launch_op *ops, int n, const char *bounds, const char *kernel,
                         const char *finish, int64_t N, int64_t Lq, int logits) {
    const size_t elems = (size_t)N * DETR_S * 8 * 32, flag_bytes = (elems + 31) / 32 * 16;
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(ops[0].kind, FAKE_ALLOC);
    ck_assert_uint_eq(ops[0].bytes, elems * 8 + flag_bytes + 32);
    const uintptr_t ws = ops[0].address;
    ck_assert_int_eq(ops[1].kind, FAKE_MEMSET);
    ck_assert_uint_eq(ops[1].address, ws);
    ck_assert_uint_eq(ops[1].bytes, elems * 8 + flag_bytes + 32);
    for (int i = 2; i < 5; i++) {
        ck_assert_int_eq(ops[i].kind, FAKE_LAUNCH);
        ck_assert_uint_eq(ops[i].params.buffer, ws);
        ck_assert_uint_eq(ops[i].params.half_sums, ws + elems * 8 + flag_bytes);
        ck_assert_int_eq(ops[i].params.weights_logits, logits);
        ck_assert_int_eq(ops[i].params.queries, Lq);
        ck_assert_int_eq(ops[i].params.points, 4);
        ck_assert_int_eq(ops[i].params.groups, N * Lq * 8);
        ck_assert_int_eq(ops[i].params.replica_adds, 0);
        ck_assert_int_eq(ops[i].params.buffer_spatial, 0);
    }
    ck_assert_str_eq(ops[2].name, bounds);
    ck_assert_uint_eq(ops[2].params.grad_output, (uintptr_t)NOWHERE(4));
    ck_assert_uint_eq(ops[2].params.weights, (uintptr_t)NOWHERE(3)); /* logits too: checked for inf and NaN */
    ck_assert_uint_le(ops[2].grid, WAVE);
    ck_assert_str_eq(ops[3].name, kernel);
    ck_assert_uint_eq(ops[3].params.output, (uintptr_t)NOWHERE(5));
    ck_assert_str_eq(ops[4].name, finish);
    ck_assert_uint_eq(ops[4].params.output, (uintptr_t)NOWHERE(5));
    ck_assert_int_eq(ops[4].params.threads, elems);
    ck_assert_uint_le(ops[4].grid, WAVE);
}

static msda_backward_args exact_args(msda_dtype dtype, int64_t N, int64_t Lq, msda_memory table) {
    msda_backward_args a = backward_args(dtype, N, Lq, table);
    a.deterministic = 1;
    return a;
}

START_TEST(the_deterministic_backward_sums_grad_value_exactly_then_rounds_it) {
    load_fake_driver();
    const fake_launch_op *ops;
    msda_backward_args a = exact_args(MSDA_F32, 2, DETR_S, MSDA_HOST);
    int n = backward_of(&a, &ops);
    assert_exact(ops, n, "msda_exact_bounds_f32", "msda_backward_f32_exact_v4", "msda_exact_finish_f32", 2, DETR_S, 0);
    /* The launch layout of the plain backward: queries spread, heads in phases. */
    ck_assert_int_eq(ops[3].params.head_phases_log2, 1);
    ck_assert_int_gt(ops[3].params.spread_log2, 0);
    /* bf16 (half sums by default) and f16 (replicas by default) take the same path. */
    a = exact_args(MSDA_BF16, 2, 900, MSDA_DEVICE);
    n = backward_of(&a, &ops);
    assert_exact(ops, n, "msda_exact_bounds_bf16", "msda_backward_bf16_exact_v4", "msda_exact_finish_bf16", 2, 900, 0);
    ck_assert_int_eq(ops[3].params.coord_f32, 0);
    a = exact_args(MSDA_F16, 2, 900, MSDA_HOST);
    a.coord_type = MSDA_COORD_F32;
    a.weights = MSDA_WEIGHTS_LOGITS;
    n = backward_of(&a, &ops);
    assert_exact(ops, n, "msda_exact_bounds_f16c32", "msda_backward_softmax_f16_exact_v4", "msda_exact_finish_f16",
                 2, 900, 1);
    ck_assert_int_eq(ops[3].params.coord_f32, 1);
    a.value = (const char *)NOWHERE(1) + 8; /* either coordinate type: 4 elements a lane */
    n = backward_of(&a, &ops);
    ck_assert_str_eq(ops[3].name, "msda_backward_softmax_f16_exact_v4");
    a = exact_args(MSDA_F64, 1, 900, MSDA_HOST);
    n = backward_of(&a, &ops);
    assert_exact(ops, n, "msda_exact_bounds_f64", "msda_backward_f64_exact_v2", "msda_exact_finish_f64", 1, 900, 0);
    /* A value off its 16-byte alignment: staged into an aligned copy. */
    a = exact_args(MSDA_F32, 1, 900, MSDA_HOST);
    a.value = (const char *)NOWHERE(1) + 4;
    n = backward_of(&a, &ops);
    ck_assert_str_eq(ops[1].name, "msda_restride");
    ck_assert_str_eq(launch_of(ops, n, "msda_backward_")->name, "msda_backward_f32_exact_v4");
    /* The workspace the caller is told to bring is what the call takes; too small is refused
     * before anything is queued. */
    a = exact_args(MSDA_BF16, 2, DETR_S, MSDA_HOST);
    size_t bytes = 0;
    msda_error err;
    ck_assert_int_eq(msda_backward_cuda_workspace(&a, &bytes, &err), MSDA_OK);
    const size_t elems = (size_t)2 * DETR_S * 8 * 32;
    ck_assert_uint_eq(bytes, elems * 8 + elems / 2 + 32);
    a.workspace = NOWHERE(9);
    a.workspace_bytes = bytes;
    n = backward_of(&a, &ops);
    ck_assert_int_eq(n, 4); /* no allocation */
    ck_assert_int_eq(ops[0].kind, FAKE_MEMSET);
    ck_assert_uint_eq(ops[0].address, (uintptr_t)NOWHERE(9));
    ck_assert_uint_eq(ops[1].params.half_sums, (uintptr_t)NOWHERE(9) + bytes - 32);
    a.workspace_bytes = bytes - 1;
    ck_assert_int_eq(msda_backward_cuda(&a, NULL, &err), MSDA_ERR_BAD_ARGUMENT);
    ck_assert_int_eq(recorded(&ops), 0);
    /* Neither 0 nor 1: refused by the checks, on both paths. */
    a.deterministic = 2;
    ck_assert_int_eq(msda_backward_cuda(&a, NULL, &err), MSDA_ERR_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "deterministic is 2"));
    ck_assert_int_eq(msda_validate_backward(&a, &err), MSDA_ERR_BAD_ARGUMENT);
    ck_assert_int_eq(recorded(&ops), 0);
}
END_TEST

/* A launch of msda_restride: `rows` rows of `from` elements of `elem` bytes at src into rows of
 * `to` at dst, in units of `unit` bytes, in a wave at most. */
static void assert_restride(const fake_launch_op *op, uintptr_t src, int64_t from, uintptr_t dst, int64_t to,
                            int64_t rows, int64_t elem, int unit) {
    ck_assert_int_eq(op->kind, FAKE_LAUNCH);
    ck_assert_str_eq(op->name, "msda_restride");
    ck_assert_uint_eq(op->params.value, src);
    ck_assert_uint_eq(op->params.output, dst);
    ck_assert_int_eq(op->params.chunks, unit);
    ck_assert_int_eq(op->params.spatial, from * elem / unit);
    ck_assert_int_eq(op->params.queries, to * elem / unit);
    ck_assert_int_eq(op->params.groups, rows);
    ck_assert_uint_le(op->grid, WAVE);
}

static size_t round256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* No kernel takes one element a lane: a D that no vector of the row divides, or a pointer none
 * is aligned to, runs as the problem of D rounded up, on zero-padded copies, and the results are
 * taken back out (msda_launch.c, staging). */
START_TEST(a_problem_no_vector_fits_is_staged_in_padded_copies) {
    load_fake_driver();
    const fake_launch_op *ops;
    msda_error err;
    /* f32 forward, D = 33: value and output in rows of 36 (f32's only vectors are 4 wide). */
    msda_forward_args f = {.dtype = MSDA_F32, .sizes = detr_sizes(2, 900), .spatial_shapes = detr_shapes,
                           .level_start = detr_starts, .value = NOWHERE(1), .sampling_locations = NOWHERE(2),
                           .attention_weights = NOWHERE(3), .output = NOWHERE(4)};
    f.sizes.channels = 33;
    ck_assert_msg(msda_forward_cuda(&f, NULL, &err) == MSDA_OK, "forward: %s", err.message);
    int n = recorded(&ops);
    ck_assert_int_eq(n, 4);
    const int64_t value_rows = 2 * DETR_S * 8, output_rows = 2 * 900 * 8;
    const size_t value_bytes = round256((size_t)value_rows * 36 * 4);
    ck_assert_int_eq(ops[0].kind, FAKE_ALLOC);
    ck_assert_uint_eq(ops[0].bytes, value_bytes + (size_t)output_rows * 36 * 4);
    const uintptr_t ws = ops[0].address;
    assert_restride(&ops[1], (uintptr_t)NOWHERE(1), 33, ws, 36, value_rows, 4, 4);
    ck_assert_str_eq(ops[2].name, "msda_forward_f32_v4"); /* 9 chunks: not the points kernel's */
    ck_assert_int_eq(ops[2].params.channels, 36);
    ck_assert_uint_eq(ops[2].params.value, ws);
    ck_assert_uint_eq(ops[2].params.output, ws + value_bytes);
    assert_restride(&ops[3], ws + value_bytes, 36, (uintptr_t)NOWHERE(4), 33, output_rows, 4, 4);
    /* A 16-bit value with f32 coordinates, D = 12: only 8 elements a lane take f32 ones, so 16. */
    f.dtype = MSDA_F16;
    f.coord_type = MSDA_COORD_F32;
    f.sizes.channels = 12;
    ck_assert_msg(msda_forward_cuda(&f, NULL, &err) == MSDA_OK, "forward: %s", err.message);
    n = recorded(&ops);
    ck_assert_int_eq(n, 4);
    assert_restride(&ops[1], (uintptr_t)NOWHERE(1), 12, ops[0].address, 16, value_rows, 2, 8);
    ck_assert_str_eq(ops[2].name, "msda_forward_points_f16c32_v8");
    ck_assert_int_eq(ops[2].params.coord_f32, 1);
    /* D = 32 but a value 2 bytes off its boundary: staged as it is, copied in 2-byte units. */
    f.sizes.channels = 32;
    f.value = (const char *)NOWHERE(1) + 2;
    ck_assert_msg(msda_forward_cuda(&f, NULL, &err) == MSDA_OK, "forward: %s", err.message);
    n = recorded(&ops);
    ck_assert_int_eq(n, 4);
    assert_restride(&ops[1], (uintptr_t)NOWHERE(1) + 2, 32, ops[0].address, 32, value_rows, 2, 2);
    assert_restride(&ops[3], ops[0].address + round256((size_t)value_rows * 32 * 2), 32, (uintptr_t)NOWHERE(4), 32,
                    output_rows, 2, 8);
    f.value = NOWHERE(1);
    f.sizes.channels = 12;
    /* Its own coordinates have 4 elements a lane: D = 12 fits, nothing staged. */
    f.coord_type = MSDA_COORD_SAME;
    ck_assert_msg(msda_forward_cuda(&f, NULL, &err) == MSDA_OK, "forward: %s", err.message);
    ck_assert_int_eq(recorded(&ops), 1);
    ck_assert_str_eq(ops[0].name, "msda_forward_f16_v4");

    /* f32 backward, D = 33: value, grad_output and grad_value in rows of 36 in one workspace
     * (no buffer: the staged call needs none of its own), grad_value zeroed there, taken out. */
    msda_backward_args b = backward_args(MSDA_F32, 2, 900, MSDA_HOST);
    b.sizes.channels = 33;
    size_t bytes = 0;
    ck_assert_int_eq(msda_backward_cuda_workspace(&b, &bytes, &err), MSDA_OK);
    const size_t output_bytes = round256((size_t)output_rows * 36 * 4);
    ck_assert_uint_eq(bytes, 2 * value_bytes + output_bytes);
    n = backward_of(&b, &ops);
    ck_assert_int_eq(n, 6);
    ck_assert_int_eq(ops[0].kind, FAKE_ALLOC);
    ck_assert_uint_eq(ops[0].bytes, bytes);
    const uintptr_t bws = ops[0].address, grad_value = bws + value_bytes + output_bytes;
    assert_restride(&ops[1], (uintptr_t)NOWHERE(1), 33, bws, 36, value_rows, 4, 4);
    assert_restride(&ops[2], (uintptr_t)NOWHERE(4), 33, bws + value_bytes, 36, output_rows, 4, 4);
    ck_assert_int_eq(ops[3].kind, FAKE_MEMSET);
    ck_assert_uint_eq(ops[3].address, grad_value);
    ck_assert_uint_eq(ops[3].bytes, (size_t)value_rows * 36 * 4);
    ck_assert_str_eq(ops[4].name, "msda_backward_f32_v4");
    ck_assert_int_eq(ops[4].params.channels, 36);
    ck_assert_uint_eq(ops[4].params.grad_output, bws + value_bytes);
    ck_assert_uint_eq(ops[4].params.output, grad_value);
    ck_assert_uint_eq(ops[4].params.grad_locations, (uintptr_t)NOWHERE(6)); /* written in place */
    ck_assert_uint_eq(ops[4].params.grad_weights, (uintptr_t)NOWHERE(7));
    assert_restride(&ops[5], grad_value, 36, (uintptr_t)NOWHERE(5), 33, value_rows, 4, 4);
    /* The caller's workspace of that size: nothing allocated; one byte less is refused before
     * anything is queued. */
    b.workspace = NOWHERE(9);
    b.workspace_bytes = bytes;
    n = backward_of(&b, &ops);
    ck_assert_int_eq(n, 5);
    assert_restride(&ops[0], (uintptr_t)NOWHERE(1), 33, (uintptr_t)NOWHERE(9), 36, value_rows, 4, 4);
    b.workspace_bytes = bytes - 1;
    ck_assert_int_eq(msda_backward_cuda(&b, NULL, &err), MSDA_ERR_BAD_ARGUMENT);
    ck_assert_int_eq(recorded(&ops), 0);
    /* The deterministic backward, D = 33: its own workspace for the staged rows after the copies. */
    b = exact_args(MSDA_F32, 2, 900, MSDA_HOST);
    b.sizes.channels = 33;
    ck_assert_int_eq(msda_backward_cuda_workspace(&b, &bytes, &err), MSDA_OK);
    const size_t elems = (size_t)value_rows * 36;
    ck_assert_uint_eq(bytes, 2 * value_bytes + output_bytes + elems * 8 + (elems + 31) / 32 * 16 + 32);
    n = backward_of(&b, &ops);
    ck_assert_uint_eq(ops[0].bytes, bytes);
    const fake_launch_op *k = launch_of(ops, n, "msda_backward_");
    ck_assert_str_eq(k->name, "msda_backward_f32_exact_v4");
    ck_assert_uint_eq(k->params.buffer, ops[0].address + 2 * value_bytes + output_bytes);
    assert_restride(&ops[n - 1], ops[0].address + value_bytes + output_bytes, 36, (uintptr_t)NOWHERE(5), 33,
                    value_rows, 4, 4);
}
END_TEST

/* f32 coordinates beside a 16-bit value have mixed kernels of 8 elements a lane only, whose
 * buffered levels need lane pairs (D / 8 a power of two up to 32): past that, every level goes
 * through the buffer, in the all-buffer kernel that takes either coordinate type. */
START_TEST(f32_coordinates_without_lane_pairs_take_the_all_buffer_backward) {
    load_fake_driver(); /* no replicas: the f16 encoder buffers its coarse levels */
    const fake_launch_op *ops;
    msda_backward_args a = backward_args(MSDA_F16, 2, DETR_S, MSDA_HOST);
    a.coord_type = MSDA_COORD_F32;
    a.sizes.channels = 48;
    size_t bytes = 0;
    msda_error err;
    ck_assert_int_eq(msda_backward_cuda_workspace(&a, &bytes, &err), MSDA_OK);
    ck_assert_uint_eq(bytes, (size_t)2 * DETR_S * 8 * 48 * 4);
    int n = backward_of(&a, &ops);
    ck_assert_int_eq(n, 4);
    ck_assert_uint_eq(ops[0].bytes, bytes);
    ck_assert_str_eq(ops[2].name, "msda_backward_f16_buffer_v4");
    ck_assert_int_eq(ops[2].params.coord_f32, 1);
    ck_assert_uint_eq(ops[2].params.buffer_levels, 0xfu);
    /* Its own coordinates keep the mixed backward at 4 elements a lane. */
    a.coord_type = MSDA_COORD_SAME;
    n = backward_of(&a, &ops);
    ck_assert_str_eq(launch_of(ops, n, "msda_backward_")->name, "msda_backward_f16_v4");
}
END_TEST

/* ABI 5. Each launch of a call is told each level's points (P on every level where level_points
 * is NULL), their sum, which the kernels step a group's points by, and the sampling. */
static void assert_told(const fake_launch_op *op, const int64_t *level_points, msda_sampling sampling) {
    int32_t total = 0;
    for (int l = 0; l < 4; l++) {
        const int64_t count = level_points ? level_points[l] : 4;
        ck_assert_msg(op->params.level_points[l] == count, "%s: level_points[%d] is %d, expected %lld", op->name, l,
                      (int)op->params.level_points[l], (long long)count);
        total += (int32_t)count;
    }
    for (int l = 4; l < MSDA_KP_MAX_LEVELS; l++) ck_assert_int_eq(op->params.level_points[l], 0);
    ck_assert_msg(op->params.total_points == total, "%s: total_points is %d, expected %d", op->name,
                  (int)op->params.total_points, (int)total);
    ck_assert_int_eq(op->params.points, 4); /* the largest level's */
    ck_assert_int_eq(op->params.levels, 4);
    ck_assert_msg(op->params.sampling == (int32_t)sampling, "%s: sampling is %d", op->name, (int)op->params.sampling);
}

/* The forward of `dtype` on Deformable-DETR's levels with these counts and sampling. */
static const fake_launch_op *forward_points(msda_dtype dtype, int64_t N, int64_t Lq, const int64_t *level_points,
                                            msda_sampling sampling, msda_memory table) {
    const msda_forward_args a = {.dtype = dtype, .sizes = detr_sizes(N, Lq), .spatial_shapes = detr_shapes,
                                 .level_start = detr_starts, .value = NOWHERE(1), .sampling_locations = NOWHERE(2),
                                 .attention_weights = NOWHERE(3), .output = NOWHERE(4), .level_table = table,
                                 .level_points = level_points, .sampling = sampling};
    msda_error err;
    ck_assert_msg(msda_forward_cuda(&a, NULL, &err) == MSDA_OK, "forward: %s", err.message);
    const fake_launch_op *ops;
    ck_assert_int_eq(recorded(&ops), 1);
    ck_assert_int_eq(ops[0].kind, FAKE_LAUNCH);
    assert_told(&ops[0], level_points, sampling);
    return &ops[0];
}

/* The points kernel (msda_forward_points_*) steps by 4 points a level and samples bilinearly: it
 * takes P = 4 on every level, given as NULL or as counts, and only bilinear sampling. A level of
 * fewer points, or discrete sampling, takes the general forward, whichever dtype or table. */
START_TEST(only_four_bilinear_points_on_every_level_take_the_points_forward) {
    load_fake_driver();
    static const int64_t four[] = {4, 4, 4, 4}, one_short[] = {4, 4, 3, 4}, rising[] = {1, 2, 3, 4};
    const fake_launch_op *op = forward_points(MSDA_F32, 2, 900, NULL, MSDA_SAMPLING_BILINEAR, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_points_f32_v4");
    op = forward_points(MSDA_F32, 2, 900, four, MSDA_SAMPLING_BILINEAR, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_points_f32_v4");
    op = forward_points(MSDA_F32, 2, 900, one_short, MSDA_SAMPLING_BILINEAR, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_f32_v4");
    op = forward_points(MSDA_F32, 2, 900, rising, MSDA_SAMPLING_BILINEAR, MSDA_DEVICE);
    ck_assert_str_eq(op->name, "msda_forward_f32_v4");
    ck_assert_uint_eq(op->params.level_shapes, (uintptr_t)detr_shapes); /* the counts stay on the host */
    op = forward_points(MSDA_F32, 2, 900, NULL, MSDA_SAMPLING_DISCRETE, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_f32_v4");
    op = forward_points(MSDA_F32, 2, 900, four, MSDA_SAMPLING_DISCRETE, MSDA_DEVICE);
    ck_assert_str_eq(op->name, "msda_forward_f32_v4");
    op = forward_points(MSDA_F32, 2, 900, rising, MSDA_SAMPLING_DISCRETE, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_f32_v4");
    /* The 16-bit encoder, which the points kernel runs as one wave: the general one, a block per
     * tile. */
    op = forward_points(MSDA_F16, 2, DETR_S, NULL, MSDA_SAMPLING_BILINEAR, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_points_f16_v8");
    op = forward_points(MSDA_F16, 2, DETR_S, one_short, MSDA_SAMPLING_BILINEAR, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_f16_v8");
    ck_assert_uint_eq(op->grid, blocks_of(op));
    op = forward_points(MSDA_BF16, 2, DETR_S, NULL, MSDA_SAMPLING_DISCRETE, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_bf16_v8");
    op = forward_points(MSDA_F64, 1, 900, rising, MSDA_SAMPLING_DISCRETE, MSDA_HOST);
    ck_assert_str_eq(op->name, "msda_forward_f64_v2");
}
END_TEST

/* The same with f32 coordinates beside a 16-bit value and with logits (the fused softmax, over
 * the sum of the levels' points). */
START_TEST(per_level_forwards_of_other_coordinates_and_logits_are_told_too) {
    load_fake_driver();
    static const int64_t rising[] = {1, 2, 3, 4};
    msda_forward_args a = {.dtype = MSDA_BF16, .coord_type = MSDA_COORD_F32, .sizes = detr_sizes(2, 900),
                           .spatial_shapes = detr_shapes, .level_start = detr_starts, .value = NOWHERE(1),
                           .sampling_locations = NOWHERE(2), .attention_weights = NOWHERE(3), .output = NOWHERE(4),
                           .level_points = rising};
    msda_error err;
    const fake_launch_op *ops;
    ck_assert_msg(msda_forward_cuda(&a, NULL, &err) == MSDA_OK, "%s", err.message);
    ck_assert_int_eq(recorded(&ops), 1);
    ck_assert_str_eq(ops[0].name, "msda_forward_bf16c32_v8");
    ck_assert_int_eq(ops[0].params.coord_f32, 1);
    assert_told(&ops[0], rising, MSDA_SAMPLING_BILINEAR);
    a.dtype = MSDA_F32, a.coord_type = MSDA_COORD_SAME, a.weights = MSDA_WEIGHTS_LOGITS;
    a.sampling = MSDA_SAMPLING_DISCRETE;
    ck_assert_msg(msda_forward_cuda(&a, NULL, &err) == MSDA_OK, "%s", err.message);
    ck_assert_int_eq(recorded(&ops), 1);
    ck_assert_str_eq(ops[0].name, "msda_forward_softmax_f32_v4");
    assert_told(&ops[0], rising, MSDA_SAMPLING_DISCRETE);
    a.level_points = NULL, a.sampling = MSDA_SAMPLING_BILINEAR; /* the uniform fused forward */
    ck_assert_msg(msda_forward_cuda(&a, NULL, &err) == MSDA_OK, "%s", err.message);
    ck_assert_int_eq(recorded(&ops), 1);
    ck_assert_str_eq(ops[0].name, "msda_forward_points_softmax_f32_v4");
}
END_TEST

/* Every launch of a backward (zeroing, bounds, the backward, the rounding and conversions) is
 * told the counts and the sampling: the half sums' and the exact sums' bounds read
 * groups * total_points weights. The plain f32 backward, bf16's half sums, the f16 encoder's
 * buffer, and the deterministic backward; discrete sampling takes the deterministic one always
 * (msda.h: only the exact-sums kernels compile it). */
START_TEST(every_backward_launch_is_told_each_levels_points_and_the_sampling) {
    load_fake_driver();
    static const int64_t one_short[] = {4, 4, 3, 4}, rising[] = {1, 2, 3, 4};
    static const struct {
        msda_dtype dtype;
        int64_t N, Lq;
        msda_memory table;
        int deterministic;
        const char *kernel, *discrete_kernel;
    } calls[] = {
        {MSDA_F32, 2, 900, MSDA_HOST, 0, "msda_backward_f32_v4", "msda_backward_f32_exact_v4"},
        {MSDA_BF16, 2, 900, MSDA_HOST, 0, "msda_backward_bf16_half_v8", "msda_backward_bf16_exact_v4"},
        {MSDA_F16, 2, DETR_S, MSDA_DEVICE, 0, "msda_backward_f16_v8", "msda_backward_f16_exact_v4"},
        {MSDA_F32, 2, 900, MSDA_HOST, 1, "msda_backward_f32_exact_v4", "msda_backward_f32_exact_v4"},
        {MSDA_BF16, 1, 900, MSDA_DEVICE, 1, "msda_backward_bf16_exact_v4", "msda_backward_bf16_exact_v4"},
    };
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++)
        for (int k = 0; k < 3; k++) {
            const int64_t *counts = k == 0 ? one_short : k == 1 ? rising : NULL;
            const msda_sampling sampling = k == 1 ? MSDA_SAMPLING_BILINEAR : MSDA_SAMPLING_DISCRETE;
            msda_backward_args a = backward_args(calls[c].dtype, calls[c].N, calls[c].Lq, calls[c].table);
            a.level_points = counts, a.sampling = sampling, a.deterministic = calls[c].deterministic;
            const fake_launch_op *ops;
            const int n = backward_of(&a, &ops);
            const int discrete = sampling == MSDA_SAMPLING_DISCRETE;
            const char *kernel = discrete ? calls[c].discrete_kernel : calls[c].kernel;
            int launches = 0, found = 0;
            for (int i = 0; i < n; i++) {
                if (ops[i].kind != FAKE_LAUNCH) continue;
                launches++;
                found += strcmp(ops[i].name, kernel) == 0;
                assert_told(&ops[i], counts, sampling);
            }
            ck_assert_msg(found == 1, "call %zu, counts %d: %s not launched", c, k, kernel);
            ck_assert_int_ge(launches, calls[c].deterministic || discrete ? 3 : 1);
        }
}
END_TEST

TCase *kt_tcase_launch(void) {
    TCase *tc = tcase_create("launch");
    tcase_add_test(tc, the_16bit_points_forward_runs_as_one_wave_up_to_16_waves);
    tcase_add_test(tc, the_decoder_forward_splits_its_points_then_takes_one_wave);
    tcase_add_test(tc, the_unsplit_f32_points_forward_keeps_a_block_per_tile);
    tcase_add_test(tc, the_16bit_backward_buffers_what_the_plan_says);
    tcase_add_test(tc, the_f32_buffer_strategy_buffers_every_level);
    tcase_add_test(tc, each_coordinate_type_takes_the_widths_built_for_it);
    tcase_add_test(tc, the_bf16_backward_adds_its_native_levels_as_scaled_halves);
    tcase_add_test(tc, device_code_with_half_sums_but_no_mixed_bf16_strategy_is_refused);
    tcase_add_test(tc, the_16bit_backward_sums_its_coarse_levels_in_f16_replicas);
    tcase_add_test(tc, device_code_with_replicas_but_no_mixed_f16_strategy_is_refused);
    tcase_add_test(tc, the_backward_spreads_its_queries_in_runs_of_at_least_128);
    tcase_add_test(tc, the_backward_takes_the_heads_in_phases_past_one_wave);
    tcase_add_test(tc, the_deterministic_backward_sums_grad_value_exactly_then_rounds_it);
    tcase_add_test(tc, only_four_bilinear_points_on_every_level_take_the_points_forward);
    tcase_add_test(tc, per_level_forwards_of_other_coordinates_and_logits_are_told_too);
    tcase_add_test(tc, every_backward_launch_is_told_each_levels_points_and_the_sampling);
    tcase_add_test(tc, a_problem_no_vector_fits_is_staged_in_padded_copies);
    tcase_add_test(tc, f32_coordinates_without_lane_pairs_take_the_all_buffer_backward);
    return tc;
}
