/* The CPU path's f16 and bf16 conversions: exact round trips and round-to-nearest-even. */
#include <math.h>

#include "kt.h"
#include "msda_half.h"

START_TEST(f16_round_trips_every_pattern) {
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float f = msda_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            ck_assert_msg((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu), "0x%04x read as NaN", h);
            ck_assert(isnan(msda_f16_to_f32(msda_f32_to_f16(f))));
            continue;
        }
        ck_assert_msg(msda_f32_to_f16(f) == h, "0x%04x -> %a -> 0x%04x", h, (double)f, msda_f32_to_f16(f));
    }
}
END_TEST

START_TEST(f16_rounds_to_nearest_even) {
    ck_assert_uint_eq(msda_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(msda_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);         /* tie: to even */
    ck_assert_uint_eq(msda_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);     /* tie: to even (up) */
    ck_assert_uint_eq(msda_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above the tie */
    ck_assert_uint_eq(msda_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(msda_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(msda_f32_to_f16(65520.0f), 0x7c00);                /* rounds to inf */
    ck_assert_uint_eq(msda_f32_to_f16(-INFINITY), 0xfc00);
    ck_assert_uint_eq(msda_f32_to_f16(0x1p-24f), 0x0001);                /* smallest subnormal */
    ck_assert_uint_eq(msda_f32_to_f16(0x1p-25f), 0x0000);                /* tie: to even (0) */
    ck_assert_uint_eq(msda_f32_to_f16(1.5f * 0x1p-25f), 0x0001);
    ck_assert_uint_eq(msda_f32_to_f16(3 * 0x1p-25f), 0x0002);            /* tie: to even (up) */
    ck_assert_uint_eq(msda_f32_to_f16(-0.0f), 0x8000);
    ck_assert_uint_eq(msda_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);     /* up into the normals */
}
END_TEST

START_TEST(bf16_round_trips_and_rounds_to_nearest_even) {
    for (uint32_t b = 0; b < 0x10000u; b++) {
        const float f = msda_bf16_to_f32((uint16_t)b);
        if (isnan(f)) continue;
        ck_assert_uint_eq(msda_f32_to_bf16(f), b);
    }
    ck_assert_uint_eq(msda_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      /* tie: to even */
    ck_assert_uint_eq(msda_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  /* tie: to even (up) */
    ck_assert_uint_eq(msda_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    ck_assert(isnan(msda_bf16_to_f32(msda_f32_to_bf16(NAN))));
    ck_assert_uint_eq(msda_f32_to_bf16(3.4e38f), 0x7f80); /* past bf16's largest: infinity */
}
END_TEST

TCase *kt_tcase_half(void) {
    TCase *tc = tcase_create("half conversions");
    /* every 16-bit pattern through a checked assertion: well under a second natively, more than
     * Check's default 4 s under qemu-user with the sanitizers (the arm64 make check) */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, f16_round_trips_every_pattern);
    tcase_add_test(tc, f16_rounds_to_nearest_even);
    tcase_add_test(tc, bf16_round_trips_and_rounds_to_nearest_even);
    return tc;
}
