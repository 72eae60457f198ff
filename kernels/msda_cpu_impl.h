/* The CPU forward and backward for one element type: the formula of msda.h, written plainly.
 * Included by msda_cpu.c once per type, with these defined:
 *   CPU_T        the storage type          CPU_A       the accumulation type
 *   CPU_LOAD(x)  CPU_T -> CPU_A            CPU_STORE(a) CPU_A -> CPU_T
 *   CPU_C        the coordinates' storage type (locations, weights and their gradients)
 *   CPU_CLOAD(x) CPU_C -> CPU_A            CPU_CSTORE(a) CPU_A -> CPU_C
 *   CPU_FLOOR    floor for CPU_A           CPU_NAME(x) x with the types' suffix
 *   CPU_EXP      exp for CPU_A
 * Each function handles a range of work items and writes nothing outside its own items. */

typedef struct {
    int64_t off[4]; /* corners, in spatial positions from the level's start */
    CPU_A wt[4];
    int in[4];
    CPU_A lh, lw, hh, hw;
} CPU_NAME(corners);

/* As the device code's locate(): h = y*H - 0.5 rounded step by step (the library is compiled
 * with -ffp-contract=off), nothing indexed for points outside (-1, H) x (-1, W) or NaN. */
static int CPU_NAME(locate)(CPU_A x, CPU_A y, int64_t H, int64_t W, CPU_NAME(corners) *b) {
    const CPU_A h = y * (CPU_A)H - (CPU_A)0.5, w = x * (CPU_A)W - (CPU_A)0.5;
    if (!(h > (CPU_A)-1 && w > (CPU_A)-1 && h < (CPU_A)H && w < (CPU_A)W)) return 0;
    const CPU_A hf = CPU_FLOOR(h), wf = CPU_FLOOR(w);
    const int64_t h0 = (int64_t)hf, w0 = (int64_t)wf;
    b->lh = h - hf;
    b->lw = w - wf;
    b->hh = (CPU_A)1 - b->lh;
    b->hw = (CPU_A)1 - b->lw;
    b->wt[0] = b->hh * b->hw;
    b->wt[1] = b->hh * b->lw;
    b->wt[2] = b->lh * b->hw;
    b->wt[3] = b->lh * b->lw;
    b->in[0] = h0 >= 0 && w0 >= 0;
    b->in[1] = h0 >= 0 && w0 + 1 < W;
    b->in[2] = h0 + 1 < H && w0 >= 0;
    b->in[3] = h0 + 1 < H && w0 + 1 < W;
    b->off[0] = h0 * W + w0;
    b->off[1] = b->off[0] + 1;
    b->off[2] = b->off[0] + W;
    b->off[3] = b->off[0] + W + 1;
    return 1;
}

/* MSDA_SAMPLING_DISCRETE's pixel of one coordinate: trunc(v * n + 0.5) clamped to [0, n - 1],
 * compared before any conversion so that no out-of-range float is converted. */
static int64_t CPU_NAME(nearest)(CPU_A v, int64_t n) {
    const CPU_A f = v * (CPU_A)n + (CPU_A)0.5;
    return f < (CPU_A)1 ? 0 : f >= (CPU_A)n ? n - 1 : (int64_t)f;
}

/* The point's corners as pb's sampling takes them: bilinear (locate), or MSDA_SAMPLING_DISCRETE's
 * one pixel of weight 1 as corner 0, the others out (nothing for a NaN location). */
static int CPU_NAME(locate_point)(const msda_problem *pb, CPU_A x, CPU_A y, int64_t H, int64_t W,
                                  CPU_NAME(corners) *b) {
    if (!pb->discrete) return CPU_NAME(locate)(x, y, H, W, b);
    if (x != x || y != y) return 0;
    *b = (CPU_NAME(corners)){0};
    b->off[0] = CPU_NAME(nearest)(y, H) * W + CPU_NAME(nearest)(x, W);
    b->wt[0] = 1;
    b->in[0] = 1;
    return 1;
}

/* The softmax of n logits into w (msda.h, MSDA_WEIGHTS_LOGITS). The max propagates NaN, so
 * that a row with a NaN, a +inf (inf - inf) or only -inf logits comes out all NaN, as
 * torch.softmax gives it. */
