#include "verify_problem.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "msda_half.h"

/* The problem: two levels of odd sizes, points inside, on and outside the maps. */
enum { N = 2, M = 2, D = 8, L = 2, P = 3, LQ = 10 };
static const int64_t SHAPES[L * 2] = { 6, 5, 3, 2 };
static const int64_t STARTS[L] = { 0, 30 };
enum { S = 36 };
enum {
    N_VALUE = N * S * M * D,
    N_LOC = N * LQ * M * L * P * 2,
    N_ATTN = N * LQ * M * L * P,
    N_OUT = N * LQ * M * D
};
static const size_t COUNTS[MD_VP_BUFFERS] = { N_VALUE, N_LOC, N_ATTN, N_OUT, N_OUT, N_VALUE, N_LOC, N_ATTN };

static const char *const DTYPE_NAMES[MD_VERIFY_DTYPES] = { "f32", "f64", "f16", "bf16" };
static const msda_dtype DTYPES[MD_VERIFY_DTYPES] = { MSDA_F32, MSDA_F64, MSDA_F16, MSDA_BF16 };
/* A GPU is held to the CPU path on the same 16-bit inputs; the CPU path itself to the f64 result
 * on unrounded inputs, where bf16's 8-bit mantissa alone costs about 1e-2. */
static const double TOLERANCES[MD_VERIFY_DTYPES] = { 1e-5, 1e-5, 1e-2, 1e-2 };
static const double CPU_TOLERANCES[MD_VERIFY_DTYPES] = { 1e-5, 1e-5, 1e-2, 3e-2 };
static const size_t ELEMENT_SIZE[MD_VERIFY_DTYPES] = { 4, 8, 2, 2 };
enum { F64 = 1 }; /* the reference's index in DTYPES */

/* Results widened to f64: the exact ones, or the CPU path's in one data type. */
typedef struct {
    double out[N_OUT], grad_value[N_VALUE], grad_loc[N_LOC], grad_attn[N_ATTN];
} results;

struct md_vp_problem {
    double value[N_VALUE], loc[N_LOC], attn[N_ATTN], grad_out[N_OUT];
    results exact;                     /* the CPU path in f64 */
    results cpu[MD_VERIFY_DTYPES];     /* the CPU path in each data type */
    bool cpu_ran[MD_VERIFY_DTYPES];
};

/* ---- numbers ------------------------------------------------------------------------------------ */

static double next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*state >> 11) / 9007199254740992.0;
}

static void *to_dtype(const double *src, size_t n, int d)
{
    void *out = malloc(n * ELEMENT_SIZE[d]);
    for (size_t i = 0; out && i < n; i++) {
        switch (DTYPES[d]) {
        case MSDA_F32: ((float *)out)[i] = (float)src[i]; break;
        case MSDA_F64: ((double *)out)[i] = src[i]; break;
        case MSDA_F16: ((uint16_t *)out)[i] = msda_f32_to_f16((float)src[i]); break;
        case MSDA_BF16: ((uint16_t *)out)[i] = msda_f32_to_bf16((float)src[i]); break;
        }
    }
    return out;
}

