/* The parameter block of every MSDA kernel, shared by the host launcher (C) and the device code
 * (CUDA C++). Fixed-width fields only, so both compilers lay it out the same way. Passed by
 * value: the level tables then live in the constant bank, next to the other parameters. */
#ifndef MSDA_KPARAMS_H
#define MSDA_KPARAMS_H

#include <stdint.h>

#define MSDA_KP_MAX_LEVELS 16

typedef struct msda_kparams {
    uint64_t value;            /* T*, (N, S, M, D) */
    uint64_t locations;        /* C*, (N, Lq, M, L, P, 2); C: T, or float (mixed precision) */
    uint64_t weights;          /* C*, (N, Lq, M, L, P) */
    uint64_t grad_output;      /* T*, (N, Lq, M, D); backward only */
    uint64_t output;           /* forward: T* output; backward: grad_value (T* or f32 buffer) */
    uint64_t grad_locations;   /* C*; backward only */
    uint64_t grad_weights;     /* C*; backward only */
    int64_t spatial;           /* S; msda_restride: a source row's units */
    int64_t queries;           /* Lq; msda_restride: a destination row's units */
    int64_t groups;            /* N * Lq * M: one group of lanes per (n, q, m); msda_restride:
                                  the rows (value from, output to) */
    int64_t threads;           /* groups times a group's threads, rounded up to whole warps;
                                  the zeroing and rounding passes: grad_value's elements */
    int32_t heads;             /* M */
    int32_t channels;          /* D */
    int32_t levels;            /* L */
    int32_t points;            /* P */
    int32_t chunks;            /* D / VEC: vectors per head; conversion: elements a thread;
                                  msda_restride: the bytes of a unit (2, 4 or 8) */
    int32_t lanes_log2;        /* lanes over a head's chunks: 1 << lanes_log2 */
    int32_t parts_log2;        /* forward: the L*P points split over 1 << parts_log2 lanes; a
                                  group is 1 << (lanes_log2 + parts_log2) <= 32 threads */
    int32_t buffer_max_adds;   /* > 0: the kernels choose the buffered levels themselves from a
                                  level table in device memory, by msda_plan_levels with this
                                  limit; 0: buffer_levels says which. Unused under replicas */
    uint64_t buffer;           /* float*, (N, buffer_spatial, M, D): the f32 part of a 16-bit
                                  value gradient (strategies f32 buffer and mixed), else 0; under
                                  replicas the f16 sums of the replicated levels; the
                                  deterministic backward: its int64 sums, then their flags */
    int64_t buffer_spatial;    /* its rows: the buffered levels' positions, packed in level
                                  order (msda_plan.h); S where it holds every level; under
                                  replicas their replicas' rows (msda_plan_replicas), or the
                                  rows any table of the sizes can need (a table on the device) */
    uint32_t buffer_levels;    /* bit l: level l's gradient goes to the buffer */
    int32_t pair_exchange;     /* 16-bit, 8 elements a lane, chunks == lanes >= 2: lane pairs swap
                                  halves so that each f32 `red` fills whole 32-byte sectors */
    int32_t spread_log2;       /* backward: its queries dealt round-robin to 1 << spread_log2
                                  runs (msda_kernels.cu, backward_place_of); 0: in order */
    int32_t head_phases_log2;  /* backward: a batch element's heads taken in 1 << this phases,
                                  one after another (backward_place_of); 0: all together */
    int64_t spread_run;        /* the queries of a run: ceil(Lq / (1 << spread_log2)) */
    int64_t spread_slots;      /* a batch element's query slots: spread_run << spread_log2 */
    uint64_t half_sums;        /* bf16 backward with half sums (msda_device.cuh,
                                  MSDA_BF16_HALF_SUMS): uint32_t[2], the bits of max |grad_output|
                                  and max |weight|, from which the kernels derive the scale of the
                                  f16 sums in grad_value's memory; the deterministic backward:
                                  its bounds (msda_kernels.cu, exact_bounds); else 0 */
    int32_t replica_adds;      /* > 0: f16 replicas (msda_plan.h): the levels over this many adds
                                  an element split them over f16 sums in `buffer`, which the
                                  kernels plan from their level table; 0: buffer_levels or
                                  buffer_max_adds say what the f32 buffer holds */
    int32_t weights_logits;    /* the weights are logits (fused softmax): the exact sums' bound
                                  on a softmaxed weight is 1 (msda_kernels.cu, exact_exponent) */
    int32_t level_h[MSDA_KP_MAX_LEVELS];
    int32_t level_w[MSDA_KP_MAX_LEVELS];
    int64_t level_start[MSDA_KP_MAX_LEVELS];
    /* The level table in device memory (msda.h, MSDA_DEVICE): each block reads and checks it
     * before anything else. 0: it is in level_h, level_w and level_start above. */
    uint64_t level_shapes;     /* const int64_t*, (L, 2) */
    uint64_t level_starts;     /* const int64_t*, (L,) */
    uint64_t device_status;    /* int32_t*, where an inconsistent table's status goes, or 0 */
    /* Last, so that the fields above keep their places in the kernels' parameter bank. */
    int32_t coord_f32;         /* a 16-bit value's locations, weights and their gradients are
                                  f32 rather than the value's type, for the kernels that take
                                  either (msda_kernels.cu, coords) */
    int32_t sampling;          /* msda_sampling: 1, the nearest pixel (msda.h, discrete) */
    int32_t total_points;      /* a group's points: the sum of level_points, L * P where every
                                  level has P; `points` is the largest level's */
    int32_t level_points[MSDA_KP_MAX_LEVELS]; /* each level's points */
    int32_t level_point_start[MSDA_KP_MAX_LEVELS]; /* a group's index of level l's first point */
} msda_kparams;

