/* msda_plan.h: which levels the 16-bit backward sums in the f32 buffer. The launcher runs it on a
 * host table and the kernels on a device table, within the rows the host allocated for any table
 * of the call's sizes; these tests hold the host's bound and its all-buffer choice to that. */
#include <stdint.h>

#include "kt.h"
#include "msda_plan.h"

/* Deformable-DETR's levels (docs/FACTS.md): H * W = 13400, 3350, 850, 221; S = 17821. */
static const int64_t detr_hw[4] = {13400, 3350, 850, 221};
#define DETR_S 17821

/* The plan and where its levels land, as the launcher and the kernels take them. */
static uint32_t plan_packed(int64_t L, const int64_t *hw, int64_t Lq, int64_t P, int32_t limit, int64_t rows,
                            int64_t *base, int64_t *filled) {
    const uint32_t set = msda_plan_levels(L, hw, Lq, P, limit, rows);
    *filled = msda_pack_levels(L, hw, set, base);
    return set;
}

START_TEST(the_detr_encoder_and_decoder_get_the_measured_plans) {
    int64_t base[4], rows;
    /* f16 (limit 256), encoder: levels 2 and 3 (335 and 1290 adds an element), packed. */
    ck_assert_uint_eq(plan_packed(4, detr_hw, DETR_S, 4, 256, DETR_S, base, &rows), 0xcu);
    ck_assert_int_eq(base[2], 0);
    ck_assert_int_eq(base[3], 850);
    ck_assert_int_eq(rows, 850 + 221);
    /* bf16 (32), encoder: levels 1-3 by the rule, leaving one native of four: every level. */
    ck_assert_uint_eq(plan_packed(4, detr_hw, DETR_S, 4, 32, DETR_S, base, &rows), 0xfu);
    ck_assert_int_eq(base[1], 13400);
    ck_assert_int_eq(base[3], 13400 + 3350 + 850);
    ck_assert_int_eq(rows, DETR_S);
    /* The decoder, 900 queries: f16 none, bf16 the coarsest level (65 adds an element). */
    ck_assert_uint_eq(plan_packed(4, detr_hw, 900, 4, 256, DETR_S, base, &rows), 0u);
    ck_assert_int_eq(rows, 0);
    ck_assert_uint_eq(plan_packed(4, detr_hw, 900, 4, 32, DETR_S, base, &rows), 0x8u);
    ck_assert_int_eq(base[3], 0);
    ck_assert_int_eq(rows, 221);
    /* The f32 buffer strategy (limit 0): every level. */
    ck_assert_uint_eq(plan_packed(4, detr_hw, 900, 4, 0, DETR_S, base, &rows), 0xfu);
}
END_TEST

START_TEST(a_level_at_the_limit_adds_natively) {
    /* 64 queries * 4 points * 4 corners / 4 positions = 256 adds: not above the limit. */
    ck_assert_int_eq(msda_level_buffered(64, 4, 4, 256), 0);
    ck_assert_int_eq(msda_level_buffered(64, 4, 3, 256), 1);
    ck_assert_int_eq(msda_largest_buffered_level(1000, 64, 4, 256), 3);
    ck_assert_int_eq(msda_largest_buffered_level(1000, 1, 1, 256), 0); /* 4 adds at most */
    ck_assert_int_eq(msda_largest_buffered_level(2, 64, 4, 0), 2);     /* every level, capped at S */
}
END_TEST

START_TEST(the_device_bound_for_the_detr_sizes) {
    /* f16 encoder: 17821 * 16 / H*W > 256 up to H*W = 1113: four such levels. */
    ck_assert_int_eq(msda_buffer_rows_bound(4, DETR_S, DETR_S, 4, 256), 4 * 1113);
    ck_assert_int_eq(msda_every_level_buffered(4, DETR_S, DETR_S, 4, 256), 0);
    /* bf16 encoder: a native level needs 8911 positions; two of them and two more levels do
     * not fit in 17821, so at most one of four is native: every level, whatever the table. */
    ck_assert_int_eq(msda_every_level_buffered(4, DETR_S, DETR_S, 4, 32), 1);
    /* The decoder: f16 at most 4 * 56 rows, bf16 4 * 449 (14400 / H*W above the limit). */
    ck_assert_int_eq(msda_buffer_rows_bound(4, DETR_S, 900, 4, 256), 4 * 56);
    ck_assert_int_eq(msda_buffer_rows_bound(4, DETR_S, 900, 4, 32), 4 * 449);
    ck_assert_int_eq(msda_every_level_buffered(4, DETR_S, 900, 4, 32), 0);
    /* Too few queries for any level to reach the limit: no buffer at all. */
    ck_assert_int_eq(msda_buffer_rows_bound(4, DETR_S, 10, 4, 256), 0);
}
END_TEST