static double element(const void *buf, size_t i, int d)
{
    switch (DTYPES[d]) {
    case MSDA_F32: return ((const float *)buf)[i];
    case MSDA_F64: return ((const double *)buf)[i];
    case MSDA_F16: return msda_f16_to_f32(((const uint16_t *)buf)[i]);
    case MSDA_BF16: return msda_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
    return NAN;
}

/* ||got - want|| / ||want||; NaN anywhere gives infinity. */
static double relative_error(const void *got, const double *want, size_t n, int d)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        double g = element(got, i, d);
        if (!isfinite(g))
            return INFINITY;
        diff += (g - want[i]) * (g - want[i]);
        norm += want[i] * want[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static void make_inputs(md_vp_problem *p)
{
    uint64_t state = 20261121;
    for (size_t i = 0; i < N_VALUE; i++)
        p->value[i] = 2 * next_random(&state) - 1;
    for (size_t i = 0; i < N_LOC; i++) /* some outside [0, 1]: they must contribute zero */
        p->loc[i] = 1.2 * next_random(&state) - 0.1;
    for (size_t i = 0; i < N_ATTN; i++)
        p->attn[i] = next_random(&state);
    for (size_t i = 0; i < N_OUT; i++)
        p->grad_out[i] = 2 * next_random(&state) - 1;
}

void md_vp_args(msda_forward_args *f, msda_backward_args *b, int d, void *const buf[MD_VP_BUFFERS])
{
    msda_sizes sizes = { .batch = N, .spatial = S, .heads = M, .channels = D, .queries = LQ, .levels = L, .points = P };
    *f = (msda_forward_args){ .dtype = DTYPES[d], .sizes = sizes, .spatial_shapes = SHAPES, .level_start = STARTS,
                              .value = buf[MD_VP_VALUE], .sampling_locations = buf[MD_VP_LOC],
                              .attention_weights = buf[MD_VP_ATTN], .output = buf[MD_VP_OUT] };
    *b = (msda_backward_args){ .dtype = DTYPES[d], .sizes = sizes, .spatial_shapes = SHAPES, .level_start = STARTS,
                               .value = buf[MD_VP_VALUE], .sampling_locations = buf[MD_VP_LOC],
                               .attention_weights = buf[MD_VP_ATTN], .grad_output = buf[MD_VP_GRAD_OUT],
                               .grad_value = buf[MD_VP_GRAD_VALUE], .grad_sampling_locations = buf[MD_VP_GRAD_LOC],
                               .grad_attention_weights = buf[MD_VP_GRAD_ATTN] };
}

/* ---- the problem and its f64 reference ---------------------------------------------------------- */

md_status md_vp_new(const md_msda_api *api, md_vp_problem **out, md_error *err)
{
    *out = NULL;
    md_vp_problem *p = calloc(1, sizeof *p);
    if (!p)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    make_inputs(p);
    void *buf[MD_VP_BUFFERS] = { p->value, p->loc, p->attn, p->exact.out, p->grad_out, p->exact.grad_value,
                                 p->exact.grad_loc, p->exact.grad_attn };
    msda_forward_args f;
    msda_backward_args b;
    msda_error e;
    md_vp_args(&f, &b, F64, buf);
    if (api->forward_cpu(&f, 0, &e) != MSDA_OK || api->backward_cpu(&b, 0, &e) != MSDA_OK) {
        free(p);
        return md_fail(err, MD_ERR_BUILD, "the CPU path fails in f64: %s", e.message);
    }
    *out = p;
    return MD_OK;
}

void md_vp_free(md_vp_problem *p)
{
    free(p);
}

bool md_vp_cpu_ran(const md_vp_problem *p, int d)
{
    return p->cpu_ran[d];
}

/* ---- one run's buffers -------------------------------------------------------------------------- */

void md_vp_buffers_free(md_vp_buffers *h)
{
    for (int i = 0; i < MD_VP_BUFFERS; i++)
        free(h->buf[i]);
    memset(h, 0, sizeof *h);
}

bool md_vp_buffers_alloc(md_vp_buffers *h, const md_vp_problem *p, int d)
{
    memset(h, 0, sizeof *h);
    h->dtype = d;
    const double *inputs[MD_VP_BUFFERS] = { [MD_VP_VALUE] = p->value, [MD_VP_LOC] = p->loc,
                                            [MD_VP_ATTN] = p->attn, [MD_VP_GRAD_OUT] = p->grad_out };
    bool ok = true;
    for (int i = 0; i < MD_VP_BUFFERS; i++) {
        h->bytes[i] = COUNTS[i] * ELEMENT_SIZE[d];
        h->buf[i] = inputs[i] ? to_dtype(inputs[i], COUNTS[i], d) : malloc(h->bytes[i]);
        if (!h->buf[i])
            ok = false;
        else if (!inputs[i])
            memset(h->buf[i], 0xff, h->bytes[i]); /* 0xff bytes are NaN in every floating type we use */
    }
    return ok;
}

/* ---- judging ------------------------------------------------------------------------------------ */

static void judge(md_verify_dtype *r, const md_vp_buffers *h, const results *want)
{
    int d = h->dtype;
    r->forward_error = relative_error(h->buf[MD_VP_OUT], want->out, N_OUT, d);
    double ev = relative_error(h->buf[MD_VP_GRAD_VALUE], want->grad_value, N_VALUE, d);
    double el = relative_error(h->buf[MD_VP_GRAD_LOC], want->grad_loc, N_LOC, d);
    double ea = relative_error(h->buf[MD_VP_GRAD_ATTN], want->grad_attn, N_ATTN, d);
    r->backward_error = fmax(ev, fmax(el, ea));
    r->passed = r->forward_error <= r->tolerance && r->backward_error <= r->tolerance;
}

static void widen(const md_vp_buffers *h, results *r)
{
    int d = h->dtype;
    for (size_t i = 0; i < N_OUT; i++)
        r->out[i] = element(h->buf[MD_VP_OUT], i, d);
    for (size_t i = 0; i < N_VALUE; i++)
        r->grad_value[i] = element(h->buf[MD_VP_GRAD_VALUE], i, d);
    for (size_t i = 0; i < N_LOC; i++)
        r->grad_loc[i] = element(h->buf[MD_VP_GRAD_LOC], i, d);
    for (size_t i = 0; i < N_ATTN; i++)
        r->grad_attn[i] = element(h->buf[MD_VP_GRAD_ATTN], i, d);
}

void md_vp_start_gpu_dtype(md_verify_dtype *r, int d)
{
    r->dtype = DTYPE_NAMES[d];
    r->tolerance = TOLERANCES[d];
}

void md_vp_judge_gpu(md_verify_dtype *r, const md_vp_buffers *h, const md_vp_problem *p)
{
    judge(r, h, &p->cpu[h->dtype]);
}

void md_vp_check_cpu(const md_msda_api *api, md_vp_problem *p, md_verify_device *dev)
{
    snprintf(dev->device, sizeof dev->device, "CPU");
    snprintf(dev->code, sizeof dev->code, "CPU path");
    dev->passed = true;
    for (int d = 0; d < MD_VERIFY_DTYPES; d++) {
        md_verify_dtype *r = &dev->dtypes[d];
        r->dtype = DTYPE_NAMES[d];
        r->tolerance = CPU_TOLERANCES[d];
        md_vp_buffers h;
        msda_forward_args f;
        msda_backward_args b;
        msda_error e;
        if (!md_vp_buffers_alloc(&h, p, d)) {
            snprintf(r->error, sizeof r->error, "out of memory");
        } else {
            md_vp_args(&f, &b, d, h.buf);
            if (api->forward_cpu(&f, 0, &e) != MSDA_OK || api->backward_cpu(&b, 0, &e) != MSDA_OK) {
                snprintf(r->error, sizeof r->error, "%s", e.message);
            } else {
                r->ran = true;
                judge(r, &h, &p->exact);
                widen(&h, &p->cpu[d]);
                p->cpu_ran[d] = true;
            }
        }
        md_vp_buffers_free(&h);
        dev->passed &= r->passed;
    }
}