/* What the loaded device code was built with; read by the host from the module's constant
 * `msda_device_config` after loading, so the launcher knows e.g. whether the f16 backward
 * needs an f32 accumulation buffer. */
typedef struct msda_device_config {
    int32_t abi;               /* MSDA_DEVICE_ABI: layout of msda_kparams and this struct, and
                                  the kernels the module holds (msda_module.c) */
    int32_t arch;              /* __CUDA_ARCH__ / 10 of the PTX the loaded code was made from
                                  (the lowest of its same_ptx group: kernels/libmsda.json) */
    int32_t max_threads;       /* MSDA_MAX_THREADS */
    int32_t f16_enabled;
    int32_t bf16_enabled;
    int32_t f16_atomic;        /* MSDA_ATOMIC_* actually used */
    int32_t bf16_atomic;
    int32_t vector_atomics;
    int32_t points16_waves;    /* MSDA_POINTS16_WAVES: the 16-bit points forward's grid cap */
    int32_t backward_spread_log2; /* MSDA_BACKWARD_SPREAD_LOG2: the most the backward's queries
                                     are spread (msda_launch.c, spread_log2) */
    int32_t bf16_half_sums;    /* MSDA_BF16_HALF_SUMS: the bf16 backward's native levels add in
                                  scaled f16 (the msda_backward_*bf16*_half_* kernels) */
    int32_t f16_replica_adds;  /* MSDA_F16_REPLICA_ADDS where in effect, else 0: the mixed f16
                                  backward sums the levels over this many adds an element in f16
                                  replicas (msda_plan.h), not in the f32 buffer */
    int32_t bf16_replica_adds; /* MSDA_BF16_REPLICA_ADDS likewise, for bf16's half sums */
    int32_t backward_head_phases_log2; /* MSDA_BACKWARD_HEAD_PHASES_LOG2: the most phases the
                                          backward takes a batch element's heads in
                                          (msda_launch.c, head_phases_log2) */
} msda_device_config;

#define MSDA_DEVICE_ABI 20 /* 5: the fused-softmax kernels; 6: fast_path; 7: the points kernels;
                              8: the buffer's levels planned on the device, packed;
                              9: points16_waves; 10: the backward's query spread;
                              11: bf16's half sums; 12: f16 replicas; 13: grad_value and the
                              replicas zeroed by one kernel, bf16's gathered as rounded;
                              14: the backward's heads in phases; 15: deterministic
                              backward (exact integer sums of grad_value); 16: one 16-bit
                              kernel for both coordinate types (coord_f32), no 16-byte
                              deterministic kernels, no bf16 mixed backward beside half sums;
                              17: no 8-byte kernels of a 16-bit value with f32 coordinates;
                              18: a point count per level, discrete sampling;
                              19: no mixed 16-bit backward under the f32-buffer strategy;
                              20: no kernels of one element a lane, msda_restride */

/* The points a level of the forward's points kernels (msda_forward_points_*). */
#define MSDA_FAST_POINTS 4

/* Half-precision atomic strategies of the backward's value gradient. */
#define MSDA_ATOMIC_NATIVE 1
#define MSDA_ATOMIC_CAS 2
#define MSDA_ATOMIC_F32_BUFFER 3 /* every level summed in an f32 buffer, then converted */
#define MSDA_ATOMIC_MIXED 4      /* per level: native where few points add to each element,
                                    the f32 buffer where many do (chosen by the launcher) */

#endif /* MSDA_KPARAMS_H */
