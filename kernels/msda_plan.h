/* Which levels' value gradient the 16-bit backward sums in the f32 buffer, and where each level
 * lands in it: one rule, used by the launcher for a level table in host memory and by every
 * block of the backward and conversion kernels for a table in device memory (which the host
 * never reads), so that both reach the same plan from the same table. C and CUDA C++. */
#ifndef MSDA_PLAN_H
#define MSDA_PLAN_H

#include <stdint.h>

#if defined(__CUDACC__)
#define MSDA_PLAN_FN static __host__ __device__ __forceinline__
#else
#define MSDA_PLAN_FN static inline
#endif

/* Mixed strategy: a level adds natively where on average at most max_adds points add to each of
 * its elements (queries * points * 4 corners / (H * W)), in the buffer beyond; the error of a
 * native sum grows about as the square root of that count times the type's rounding step
 * (kernels/PERF.md, "f16's default strategy"). max_adds 0: every level in the buffer (the f32
 * buffer strategy). Compared as products in double (exact below 2^53, and alike on the host and
 * the device): every block of the backward evaluates it, so no division. */
MSDA_PLAN_FN int msda_level_buffered(int64_t queries, int64_t points, int64_t hw, int32_t max_adds) {
    return max_adds <= 0 || (double)queries * (double)points * 4.0 > (double)max_adds * (double)hw;
}

MSDA_PLAN_FN uint32_t msda_all_levels(int64_t levels) { return (uint32_t)((1ull << levels) - 1u); }

/* The buffered levels (bit l), given each level's H * W: those of the rule; every level where
 * that leaves the native ones a minority (measured on an H200, bf16 encoder: buffering all of
 * them, 4 elements a lane, beat mixing). `rows` caps the buffer's spatial rows (a table in device
 * memory: what the host allocated for any table of these sizes); where every level would not
 * fit, the rule's levels alone, which always do (msda_buffer_rows_bound); msda_pack_levels
 * places them. */
MSDA_PLAN_FN uint32_t msda_plan_levels(int64_t levels, const int64_t *hw, int64_t queries, int64_t points,
                                      int32_t max_adds, int64_t rows) {
    uint32_t rule = 0;
    int64_t native = 0, rule_rows = 0, all_rows = 0;
    for (int64_t l = 0; l < levels; l++) {
        all_rows += hw[l];
        if (msda_level_buffered(queries, points, hw[l], max_adds)) {
            rule |= 1u << l;
            rule_rows += hw[l];
        } else {
            native++;
        }
    }
    uint32_t set = rule && 2 * native < levels && all_rows <= rows ? msda_all_levels(levels) : rule;
    if (set == rule && rule_rows > rows) set = 0; /* not reached with the host's bound */
    return set;
}

/* base[l]: the buffer row where level l starts, the levels of `set` packed in level order.
 * Returns the rows they fill. */
MSDA_PLAN_FN int64_t msda_pack_levels(int64_t levels, const int64_t *hw, uint32_t set, int64_t *base) {
    int64_t at = 0;
    for (int64_t l = 0; l < levels; l++) {
        base[l] = at;
        if ((set >> l) & 1u) at += hw[l];
    }
    return at;
}

/* The largest H * W (at most spatial) that the rule buffers: 0 where it buffers none. */
MSDA_PLAN_FN int64_t msda_largest_buffered_level(int64_t spatial, int64_t queries, int64_t points, int32_t max_adds) {
    if (spatial < 1 || !msda_level_buffered(queries, points, 1, max_adds)) return 0;
    int64_t lo = 1, hi = spatial; /* buffered(lo); the rule falls with H * W */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (msda_level_buffered(queries, points, mid, max_adds))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* For a table the host cannot read: the buffer rows that any table of these sizes can need by
 * the rule alone (each of the levels at most msda_largest_buffered_level), at most spatial. */
MSDA_PLAN_FN int64_t msda_buffer_rows_bound(int64_t levels, int64_t spatial, int64_t queries, int64_t points,
                                            int32_t max_adds) {
    const int64_t largest = msda_largest_buffered_level(spatial, queries, points, max_adds);
    return largest > spatial / levels ? spatial : largest * levels;
}

/* Whether every table of these sizes gets every level buffered: a native level has H * W above
 * msda_largest_buffered_level and the others at least 1, so at most k levels are native where
 * k such levels and L - k of one position fit in S; fewer than half of them makes it all. */
MSDA_PLAN_FN int msda_every_level_buffered(int64_t levels, int64_t spatial, int64_t queries, int64_t points,
                                           int32_t max_adds) {
    const int64_t native_min = msda_largest_buffered_level(spatial, queries, points, max_adds) + 1;
    int64_t k = 0;
    while (k < levels && (k + 1) <= (spatial - (levels - k - 1)) / native_min) k++;
    return 2 * k < levels;
}

/* f16 replicas (msda_kparams.replica_adds; sm_90's f16 backward and bf16's half sums): instead
 * of the f32 buffer, a level whose elements take on average more than max_adds adds splits them
 * over R f16 sums of its own ("replicas"), query q adding to replica q mod R, so that no sum takes
 * more than about max_adds of them; one pass then adds a level's replicas up in f32 and rounds
 * them once. A 16-bit `red` moves half the bytes of an f32 one, and the L2's reductions bound the
 * backward (kernels/PERF.md); the error of an f16 sum grows as the square root of its adds, so
 * the replicas keep each level's within what max_adds allows. R = 1: the level adds in
 * grad_value's own memory, as a native level of the mixed strategy. Integers: Lq * P * 4 stays
 * far below 2^63 (msda_validate.c bounds the locations' elements by 2^55). */
MSDA_PLAN_FN int64_t msda_level_replicas(int64_t queries, int64_t points, int64_t hw, int32_t max_adds) {
    if (max_adds <= 0 || !msda_level_buffered(queries, points, hw, max_adds)) return 1;
    const int64_t adds = queries * points * 4, cap = (int64_t)max_adds * hw; /* cap < adds */
    return (adds + cap - 1) / cap;
}

/* reps[l]: level l's replicas; base[l]: the replica rows' index where its first one starts,
 * replica r at base[l] + r * hw[l], the replicated levels packed in level order. Returns the
 * rows they fill. */
MSDA_PLAN_FN int64_t msda_plan_replicas(int64_t levels, const int64_t *hw, int64_t queries, int64_t points,
                                        int32_t max_adds, int64_t *reps, int64_t *base) {
    int64_t at = 0;
    for (int64_t l = 0; l < levels; l++) {
        reps[l] = msda_level_replicas(queries, points, hw[l], max_adds);
        base[l] = at;
        if (reps[l] > 1) at += reps[l] * hw[l];
    }
    return at;
}

/* For a table the host cannot read: the replica rows that any table of these sizes can need. A
 * replicated level has H*W at most msda_largest_buffered_level and fills R * H*W <
 * ceil(Lq*P*4 / max_adds) + H*W rows; the levels' H*W add up to at most S. */
MSDA_PLAN_FN int64_t msda_replica_rows_bound(int64_t levels, int64_t spatial, int64_t queries, int64_t points,
                                             int32_t max_adds) {
    const int64_t positions = max_adds > 0 ? msda_buffer_rows_bound(levels, spatial, queries, points, max_adds) : 0;
    if (!positions) return 0;
    return levels * ((queries * points * 4 + max_adds - 1) / max_adds) + positions;
}

#endif /* MSDA_PLAN_H */