static void CPU_NAME(softmax)(const CPU_C *x, int64_t n, CPU_A *w) {
    CPU_A mx = -(CPU_A)INFINITY, sum = 0;
    for (int64_t k = 0; k < n; k++) {
        const CPU_A v = CPU_CLOAD(x[k]);
        if (v > mx || v != v) mx = v;
    }
    for (int64_t k = 0; k < n; k++) {
        w[k] = CPU_EXP(CPU_CLOAD(x[k]) - mx);
        sum += w[k];
    }
    for (int64_t k = 0; k < n; k++) w[k] /= sum;
}

/* Point lp of group g's corners (its level msda_level_of_point's), with the rows it will read prefetched:
 * located one point ahead of its sums, so that these loads, anywhere in a value of tens of MB,
 * overlap the previous point's work rather than each waiting in turn (the loop was bound by
 * their latency). gv: the backward's sums of the pair's value gradient, prefetched too (NULL in
 * the forward). Returns whether the point is inside its level. */
static int CPU_NAME(locate_ahead)(const msda_problem *pb, const CPU_C *loc, const CPU_T *vnm, const CPU_A *gv,
                                  int64_t g, int64_t lp, CPU_NAME(corners) *b) {
    const int64_t l = msda_level_of_point(pb, lp), at = g * pb->LP + lp, row = pb->M * pb->D;
    if (!CPU_NAME(locate_point)(pb, CPU_CLOAD(loc[2 * at]), CPU_CLOAD(loc[2 * at + 1]), pb->level_h[l],
                                pb->level_w[l], b))
        return 0;
    const int64_t bytes = pb->D * (int64_t)sizeof(CPU_T), acc_bytes = pb->D * (int64_t)sizeof(CPU_A);
    for (int j = 0; j < 4; j++) {
        if (!b->in[j]) continue;
        const int64_t s = pb->level_start[l] + b->off[j];
        const char *r = (const char *)(vnm + s * row);
        for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(r + o);
        __builtin_prefetch(r + bytes - 1);
        if (gv) { /* the backward's sums of that row, which it adds to */
            const char *w = (const char *)(gv + s * pb->D);
            for (int64_t o = 0; o < acc_bytes; o += 64) __builtin_prefetch(w + o, 1);
            __builtin_prefetch(w + acc_bytes - 1, 1);
        }
    }
    return 1;
}

/* Groups g0..g1-1 of (n, q, m); scratch holds D accumulators, then LP softmaxed weights. */
static void CPU_NAME(forward)(const msda_problem *pb, const msda_forward_args *a, int64_t g0,
                              int64_t g1, void *scratch) {
    const CPU_T *value = a->value;
    const CPU_C *loc = a->sampling_locations, *wgt = a->attention_weights;
    CPU_T *out = a->output;
    CPU_A *acc = scratch;
    const int64_t D = pb->D, M = pb->M, row = M * D, LP = pb->LP;
    CPU_A *soft = acc + D;
    for (int64_t g = g0; g < g1; g++) {
        const int64_t m = g % M, n = g / (pb->Lq * M);
        const CPU_T *vnm = value + (n * pb->S * M + m) * D;
        for (int64_t d = 0; d < D; d++) acc[d] = 0;
        if (pb->logits) CPU_NAME(softmax)(wgt + g * LP, LP, soft);
        CPU_NAME(corners) b, next;
        int inside = LP > 0 && CPU_NAME(locate_ahead)(pb, loc, vnm, NULL, g, 0, &next);
        for (int64_t lp = 0; lp < LP; lp++) {
            b = next; /* what locate left there where the point is outside: not read */
            const int here = inside;
            if (lp + 1 < LP) inside = CPU_NAME(locate_ahead)(pb, loc, vnm, NULL, g, lp + 1, &next);
            if (!here) continue;
            const CPU_T *vl = vnm + pb->level_start[msda_level_of_point(pb, lp)] * row;
            const CPU_A aw = pb->logits ? soft[lp] : CPU_CLOAD(wgt[g * LP + lp]);
            for (int j = 0; j < 4; j++) {
                if (!b.in[j]) continue;
                const CPU_T *v = vl + b.off[j] * row;
                const CPU_A f = aw * b.wt[j];
                for (int64_t d = 0; d < D; d++) acc[d] += f * CPU_LOAD(v[d]);
            }
        }
        for (int64_t d = 0; d < D; d++) out[g * D + d] = CPU_STORE(acc[d]);
    }
}

/* Pairs nm0..nm1-1 of (n, m): every query of that batch item and head, so that the pair's
 * slice of grad_value belongs to one thread. scratch holds S*D + D accumulators, then, for
 * logits, a group's LP softmaxed weights and their gradients. */
