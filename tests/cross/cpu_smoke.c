/* Runs the CPU path of the other CPU's libmsda.so under qemu (aarch64 on x86_64 hosts, x86_64 on
 * aarch64 hosts): one forward and backward in f32 and f64 on a small problem, checked against a
 * direct evaluation of the formula for the output and against each other. Prints "N passed, M failed". */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include "msda.h"

enum { N = 2, M = 2, D = 5, L = 2, P = 2, LQ = 3, S = 4 * 3 + 2 * 2 };
static const int64_t SHAPES[] = { 4, 3, 2, 2 };
static const int64_t STARTS[] = { 0, 12 };

static double rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (double)((*s >> 8) & 0xffff) / 65536.0;
}

/* The value at (h, w) of level l, or 0 outside the map. */
static double at(const double *v, int n, int l, int h, int w, int m, int d)
{
    int H = (int)SHAPES[2 * l], W = (int)SHAPES[2 * l + 1];
    if (h < 0 || w < 0 || h >= H || w >= W)
        return 0;
    return v[(((size_t)n * S + (size_t)STARTS[l] + (size_t)h * W + w) * M + m) * D + d];
}

static double reference(const double *v, const double *loc, const double *attn, int n, int q, int m, int d)
{
    double sum = 0;
    for (int l = 0; l < L; l++)
        for (int p = 0; p < P; p++) {
            size_t i = ((((size_t)n * LQ + q) * M + m) * L + l) * P + p;
            double h = loc[2 * i + 1] * SHAPES[2 * l] - 0.5, w = loc[2 * i] * SHAPES[2 * l + 1] - 0.5;
            int h0 = (int)floor(h), w0 = (int)floor(w);
            double lh = h - h0, lw = w - w0;
            double s = (1 - lh) * (1 - lw) * at(v, n, l, h0, w0, m, d) + (1 - lh) * lw * at(v, n, l, h0, w0 + 1, m, d) +
                       lh * (1 - lw) * at(v, n, l, h0 + 1, w0, m, d) + lh * lw * at(v, n, l, h0 + 1, w0 + 1, m, d);
            sum += attn[i] * s;
        }
    return sum;
}

int main(void)
{
    static double v[N * S * M * D], loc[N * LQ * M * L * P * 2], attn[N * LQ * M * L * P], out[N * LQ * M * D];
    static double go[N * LQ * M * D], gv[N * S * M * D], gl[N * LQ * M * L * P * 2], ga[N * LQ * M * L * P];
    static float vf[N * S * M * D], locf[N * LQ * M * L * P * 2], attnf[N * LQ * M * L * P], outf[N * LQ * M * D];
    static float gof[N * LQ * M * D], gvf[N * S * M * D], glf[N * LQ * M * L * P * 2], gaf[N * LQ * M * L * P];
    unsigned seed = 7;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) vf[i] = (float)(v[i] = 2 * rnd(&seed) - 1);
    for (size_t i = 0; i < sizeof loc / sizeof *loc; i++) locf[i] = (float)(loc[i] = 1.2 * rnd(&seed) - 0.1);
    for (size_t i = 0; i < sizeof attn / sizeof *attn; i++) attnf[i] = (float)(attn[i] = rnd(&seed));
    for (size_t i = 0; i < sizeof go / sizeof *go; i++) gof[i] = (float)(go[i] = rnd(&seed) - 0.5);
    msda_sizes sz = { .batch = N, .spatial = S, .heads = M, .channels = D, .queries = LQ, .levels = L, .points = P };
    msda_error err;
    int passed = 0, failed = 0;

    msda_forward_args f = { .dtype = MSDA_F64, .sizes = sz, .spatial_shapes = SHAPES, .level_start = STARTS,
                            .value = v, .sampling_locations = loc, .attention_weights = attn, .output = out };
    msda_status st = msda_forward_cpu(&f, 2, &err);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int q = 0; q < LQ; q++)
            for (int m = 0; m < M; m++)
                for (int d = 0; d < D; d++)
                    worst = fmax(worst, fabs(out[((n * LQ + q) * M + m) * D + d] - reference(v, loc, attn, n, q, m, d)));
    printf("%s f64 forward against the formula: max error %.3g (%s)\n", st == MSDA_OK && worst < 1e-12 ? "ok" : "FAIL",
           worst, msda_status_string(st));
    st == MSDA_OK && worst < 1e-12 ? passed++ : failed++;

    msda_forward_args ff = f;
    ff.dtype = MSDA_F32, ff.value = vf, ff.sampling_locations = locf, ff.attention_weights = attnf, ff.output = outf;
    st = msda_forward_cpu(&ff, 2, &err);
    worst = 0;
    for (size_t i = 0; i < sizeof out / sizeof *out; i++)
        worst = fmax(worst, fabs(outf[i] - out[i]));
    printf("%s f32 forward against f64: max error %.3g\n", st == MSDA_OK && worst < 1e-5 ? "ok" : "FAIL", worst);
    st == MSDA_OK && worst < 1e-5 ? passed++ : failed++;

    msda_backward_args b = { .dtype = MSDA_F64, .sizes = sz, .spatial_shapes = SHAPES, .level_start = STARTS, .value = v,
                             .sampling_locations = loc, .attention_weights = attn, .grad_output = go,
                             .grad_value = gv, .grad_sampling_locations = gl, .grad_attention_weights = ga };
    msda_backward_args bf = { .dtype = MSDA_F32, .sizes = sz, .spatial_shapes = SHAPES, .level_start = STARTS,
                              .value = vf, .sampling_locations = locf, .attention_weights = attnf, .grad_output = gof,
                              .grad_value = gvf, .grad_sampling_locations = glf, .grad_attention_weights = gaf };
    msda_status s1 = msda_backward_cpu(&b, 2, &err), s2 = msda_backward_cpu(&bf, 2, &err);
    worst = 0;
    for (size_t i = 0; i < sizeof gv / sizeof *gv; i++) worst = fmax(worst, fabs(gvf[i] - gv[i]));
    for (size_t i = 0; i < sizeof gl / sizeof *gl; i++) worst = fmax(worst, fabs(glf[i] - gl[i]));
    for (size_t i = 0; i < sizeof ga / sizeof *ga; i++) worst = fmax(worst, fabs(gaf[i] - ga[i]));
    /* d out / d attn is the sampled value: the f64 gradient against the formula. */
    double worst_attn = 0;
    for (int n = 0; n < N; n++)
        for (int q = 0; q < LQ; q++)
            for (int m = 0; m < M; m++)
                for (int l = 0; l < L; l++)
                    for (int p = 0; p < P; p++) {
                        size_t i = ((((size_t)n * LQ + q) * M + m) * L + l) * P + p;
                        double save = attn[i], plus, minus;
                        attn[i] = save + 1e-3;
                        plus = 0;
                        for (int d = 0; d < D; d++) plus += go[((n * LQ + q) * M + m) * D + d] * reference(v, loc, attn, n, q, m, d);
                        attn[i] = save - 1e-3;
                        minus = 0;
                        for (int d = 0; d < D; d++) minus += go[((n * LQ + q) * M + m) * D + d] * reference(v, loc, attn, n, q, m, d);
                        attn[i] = save;
                        worst_attn = fmax(worst_attn, fabs((plus - minus) / 2e-3 - ga[i]));
                    }
    bool ok = s1 == MSDA_OK && s2 == MSDA_OK && worst < 1e-4 && worst_attn < 1e-9;
    printf("%s backward: f32 against f64 %.3g, attention gradient against differences %.3g\n", ok ? "ok" : "FAIL",
           worst, worst_attn);
    ok ? passed++ : failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
