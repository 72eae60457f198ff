/* Validation before any work: sizes, the level table, 64-bit element counts, pointers. */
#include <stdint.h>

#include "msda_internal.h"

/* a * b, or -1 when the product passes MSDA_MAX_ELEMS (a, b > 0). */
static int64_t checked_mul(int64_t a, int64_t b) {
    if (a < 0 || b < 0 || (b != 0 && a > MSDA_MAX_ELEMS / b)) return -1;
    return a * b;
}

static int64_t checked_product(const int64_t *f, int n) {
    int64_t p = 1;
    for (int i = 0; i < n && p >= 0; i++) p = checked_mul(p, f[i]);
    return p;
}

msda_problem_in msda_forward_in(const msda_forward_args *a) {
    return (msda_problem_in){a->dtype,  a->coord_type,     a->level_table,     a->weights,
                             &a->sizes, a->spatial_shapes, a->level_start,     a->level_points,
                             a->sampling};
}

msda_problem_in msda_backward_in(const msda_backward_args *a) {
    return (msda_problem_in){a->dtype,  a->coord_type,     a->level_table,     a->weights,
                             &a->sizes, a->spatial_shapes, a->level_start,     a->level_points,
                             a->sampling};
}

/* Each level's points (in->level_points, else P on every level) into pb: level_points,
 * point_start, LP and uniform. P is the largest count, so that the bounds the kernels and the
 * buffer plans derive from P hold for every level; LP <= L*P, which msda_check_problem bounds. */
static msda_status check_level_points(const msda_problem_in *in, msda_problem *pb, msda_error *err) {
    int64_t total = 0, largest = 0;
    pb->uniform = 1;
    for (int64_t l = 0; l < pb->L; l++) {
        const int64_t count = in->level_points ? in->level_points[l] : pb->P;
        if (count <= 0 || count > pb->P)
            return msda_fail(err, MSDA_ERR_BAD_SIZE,
                             "level_points[%lld] is %lld: it must be from 1 to P = %lld", (long long)l,
                             (long long)count, (long long)pb->P);
        pb->level_points[l] = count;
        pb->point_start[l] = total;
        total += count; /* at most 16 counts below 2^31 */
        if (count > largest) largest = count;
        if (count != pb->P) pb->uniform = 0;
    }
    if (largest != pb->P)
        return msda_fail(err, MSDA_ERR_BAD_SIZE,
                         "P (points) is %lld: with level_points it must be the largest of them, %lld",
                         (long long)pb->P, (long long)largest);
    pb->LP = total;
    return MSDA_OK;
}