static void CPU_NAME(backward)(const msda_problem *pb, const msda_backward_args *a, int64_t nm0,
                               int64_t nm1, void *scratch) {
    const CPU_T *value = a->value, *gout = a->grad_output;
    const CPU_C *loc = a->sampling_locations, *wgt = a->attention_weights;
    CPU_T *gvalue = a->grad_value;
    CPU_C *gloc = a->grad_sampling_locations, *gwgt = a->grad_attention_weights;
    const int64_t D = pb->D, M = pb->M, S = pb->S, row = M * D, LP = pb->LP;
    CPU_A *gv = scratch, *go = gv + S * D, *soft = go + D, *gsoft = soft + LP;
    for (int64_t nm = nm0; nm < nm1; nm++) {
        const int64_t n = nm / M, m = nm % M;
        const CPU_T *vnm = value + (n * S * M + m) * D;
        for (int64_t i = 0; i < S * D; i++) gv[i] = 0;
        for (int64_t q = 0; q < pb->Lq; q++) {
            const int64_t g = (n * pb->Lq + q) * M + m;
            for (int64_t d = 0; d < D; d++) go[d] = CPU_LOAD(gout[g * D + d]);
            if (pb->logits) CPU_NAME(softmax)(wgt + g * LP, LP, soft);
            CPU_NAME(corners) b, next;
            int inside = LP > 0 && CPU_NAME(locate_ahead)(pb, loc, vnm, gv, g, 0, &next);
            for (int64_t lp = 0; lp < LP; lp++) {
                const int64_t l = msda_level_of_point(pb, lp);
                const int64_t H = pb->level_h[l], W = pb->level_w[l], start = pb->level_start[l];
                const int64_t at = g * LP + lp;
                b = next;
                const int here = inside;
                if (lp + 1 < LP) inside = CPU_NAME(locate_ahead)(pb, loc, vnm, gv, g, lp + 1, &next);
                const CPU_A aw = pb->logits ? soft[lp] : CPU_CLOAD(wgt[at]);
                if (!here) {
                    gloc[2 * at] = gloc[2 * at + 1] = gwgt[at] = CPU_CSTORE((CPU_A)0);
                    if (pb->logits) gsoft[lp] = 0;
                    continue;
                }
                CPU_A dot[4] = {0, 0, 0, 0};
                for (int j = 0; j < 4; j++) {
                    if (!b.in[j]) continue;
                    const CPU_T *v = vnm + (start + b.off[j]) * row;
                    CPU_A *gvj = gv + (start + b.off[j]) * D;
                    const CPU_A f = aw * b.wt[j];
                    for (int64_t d = 0; d < D; d++) {
                        dot[j] += go[d] * CPU_LOAD(v[d]);
                        gvj[d] += f * go[d];
                    }
                }
                const CPU_A d_weight =
                    b.wt[0] * dot[0] + b.wt[1] * dot[1] + b.wt[2] * dot[2] + b.wt[3] * dot[3];
                const CPU_A d_lw = b.hh * (dot[1] - dot[0]) + b.lh * (dot[3] - dot[2]);
                const CPU_A d_lh = b.hw * (dot[2] - dot[0]) + b.lw * (dot[3] - dot[1]);
                /* discrete: the sample is constant in the location between pixel edges */
                gloc[2 * at] = CPU_CSTORE(pb->discrete ? (CPU_A)0 : aw * d_lw * (CPU_A)W);
                gloc[2 * at + 1] = CPU_CSTORE(pb->discrete ? (CPU_A)0 : aw * d_lh * (CPU_A)H);
                gwgt[at] = CPU_CSTORE(d_weight);
                if (pb->logits) gsoft[lp] = d_weight;
            }
            if (pb->logits) { /* through the softmax: w * (g - sum_k w_k g_k) */
                CPU_A dot = 0;
                for (int64_t k = 0; k < LP; k++) dot += soft[k] * gsoft[k];
                for (int64_t k = 0; k < LP; k++)
                    gwgt[g * LP + k] = CPU_CSTORE(soft[k] * (gsoft[k] - dot));
            }
        }
        for (int64_t s = 0; s < S; s++)
            for (int64_t d = 0; d < D; d++)
                gvalue[((n * S + s) * M + m) * D + d] = CPU_STORE(gv[s * D + d]);
    }
}
