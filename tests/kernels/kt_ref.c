/* The reference of the tests: Multi-Scale Deformable Attention in f64, written from the formula
 * as a sum over levels and points of weight * bilinear sample, one output element at a time. */
#include <math.h>
#include <stdlib.h>

#include "kt.h"

/* value[n, start_l + y*W + x, m, d], or 0 for a pixel outside the level's map. */
static double pixel(const kt_case *c, int64_t n, int64_t m, int64_t l, int64_t d, int64_t y,
                    int64_t x) {
    const int64_t H = c->shapes[2 * l], W = c->shapes[2 * l + 1];
    if (y < 0 || x < 0 || y >= H || x >= W) return 0.0;
    return c->value[((n * c->S + c->starts[l] + y * W + x) * c->M + m) * c->D + d];
}

/* Where a location samples: 0 when the point contributes nothing (outside or not finite). */
typedef struct {
    int64_t y0, x0;
    double fy, fx; /* fractional parts */
} where;

static int locate(const kt_case *c, int64_t l, double x, double y, where *w) {
    const double H = (double)c->shapes[2 * l], W = (double)c->shapes[2 * l + 1];
    double h = y * H - 0.5, ww = x * W - 0.5;
    if (c->f32_coords) { /* each step rounded to f32 (the tests build with -ffp-contract=off) */
        h = (double)((float)y * (float)H - 0.5f);
        ww = (double)((float)x * (float)W - 0.5f);
    }
    if (!isfinite(h) || !isfinite(ww) || h <= -1.0 || ww <= -1.0 || h >= H || ww >= W) return 0;
    w->y0 = (int64_t)floor(h);
    w->x0 = (int64_t)floor(ww);
    w->fy = h - floor(h);
    w->fx = ww - floor(ww);
    return 1;
}

static double sample(const kt_case *c, int64_t n, int64_t m, int64_t l, int64_t d, const where *w) {
    return (1 - w->fy) * (1 - w->fx) * pixel(c, n, m, l, d, w->y0, w->x0) +
           (1 - w->fy) * w->fx * pixel(c, n, m, l, d, w->y0, w->x0 + 1) +
           w->fy * (1 - w->fx) * pixel(c, n, m, l, d, w->y0 + 1, w->x0) +
           w->fy * w->fx * pixel(c, n, m, l, d, w->y0 + 1, w->x0 + 1);
}

static int64_t point_index(const kt_case *c, int64_t n, int64_t q, int64_t m, int64_t l, int64_t p) {
    return (((n * c->Lq + q) * c->M + m) * c->L + l) * c->P + p;
}

void kt_ref_forward(const kt_case *c, double *out) {
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t q = 0; q < c->Lq; q++)
            for (int64_t m = 0; m < c->M; m++)
                for (int64_t d = 0; d < c->D; d++) {
                    double sum = 0;
                    for (int64_t l = 0; l < c->L; l++)
                        for (int64_t p = 0; p < c->P; p++) {
                            const int64_t i = point_index(c, n, q, m, l, p);
                            where w;
                            if (locate(c, l, c->loc[2 * i], c->loc[2 * i + 1], &w))
                                sum += c->attn[i] * sample(c, n, m, l, d, &w);
                        }
                    out[((n * c->Lq + q) * c->M + m) * c->D + d] = sum;
                }
}

static void scatter(const kt_case *c, double *gvalue, int64_t n, int64_t m, int64_t l, int64_t d,
                    int64_t y, int64_t x, double g) {
    const int64_t H = c->shapes[2 * l], W = c->shapes[2 * l + 1];
    if (y < 0 || x < 0 || y >= H || x >= W) return;
    gvalue[((n * c->S + c->starts[l] + y * W + x) * c->M + m) * c->D + d] += g;
}

/* d out / d value: weight * bilinear coefficient, scattered to the four pixels.
 * d out / d attn: the sample. d out / d x: weight * W * d sample / d w, and likewise for y. */
void kt_ref_backward(const kt_case *c, double *gvalue, double *gloc, double *gattn) {
    for (int64_t i = 0; i < c->n_value; i++) gvalue[i] = 0;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t q = 0; q < c->Lq; q++)
            for (int64_t m = 0; m < c->M; m++)
                for (int64_t l = 0; l < c->L; l++)
                    for (int64_t p = 0; p < c->P; p++) {
                        const int64_t i = point_index(c, n, q, m, l, p);
                        const double *go = c->gout + ((n * c->Lq + q) * c->M + m) * c->D;
                        where w;
                        gloc[2 * i] = gloc[2 * i + 1] = gattn[i] = 0;
                        if (!locate(c, l, c->loc[2 * i], c->loc[2 * i + 1], &w)) continue;
                        const double a = c->attn[i];
                        const double H = (double)c->shapes[2 * l], W = (double)c->shapes[2 * l + 1];
                        for (int64_t d = 0; d < c->D; d++) {
                            const double v00 = pixel(c, n, m, l, d, w.y0, w.x0);
                            const double v01 = pixel(c, n, m, l, d, w.y0, w.x0 + 1);
                            const double v10 = pixel(c, n, m, l, d, w.y0 + 1, w.x0);
                            const double v11 = pixel(c, n, m, l, d, w.y0 + 1, w.x0 + 1);
                            gattn[i] += go[d] * sample(c, n, m, l, d, &w);
                            const double ds_dx = (1 - w.fy) * (v01 - v00) + w.fy * (v11 - v10);
                            const double ds_dy = (1 - w.fx) * (v10 - v00) + w.fx * (v11 - v01);
                            gloc[2 * i] += go[d] * a * ds_dx * W;
                            gloc[2 * i + 1] += go[d] * a * ds_dy * H;
                            scatter(c, gvalue, n, m, l, d, w.y0, w.x0, go[d] * a * (1 - w.fy) * (1 - w.fx));
                            scatter(c, gvalue, n, m, l, d, w.y0, w.x0 + 1, go[d] * a * (1 - w.fy) * w.fx);
                            scatter(c, gvalue, n, m, l, d, w.y0 + 1, w.x0, go[d] * a * w.fy * (1 - w.fx));
                            scatter(c, gvalue, n, m, l, d, w.y0 + 1, w.x0 + 1, go[d] * a * w.fy * w.fx);
                        }
                    }
}