msda_status msda_check_problem(const msda_problem_in *in, msda_problem *pb, msda_error *err) {
    const msda_sizes *sz = in->sizes;
    const msda_dtype dtype = in->dtype;
    const int64_t *shapes = in->shapes, *starts = in->starts;
    if (!sz || !pb) return msda_fail(err, MSDA_ERR_NULL_ARGUMENT, "sizes is NULL");
    if (msda_dtype_size(dtype) == 0)
        return msda_fail(err, MSDA_ERR_BAD_DTYPE, "unknown data type %d", (int)dtype);
    if (in->coord_type != MSDA_COORD_SAME && in->coord_type != MSDA_COORD_F32)
        return msda_fail(err, MSDA_ERR_BAD_DTYPE, "unknown coord_type %d", (int)in->coord_type);
    if (in->coord_type == MSDA_COORD_F32 && dtype == MSDA_F64)
        return msda_fail(err, MSDA_ERR_BAD_DTYPE,
                         "f32 sampling locations and attention weights go with an f16, bf16 or f32 "
                         "value, not f64");
    if (in->level_table != MSDA_HOST && in->level_table != MSDA_DEVICE)
        return msda_fail(err, MSDA_ERR_BAD_ARGUMENT, "level_table is %d: MSDA_HOST or MSDA_DEVICE",
                         (int)in->level_table);
    if (in->weights != MSDA_WEIGHTS_SOFTMAXED && in->weights != MSDA_WEIGHTS_LOGITS)
        return msda_fail(err, MSDA_ERR_BAD_ARGUMENT,
                         "weights is %d: MSDA_WEIGHTS_SOFTMAXED or MSDA_WEIGHTS_LOGITS",
                         (int)in->weights);
    if (in->sampling != MSDA_SAMPLING_BILINEAR && in->sampling != MSDA_SAMPLING_DISCRETE)
        return msda_fail(err, MSDA_ERR_BAD_ARGUMENT,
                         "sampling is %d: MSDA_SAMPLING_BILINEAR or MSDA_SAMPLING_DISCRETE",
                         (int)in->sampling);
    const struct {
        const char *name;
        int64_t value;
        int64_t max;
    } sizes[] = {
        {"N (batch)", sz->batch, MSDA_MAX_ELEMS},     {"S (spatial)", sz->spatial, MSDA_MAX_ELEMS},
        {"M (heads)", sz->heads, INT32_MAX},          {"D (channels)", sz->channels, INT32_MAX},
        {"Lq (queries)", sz->queries, MSDA_MAX_ELEMS}, {"L (levels)", sz->levels, INT32_MAX},
        {"P (points)", sz->points, INT32_MAX},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value <= 0 || sizes[i].value > sizes[i].max)
            return msda_fail(err, MSDA_ERR_BAD_SIZE, "%s is %lld: it must be from 1 to %lld",
                             sizes[i].name, (long long)sizes[i].value, (long long)sizes[i].max);
    if (sz->levels > MSDA_MAX_LEVELS)
        return msda_fail(err, MSDA_ERR_TOO_MANY_LEVELS, "L is %lld: at most %d levels",
                         (long long)sz->levels, MSDA_MAX_LEVELS);
    if (!shapes || !starts)
        return msda_fail(err, MSDA_ERR_NULL_ARGUMENT, "%s is NULL",
                         shapes ? "level_start" : "spatial_shapes");

    *pb = (msda_problem){0};
    pb->dtype = dtype;
    pb->coord_f32 = in->coord_type == MSDA_COORD_F32 && dtype != MSDA_F32;
    pb->table_on_device = in->level_table == MSDA_DEVICE;
    pb->logits = in->weights == MSDA_WEIGHTS_LOGITS;
    pb->discrete = in->sampling == MSDA_SAMPLING_DISCRETE;
    pb->N = sz->batch;
    pb->S = sz->spatial;
    pb->M = sz->heads;
    pb->D = sz->channels;
    pb->Lq = sz->queries;
    pb->L = sz->levels;
    pb->P = sz->points;
    const msda_status points = check_level_points(in, pb, err);
    if (points != MSDA_OK) return points;
    int64_t sum = pb->table_on_device ? pb->S : 0; /* the kernels check a device table */
    for (int64_t l = 0; l < pb->L && !pb->table_on_device; l++) {
        const int64_t h = shapes[2 * l], w = shapes[2 * l + 1];
        if (h <= 0 || w <= 0 || h > INT32_MAX || w > INT32_MAX)
            return msda_fail(err, MSDA_ERR_BAD_SHAPE,
                             "level %lld has shape (%lld, %lld): H and W must be from 1 to %d",
                             (long long)l, (long long)h, (long long)w, INT32_MAX);
        if (starts[l] != sum)
            return msda_fail(err, MSDA_ERR_LEVEL_START,
                             "level_start[%lld] is %lld, the sum of the levels before it is %lld",
                             (long long)l, (long long)starts[l], (long long)sum);
        const int64_t hw = h * w; /* both < 2^31: no overflow */
        if (hw > pb->S || sum > pb->S - hw)
            return msda_fail(err, MSDA_ERR_SHAPE_SUM,
                             "the levels' H*W add up to more than S = %lld", (long long)pb->S);
        pb->level_h[l] = h;
        pb->level_w[l] = w;
        pb->level_start[l] = sum;
        sum += hw;
    }
    if (sum != pb->S)
        return msda_fail(err, MSDA_ERR_SHAPE_SUM, "the levels' H*W add up to %lld, S is %lld",
                         (long long)sum, (long long)pb->S);

    const int64_t value_f[] = {pb->N, pb->S, pb->M, pb->D};
    const int64_t out_f[] = {pb->N, pb->Lq, pb->M, pb->D};
    const int64_t loc_f[] = {pb->N, pb->Lq, pb->M, pb->LP, 2};
    pb->value_elems = checked_product(value_f, 4);
    pb->output_elems = checked_product(out_f, 4);
    const int64_t loc_elems = checked_product(loc_f, 5);
    /* The kernels count a group's points in 32 bits, and index the uniform case's L*P so too. */
    if (pb->value_elems < 0 || pb->output_elems < 0 || loc_elems < 0 || pb->L * pb->P > INT32_MAX)
        return msda_fail(err, MSDA_ERR_SIZE_OVERFLOW,
                         "N*S*M*D, N*Lq*M*D or N*Lq*M*L*P*2 exceeds %lld elements, or L*P exceeds 2^31 - 1",
                         (long long)MSDA_MAX_ELEMS);
    pb->weight_elems = loc_elems / 2;
    return MSDA_OK;
}

static msda_status check_pointers(const void *const *ptrs, const char *const *names, int n,
                                  msda_error *err) {
    for (int i = 0; i < n; i++)
        if (!ptrs[i]) return msda_fail(err, MSDA_ERR_NULL_ARGUMENT, "%s is NULL", names[i]);
    return MSDA_OK;
}

msda_status msda_validate_forward(const msda_forward_args *a, msda_error *err) {
    msda_problem pb;
    return msda_check_forward(a, &pb, err);
}

msda_status msda_validate_backward(const msda_backward_args *a, msda_error *err) {
    msda_problem pb;
    return msda_check_backward(a, &pb, err);
}

msda_status msda_check_forward(const msda_forward_args *a, msda_problem *pb, msda_error *err) {
    if (!a) return msda_fail(err, MSDA_ERR_NULL_ARGUMENT, "args is NULL");
    const msda_problem_in in = msda_forward_in(a);
    msda_status st = msda_check_problem(&in, pb, err);
    if (st != MSDA_OK) return st;
    const void *const ptrs[] = {a->value, a->sampling_locations, a->attention_weights, a->output};
    static const char *const names[] = {"value", "sampling_locations", "attention_weights",
                                        "output"};
    return check_pointers(ptrs, names, 4, err);
}

msda_status msda_check_backward(const msda_backward_args *a, msda_problem *pb, msda_error *err) {
    if (!a) return msda_fail(err, MSDA_ERR_NULL_ARGUMENT, "args is NULL");
    const msda_problem_in in = msda_backward_in(a);
    msda_status st = msda_check_problem(&in, pb, err);
    if (st != MSDA_OK) return st;
    if (a->deterministic != 0 && a->deterministic != 1)
        return msda_fail(err, MSDA_ERR_BAD_ARGUMENT, "deterministic is %d: 0 or 1", (int)a->deterministic);
    pb->deterministic = a->deterministic;
    const void *const ptrs[] = {a->value,       a->sampling_locations,      a->attention_weights,
                                a->grad_output, a->grad_value,              a->grad_sampling_locations,
                                a->grad_attention_weights};
    static const char *const names[] = {"value",       "sampling_locations",      "attention_weights",
                                        "grad_output", "grad_value",              "grad_sampling_locations",
                                        "grad_attention_weights"};
    return check_pointers(ptrs, names, 7, err);
}