static uint64_t next_random(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* A random table of 1 to MSDA_MAX_LEVELS levels (their H * W in hw, S their sum), with up to
 * 2 S queries of 1 to 8 points. */
static void random_problem(uint64_t *seed, int64_t *hw, int64_t *L, int64_t *S, int64_t *Lq, int64_t *P) {
    *L = 1 + (int64_t)(next_random(seed) % MSDA_MAX_LEVELS);
    *S = 0;
    const uint64_t scale = 1 + next_random(seed) % 5000;
    for (int64_t l = 0; l < *L; l++) {
        hw[l] = 1 + (int64_t)(next_random(seed) % scale);
        *S += hw[l];
    }
    *Lq = 1 + (int64_t)(next_random(seed) % (2 * (uint64_t)*S));
    *P = 1 + (int64_t)(next_random(seed) % 8);
}

/* Random tables: what the kernels plan within the host's bound is the host's plan, but where
 * the host's would take every level and they do not fit; it fits the bound; the levels are
 * packed in order; and where the host launches the all-buffer kernel, every table of those
 * sizes takes every level. */
START_TEST(the_device_plan_fits_the_host_bound_for_random_tables) {
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    const int32_t limits[] = {0, 1, 32, 256, 1024};
    for (int trial = 0; trial < 20000; trial++) {
        int64_t hw[MSDA_MAX_LEVELS], L, S, Lq, P;
        random_problem(&seed, hw, &L, &S, &Lq, &P);
        const int32_t limit = limits[next_random(&seed) % 5];
        int64_t host_base[MSDA_MAX_LEVELS], dev_base[MSDA_MAX_LEVELS], host_rows, dev_rows;
        const uint32_t host = plan_packed(L, hw, Lq, P, limit, S, host_base, &host_rows);
        const int64_t bound = msda_buffer_rows_bound(L, S, Lq, P, limit);
        const uint32_t dev = plan_packed(L, hw, Lq, P, limit, bound, dev_base, &dev_rows);
        int64_t rows = 0, rule_rows = 0;
        uint32_t rule = 0;
        for (int64_t l = 0; l < L; l++) {
            ck_assert_int_eq(dev_base[l], rows);
            if ((dev >> l) & 1u) rows += hw[l];
            if (msda_level_buffered(Lq, P, hw[l], limit)) rule |= 1u << l, rule_rows += hw[l];
        }
        ck_assert_int_eq(dev_rows, rows);
        ck_assert_int_le(rows, bound);
        ck_assert_int_le(host_rows, S);
        ck_assert_int_le(rule_rows, bound);
        ck_assert_uint_eq(host & rule, rule); /* the host buffers at least the rule's levels */
        if (host == rule || S <= bound)
            ck_assert_uint_eq(dev, host);
        else
            ck_assert_uint_eq(dev, rule);
        if (msda_every_level_buffered(L, S, Lq, P, limit)) ck_assert_uint_eq(host, msda_all_levels(L));
    }
}
END_TEST

START_TEST(replicas_split_the_detr_levels_over_the_limit) {
    int64_t reps[4], base[4];
    /* f16 at 128 adds a replica, encoder (17821 * 16 = 285136 adds a level): levels 0 and 1 (21
     * and 85 adds an element) in grad_value, level 2 (335) over 3 replicas, level 3 (1290) 11. */
    ck_assert_int_eq(msda_plan_replicas(4, detr_hw, DETR_S, 4, 128, reps, base), 3 * 850 + 11 * 221);
    ck_assert_int_eq(reps[0], 1);
    ck_assert_int_eq(reps[1], 1);
    ck_assert_int_eq(reps[2], 3);
    ck_assert_int_eq(reps[3], 11);
    ck_assert_int_eq(base[2], 0);
    ck_assert_int_eq(base[3], 3 * 850);
    /* bf16's 32: levels 1-3 over 3, 11 and 41 replicas. */
    ck_assert_int_eq(msda_plan_replicas(4, detr_hw, DETR_S, 4, 32, reps, base), 3 * 3350 + 11 * 850 + 41 * 221);
    ck_assert_int_eq(reps[0], 1);
    ck_assert_int_eq(reps[3], 41);
    ck_assert_int_eq(base[2], 3 * 3350);
    /* The decoder (14400 adds a level): f16 none, bf16 the coarsest level (65 adds) over 3. */
    ck_assert_int_eq(msda_plan_replicas(4, detr_hw, 900, 4, 128, reps, base), 0);
    ck_assert_int_eq(msda_plan_replicas(4, detr_hw, 900, 4, 32, reps, base), 3 * 221);
    ck_assert_int_eq(reps[2], 1);
    /* At the limit a level adds in place; one add over it takes two replicas. */
    ck_assert_int_eq(msda_level_replicas(64, 4, 4, 256), 1);
    ck_assert_int_eq(msda_level_replicas(64, 4, 3, 256), 2);
    ck_assert_int_eq(msda_level_replicas(64, 4, 3, 0), 1); /* no limit: no replicas */
}
END_TEST

/* Random tables: each replicated level takes the fewest replicas that keep its average adds a
 * replica within the limit, the rows fit the host's bound for a table it cannot read, and the
 * replicated levels' positions fit the f32 buffer's rule bound (the gather's work). */
START_TEST(the_replica_plan_fits_the_host_bound_for_random_tables) {
    uint64_t seed = 0x2545f4914f6cdd1dull;
    const int32_t limits[] = {1, 16, 32, 128, 256, 1024};
    for (int trial = 0; trial < 20000; trial++) {
        int64_t hw[MSDA_MAX_LEVELS], L, S, Lq, P;
        random_problem(&seed, hw, &L, &S, &Lq, &P);
        const int32_t limit = limits[next_random(&seed) % 6];
        int64_t reps[MSDA_MAX_LEVELS], base[MSDA_MAX_LEVELS], at = 0, positions = 0;
        const int64_t rows = msda_plan_replicas(L, hw, Lq, P, limit, reps, base);
        for (int64_t l = 0; l < L; l++) {
            const int64_t adds = Lq * P * 4;
            ck_assert_int_ge(reps[l], 1);
            ck_assert_int_eq(reps[l] > 1, msda_level_buffered(Lq, P, hw[l], limit));
            if (reps[l] > 1) { /* the fewest replicas of at most `limit` adds an element each */
                ck_assert_int_le(adds, reps[l] * limit * hw[l]);
                ck_assert_int_gt(adds, (reps[l] - 1) * limit * hw[l]);
            }
            ck_assert_int_eq(base[l], at);
            if (reps[l] > 1) at += reps[l] * hw[l], positions += hw[l];
        }
        ck_assert_int_eq(rows, at);
        ck_assert_int_le(rows, msda_replica_rows_bound(L, S, Lq, P, limit));
        ck_assert_int_le(positions, msda_buffer_rows_bound(L, S, Lq, P, limit));
    }
}
END_TEST

TCase *kt_tcase_plan(void) {
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, the_detr_encoder_and_decoder_get_the_measured_plans);
    tcase_add_test(tc, a_level_at_the_limit_adds_natively);
    tcase_add_test(tc, the_device_bound_for_the_detr_sizes);
    tcase_add_test(tc, the_device_plan_fits_the_host_bound_for_random_tables);
    tcase_add_test(tc, replicas_split_the_detr_levels_over_the_limit);
    tcase_add_test(tc, the_replica_plan_fits_the_host_bound_for_random_tables);
    return tc;
}
