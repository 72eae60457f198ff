// The MSDA kernels: forward and backward per data type, written from the formula in msda.h.
//
// Two element types per kernel: Tr for value, grad_output, output and grad_value; Cr for
// sampling_locations, attention_weights and their gradients: Tr itself for f32 and f64, and for
// a 16-bit Tr coord16<Tr>, Tr's own type or f32 (mixed precision) as the launcher says (coords
// below). Both accumulate in the same type.
//
// Work layout, shared by both: a head's D channels are split into D / VEC vectors ("chunks")
// of VEC elements (16 bytes where D and the pointers allow, 8 for 16-bit types in the buffered
// backward). No kernel takes one element a lane: a row that no vector divides, or a pointer no
// vector is aligned to, is staged by the launcher into a padded copy (msda_stage.c). Each (n, q, m)
// gets a group of `lanes` consecutive threads (a power of two, at most 32, so a group never
// spans two warps); lane i handles chunks i, i + lanes, ... . Grid-stride loops over whole
// warps keep every lane of a warp in step, so the backward can reduce the location and weight
// gradients of a group with warp shuffles.
#include "msda_device.cuh"
#include "msda_parts.h"

using namespace msda;

#ifdef MSDA_PART
// A part compiles some of the kernels below (msda_parts.h), so some shared helpers go unused.
#pragma nv_diag_suppress 177
#endif

// What this code was built with, read by the host after loading the module.
extern "C" __constant__ msda_device_config msda_config = {
    MSDA_DEVICE_ABI, MSDA_ARCH, MSDA_MAX_THREADS, MSDA_ENABLE_F16, MSDA_ENABLE_BF16,
    MSDA_F16_STRATEGY, MSDA_BF16_STRATEGY, MSDA_VECTOR_RED, MSDA_POINTS16_WAVES, MSDA_BACKWARD_SPREAD_LOG2,
    MSDA_BF16_HALF_SUMS, MSDA_F16_REPLICAS ? MSDA_F16_REPLICA_ADDS : 0, MSDA_BF16_REPLICAS ? MSDA_BF16_REPLICA_ADDS : 0,
    MSDA_BACKWARD_HEAD_PHASES_LOG2};

namespace {

// Where a sampling point falls in its level: the four corners' offsets (in units of the
// value's spatial stride), their bilinear weights, and which corners lie inside the map.
template <typename A> struct bilinear {
    int64_t off[4];
    A wt[4];
    bool in[4];
    A lh, lw, hh, hw; // fractional parts and their complements, for the gradients
};

// False (and nothing filled) where the point contributes nothing: outside (-1, H) x (-1, W),
// which also covers NaN and infinite locations, so no index is ever formed from them.
// DISCRETE (msda.h, MSDA_SAMPLING_DISCRETE): the nearest pixel, clamped into the map (so only a
// NaN location is outside), as corner 0 of weight 1 with the other corners out: h and w are
// then whole numbers, and the bilinear code below gives exactly that. One path for both modes,
// selects rather than branches: a branch of its own cost 7 % more compile time (kernels/PERF.md).
// The backward takes it in its exact-sums kernels only (backward, DISCRETE_OK).
template <typename A>
__device__ __forceinline__ bool locate(A x, A y, int H, int W, bilinear<A> &b, bool discrete = false) {
    if (discrete && (x != x || y != y)) return false;
    const A h = discrete ? (A)nearest_pixel(y, H) : scale_shift(y, H);
    const A w = discrete ? (A)nearest_pixel(x, W) : scale_shift(x, W);
    if (!(h > (A)-1 && w > (A)-1 && h < (A)H && w < (A)W)) return false;
    const A hf = floor(h), wf = floor(w);
    const int h0 = (int)hf, w0 = (int)wf;
    b.lh = h - hf;
    b.lw = w - wf;
    b.hh = (A)1 - b.lh;
    b.hw = (A)1 - b.lw;
    b.wt[0] = b.hh * b.hw;
    b.wt[1] = b.hh * b.lw;
    b.wt[2] = b.lh * b.hw;
    b.wt[3] = b.lh * b.lw;
    b.in[0] = h0 >= 0 && w0 >= 0;
    b.in[1] = !discrete && h0 >= 0 && w0 + 1 < W;
    b.in[2] = !discrete && h0 + 1 < H && w0 >= 0;
    b.in[3] = !discrete && h0 + 1 < H && w0 + 1 < W;
    const int64_t base = (int64_t)h0 * W + w0;
    b.off[0] = base;
    b.off[1] = base + 1;
    b.off[2] = base + W;
    b.off[3] = base + W + 1;
    return true;
}

// The level table as a block uses it, in shared memory.
struct level_table {
    int32_t h[MSDA_KP_MAX_LEVELS], w[MSDA_KP_MAX_LEVELS];
    int64_t start[MSDA_KP_MAX_LEVELS];
    int32_t points[MSDA_KP_MAX_LEVELS], point_start[MSDA_KP_MAX_LEVELS]; // each level's points, its first
    int32_t shape_ok[MSDA_KP_MAX_LEVELS]; // a table in device memory: H, W from 1 to 2^31 - 1
    int status;                            // MSDA_OK, or why the table is inconsistent
    // The 16-bit backward's f32 buffer (plan_buffer): which levels it holds, each level's H * W,
    // and the buffer row where each buffered level starts. Under replicas (p.replica_adds > 0):
    // the replicated levels, their replicas, and the row of each one's first replica.
    uint32_t buffered;
    int64_t hw[MSDA_KP_MAX_LEVELS], buffer_base[MSDA_KP_MAX_LEVELS], replicas[MSDA_KP_MAX_LEVELS];
};

// Fills t from the parameters, or from device memory (msda.h, MSDA_DEVICE), which is checked
// here as the host checks a table in host memory, in the same order, so that an inconsistent
// one gives the status the host would. Every block reaches the same verdict from the same
// table, uniform across the block (every thread must call this, before any early exit).
// Returns whether the table may be used to form indices.
__device__ __forceinline__ bool load_levels(const msda_kparams &p, level_table &t) {
    const int i = threadIdx.x; // blocks have at least 32 threads and L <= 16
    if (i < p.levels) {
        t.points[i] = p.level_points[i];
        t.point_start[i] = p.level_point_start[i];
    }
    if (p.level_shapes) {
        if (i < p.levels) {
            const int64_t *shapes = reinterpret_cast<const int64_t *>(p.level_shapes);
            const int64_t h = shapes[2 * i], w = shapes[2 * i + 1];
            t.shape_ok[i] = h > 0 && w > 0 && h <= INT32_MAX && w <= INT32_MAX;
            t.h[i] = t.shape_ok[i] ? (int32_t)h : 0;
            t.w[i] = t.shape_ok[i] ? (int32_t)w : 0;
            t.start[i] = reinterpret_cast<const int64_t *>(p.level_starts)[i];
        }
        __syncthreads();
        if (i == 0) {
            int st = MSDA_OK;
            int64_t sum = 0;
            for (int l = 0; l < p.levels && st == MSDA_OK; l++) {
                const int64_t hw = (int64_t)t.h[l] * t.w[l]; // both < 2^31: no overflow
                if (!t.shape_ok[l])
                    st = MSDA_ERR_BAD_SHAPE;
                else if (t.start[l] != sum)
                    st = MSDA_ERR_LEVEL_START;
                else if (hw > p.spatial - sum)
                    st = MSDA_ERR_SHAPE_SUM;
                else
                    sum += hw;
            }
            if (st == MSDA_OK && sum != p.spatial) st = MSDA_ERR_SHAPE_SUM;
            t.status = st;
            if (st != MSDA_OK && p.device_status) atomicExch(reinterpret_cast<int *>(p.device_status), st);
        }
    } else {
        if (i < p.levels) {
            t.h[i] = p.level_h[i];
            t.w[i] = p.level_w[i];
            t.start[i] = p.level_start[i];
        }
        if (i == 0) t.status = MSDA_OK;
    }
    __syncthreads();
    return t.status == MSDA_OK;
}

// The buffered levels and where each starts in the buffer (msda_plan.h), uniform across the
// block: the launcher's plan (p.buffer_levels) for a table in host memory, or, for one in device
// memory, the same rule on the table itself (p.buffer_max_adds > 0), within the buffer's
// p.buffer_spatial rows. None where the table is inconsistent. Every thread must call this.
// Under replicas (p.replica_adds > 0) the same rule for a table anywhere: msda_plan_replicas,
// every level native should its replicas not fit the p.buffer_spatial rows (never, with the
// host's bound).
__device__ __forceinline__ void plan_buffer(const msda_kparams &p, level_table &t, bool table_ok) {
    if (threadIdx.x == 0) {
        for (int l = 0; l < p.levels; l++) t.hw[l] = table_ok ? (int64_t)t.h[l] * t.w[l] : 0;
        uint32_t set = 0;
        if (p.replica_adds > 0) {
            const int64_t rows =
                msda_plan_replicas(p.levels, t.hw, p.queries, p.points, p.replica_adds, t.replicas, t.buffer_base);
            for (int l = 0; l < p.levels; l++) {
                if (!table_ok || rows > p.buffer_spatial) t.replicas[l] = 1;
                if (t.replicas[l] > 1) set |= 1u << l;
            }
        } else {
            if (table_ok)
                set = p.buffer_max_adds > 0
                          ? msda_plan_levels(p.levels, t.hw, p.queries, p.points, p.buffer_max_adds, p.buffer_spatial)
                          : p.buffer_levels;
            msda_pack_levels(p.levels, t.hw, set, t.buffer_base);
        }
        t.buffered = set;
    }
    __syncthreads();
}

// A group's coordinates (its locations or weights, or their gradients) from `first` on, read and
// written in the accumulation type. Cr is the type itself (f32_t, f64_t, f16_t, bf16_t), or
// coord16<Tr> beside a 16-bit value: Tr's own type or f32, as p.coord_f32 says, so that one
// kernel serves both with a uniform branch a coordinate where each type took a kernel of its own
// (fewer kernels to compile, issue 41; which kernels take it: MSDA_16BIT_SET below).
template <class Tr> struct coord16 {
    typedef float A;
};
template <class Cr> struct coords {
    typedef typename Cr::S S;
    typedef typename Cr::A A;
    S *base;
    __device__ __forceinline__ coords(uint64_t address, int64_t first, int32_t)
        : base(reinterpret_cast<S *>(address) + first) {}
    __device__ __forceinline__ A operator[](int64_t i) const { return to_acc<Cr>(base[i]); }
    __device__ __forceinline__ void pair(int64_t i, A (&xy)[2]) const { load_vec<Cr, 2>(base + i, xy); }
    __device__ __forceinline__ void put(int64_t i, A v) const { base[i] = from_acc<Cr>(v); }
    __device__ __forceinline__ void put_streaming(int64_t i, A v) const { __stcs(base + i, from_acc<Cr>(v)); }
    __device__ __forceinline__ const void *at(int64_t i) const { return base + i; }
    __device__ __forceinline__ coords from(int64_t i) const { return coords(*this, i); }
    __device__ __forceinline__ coords(const coords &c, int64_t i) : base(c.base + i) {}
};
template <class Tr> struct coords<coord16<Tr>> {
    typedef float A;
    char *base;
    int shift; // log2 of a coordinate's bytes: one address computation for either type
    __device__ __forceinline__ coords(uint64_t address, int64_t first, int32_t coord_f32)
        : base(reinterpret_cast<char *>(address)), shift(coord_f32 ? 2 : 1) {
        base += first << shift;
    }
    __device__ __forceinline__ char *at(int64_t i) const { return base + (i << shift); }
    __device__ __forceinline__ coords from(int64_t i) const { return coords(*this, i); }
    __device__ __forceinline__ coords(const coords &c, int64_t i) : base(c.at(i)), shift(c.shift) {}
    __device__ __forceinline__ float operator[](int64_t i) const {
        const char *x = at(i);
        return shift == 2 ? *reinterpret_cast<const float *>(x) : to_acc<Tr>(*reinterpret_cast<const unsigned short *>(x));
    }
    __device__ __forceinline__ void pair(int64_t i, float (&xy)[2]) const {
        if (shift == 2)
            load_vec<f32_t, 2>(reinterpret_cast<const float *>(at(i)), xy);
        else
            load_vec<Tr, 2>(reinterpret_cast<const unsigned short *>(at(i)), xy);
    }
    __device__ __forceinline__ void put(int64_t i, float v) const {
        if (shift == 2)
            *reinterpret_cast<float *>(at(i)) = v;
        else
            *reinterpret_cast<unsigned short *>(at(i)) = from_acc<Tr>(v);
    }
    __device__ __forceinline__ void put_streaming(int64_t i, float v) const {
        if (shift == 2)
            __stcs(reinterpret_cast<float *>(at(i)), v);
        else
            __stcs(reinterpret_cast<unsigned short *>(at(i)), from_acc<Tr>(v));
    }
};

// The softmax over a group's L*P logits (msda.h, MSDA_WEIGHTS_LOGITS): its max and the sum of
// exp(x - max), so that w = exp(x - max) / sum. The max takes a NaN up (a plain fmax would drop
// it), so a row with a NaN, a +inf (inf - inf) or only -inf logits gives NaN everywhere, as
// torch.softmax and the CPU path do. Each thread of the group computes it alone: the L*P logits
// are one or two cache lines, shared by the group, and no shuffle is needed.
template <class Cr, typename A>
__device__ __forceinline__ void softmax_stats(const coords<Cr> &x, int LP, A &mx, A &sum) {
    mx = -(A)INFINITY;
    for (int k = 0; k < LP; k++) {
        const A v = x[k];
        if (v > mx || v != v) mx = v;
    }
    sum = (A)0;
    for (int k = 0; k < LP; k++) sum += exp(x[k] - mx);
}

// softmax_stats, computed by the `size` threads of a group together (sub: this thread's place in
// it): each takes every size-th logit, and shuffles combine them, NaN kept as softmax_stats
// keeps it. The butterfly leaves the same sums on every thread. Every thread of the warp calls it.
// Without SUM, the max alone (sum 0): the points kernel takes the sum with its points.
template <class Cr, typename A, bool SUM = true>
__device__ __forceinline__ void softmax_stats_group(const coords<Cr> &x, int LP, int sub, int size, A &mx,
                                                    A &sum) {
    mx = -(A)INFINITY;
    for (int k = sub; k < LP; k += size) {
        const A v = x[k];
        if (v > mx || v != v) mx = v;
    }
    for (int o = 1; o < size; o <<= 1) {
        const A v = __shfl_xor_sync(0xffffffffu, mx, o);
        if (v > mx || v != v) mx = v;
    }
    sum = (A)0;
    if constexpr (SUM) {
        for (int k = sub; k < LP; k += size) sum += exp(x[k] - mx);
        for (int o = 1; o < size; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    }
}

// Which (n, q, m) group, and which thread of it, thread t of the forward's grid-stride loop
// is: a group is 1 << (lanes_log2 + parts_log2) consecutive threads, lane-major. Threads past
// the last group are inactive and take group 0's place, so that they still reach the shuffles.
struct group_place {
    bool active;
    int64_t group, n; // group = (n * Lq + q) * M + m
    int m, sub, lane, part;
};

__device__ __forceinline__ group_place place_of(const msda_kparams &p, int64_t t) {
    const int group_log2 = p.lanes_log2 + p.parts_log2;
    group_place g;
    g.active = (t >> group_log2) < p.groups;
    g.group = g.active ? (t >> group_log2) : 0;
    g.sub = (int)(t & ((1 << group_log2) - 1));
    g.lane = g.sub & ((1 << p.lanes_log2) - 1);
    g.part = g.sub >> p.lanes_log2;
    const int64_t nq = g.group / p.heads;
    g.m = (int)(g.group - nq * p.heads);
    g.n = nq / p.queries;
    return g;
}

// The first group's locations and weights asked into L1 before the block waits on its level
// table (from device memory: a read and a check, kernels/PERF.md), so that their latency runs
// beside the table's rather than after it. Lane 0 of a group asks; a prefetch needs no register
// and never faults. Not where the points are split over parts (a decoder: few groups, each
// thread's work short), where it measured 2% slower; the encoders 1-2% faster.
template <class Cr>
__device__ __forceinline__ void prefetch_group_inputs(const msda_kparams &p, int64_t t, int LP) {
    const int group_log2 = p.lanes_log2 + p.parts_log2;
    const int64_t group = t >> group_log2;
    if (p.parts_log2 || group >= p.groups || (t & ((1 << group_log2) - 1))) return;
    const coords<Cr> loc(p.locations, group * LP * 2, p.coord_f32), wgt(p.weights, group * LP, p.coord_f32);
    asm volatile("prefetch.global.L1 [%0];" ::"l"(loc.at(0)));
    asm volatile("prefetch.global.L1 [%0];" ::"l"(loc.at(LP * 2 - 1)));
    asm volatile("prefetch.global.L1 [%0];" ::"l"(wgt.at(0)));
}

// A sampling point as the forward's points kernel uses it: its corners' weights (the attention
// weight folded in), the first corner's byte offset from the lane's place in the value, and
// which corners lie inside the map (bit j: corner j; none for a point outside it).
template <typename A> struct point_setup {
    A f[4];
    uint32_t q, in;
    A e; // SOFTMAX with MSDA_SOFTMAX_SUM_LATE: exp(logit - max), inside the map or not
};

// Where point k of level (H, W) falls; `first` is the level's byte offset, `row` the bytes
// between two spatial positions. Offsets are unsigned 32-bit: the launcher checked that a
// batch element's value is under 2^32 bytes, so an inside corner's offset is exact (an outside
// one may wrap, and is never loaded).
template <class Cr, typename A, bool SOFTMAX>
__device__ __forceinline__ point_setup<A> setup_point(const coords<Cr> &loc, const coords<Cr> &wgt, int k,
                                                      int H, int W, uint32_t first, uint32_t row, A wmax, A wsum_inv) {
    point_setup<A> s = {{(A)0, (A)0, (A)0, (A)0}, 0u, 0u, (A)0};
    A xy[2];
    loc.pair(2 * k, xy);
    A a = wgt[k];
    if constexpr (SOFTMAX) {
        a = exp(a - wmax);
        s.e = a;
        if (!MSDA_SOFTMAX_SUM_LATE) a *= wsum_inv;
    }
    bilinear<A> b;
    if (!locate(xy[0], xy[1], H, W, b)) return s;
    s.q = first + (uint32_t)b.off[0] * row; // off[0] = h0 W + w0, taken modulo 2^32 as every offset
#pragma unroll
    for (int j = 0; j < 4; j++) {
        s.in |= (uint32_t)b.in[j] << j;
        s.f[j] = a * b.wt[j];
    }
    return s;
}

// A point's four corners added to acc: their loads first, then their sums (consumed as they
// came, each load waited for the one before: one L2 round trip a corner, in the SASS).
template <class Tr, int VEC, typename A>
__device__ __forceinline__ void add_corners(const char *value, const point_setup<A> &s, uint32_t row, uint32_t down,
                                            A (&acc)[VEC]) {
    const uint32_t at[4] = {s.q, s.q + row, s.q + down, s.q + down + row};
    typename vec_of<Tr, VEC>::raw raw[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (s.in >> j & 1) raw[j] = load_raw<Tr, VEC>(reinterpret_cast<const typename Tr::S *>(value + at[j]));
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (!(s.in >> j & 1)) continue;
        A v[VEC];
        unpack_raw<Tr, VEC>(raw[j], v);
#pragma unroll
        for (int i = 0; i < VEC; i++) acc[i] += s.f[j] * v[i];
    }
}

// The forward where every level has P points (MSDA_FAST_POINTS: Deformable-DETR and the models
// after it), a kernel of its own (msda_forward_points_*), which the launcher takes where the
// problem has that shape (msda_launch.c, use_points_kernel). The layout is the general forward's
// below (lane i of a group takes chunk i, so that a corner is one request of the group's whole
// row), with less work a point: the point's level is the loop's, not counted out; offsets are
// 32-bit bytes; a point's x and y are one load; the softmax statistics are shared by the group.
// Parts split the levels (the launcher keeps parts <= L). A point's four corners are loaded
// before any is used, which the registers bound (MSDA_POINTS_MIN_BLOCKS) must leave room for.
//
// 16-bit values (issue-bound: kernels/PERF.md) share each point's set-up: in a round of
// min(lanes, P) points lane r computes point r's, and the group's lanes take it from there by
// shuffles, a sixth of the instructions of computing it (H200, enc_b8 f16 5% faster, the fused
// softmax's 10%). f32 and f64, L2-bound, lose by the shuffles' wait: each lane computes each point;
// but f32's fused softmax shares it too, its exp a point outweighing the wait (enc_b8 realistic
// 12% faster, random 2%; PERF.md, session 12).
// Per group the sums are taken in the general forward's order, so both give the same output
// (but for the fused softmax, whose sum of exponentials the shuffles add in another order).
template <class Tr, class Cr, int VEC, bool SOFTMAX, int P>
__device__ __forceinline__ void forward_points(const msda_kparams &p) {
    typedef typename Tr::S S;
    typedef typename Tr::A A;
    constexpr bool share_setup = sizeof(S) == 2 || (SOFTMAX && sizeof(S) == 4);
    __shared__ level_table lv;
    const int LP = p.levels * P;
    prefetch_group_inputs<Cr>(p, (int64_t)blockIdx.x * blockDim.x + threadIdx.x, LP);
    const bool table_ok = load_levels(p, lv); // inconsistent: nothing sampled, NaN out
    const int lanes = 1 << p.lanes_log2, parts = 1 << p.parts_log2;
    const uint32_t row = (uint32_t)(p.heads * p.channels * sizeof(S));
    const int round = lanes < P ? lanes : P;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < p.threads; t += stride) {
        const group_place g = place_of(p, t);
        const int64_t group = g.group; // an inactive thread works on group 0 and stores nothing
        const int lane = g.lane, part = g.part;
        const char *value = reinterpret_cast<const char *>(
            reinterpret_cast<const S *>(p.value) + (g.n * p.spatial * p.heads + g.m) * p.channels + lane * VEC);
        const coords<Cr> loc(p.locations, group * LP * 2, p.coord_f32), wgt(p.weights, group * LP, p.coord_f32);
        A wmax = (A)0, wsum_inv = (A)1, esum = (A)0;
        if constexpr (SOFTMAX) {
            A wsum;
            softmax_stats_group<Cr, A, !MSDA_SOFTMAX_SUM_LATE>(wgt, LP, g.sub, lanes * parts, wmax, wsum);
            if (!MSDA_SOFTMAX_SUM_LATE) wsum_inv = (A)1 / wsum; // one division a group, then a product a point
        }
        A acc[VEC];
#pragma unroll
        for (int i = 0; i < VEC; i++) acc[i] = (A)0;
        // Every lane of the warp takes the same trips through the loops (the shuffles need
        // them all): a part without a level l in this trip computes nothing for it.
        for (int l0 = 0; table_ok && l0 < p.levels; l0 += parts) {
            const int l = l0 + part;
            const bool has_level = l < p.levels;
            const int H = has_level ? lv.h[l] : 1, W = has_level ? lv.w[l] : 1;
            const uint32_t first = has_level ? (uint32_t)lv.start[l] * row : 0u, down = (uint32_t)W * row;
            if constexpr (share_setup) {
                for (int k0 = l * P; k0 < l * P + P; k0 += round) {
                    point_setup<A> mine = {{(A)0, (A)0, (A)0, (A)0}, 0u, 0u, (A)0};
                    if (has_level)
                        mine = setup_point<Cr, A, SOFTMAX>(loc, wgt, k0 + (lane & (round - 1)), H, W, first, row, wmax, wsum_inv);
#pragma unroll 1
                    for (int r = 0; r < round; r++) {
                        point_setup<A> s;
                        s.in = __shfl_sync(0xffffffffu, mine.in, r, lanes);
                        s.q = __shfl_sync(0xffffffffu, mine.q, r, lanes);
#pragma unroll
                        for (int j = 0; j < 4; j++) s.f[j] = __shfl_sync(0xffffffffu, mine.f[j], r, lanes);
                        if (SOFTMAX && MSDA_SOFTMAX_SUM_LATE) esum += __shfl_sync(0xffffffffu, mine.e, r, lanes);
                        if (s.in) add_corners<Tr, VEC>(value, s, row, down, acc);
                    }
                }
            } else if (has_level) {
#pragma unroll 1
                for (int k = l * P; k < l * P + P; k++) {
                    const point_setup<A> s = setup_point<Cr, A, SOFTMAX>(loc, wgt, k, H, W, first, row, wmax, wsum_inv);
                    if (SOFTMAX && MSDA_SOFTMAX_SUM_LATE) esum += s.e;
                    if (s.in) add_corners<Tr, VEC>(value, s, row, down, acc);
                }
            }
        }
        for (int o = lanes; o < (lanes << p.parts_log2); o <<= 1) {
#pragma unroll
            for (int i = 0; i < VEC; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
            if (SOFTMAX && MSDA_SOFTMAX_SUM_LATE) esum += __shfl_xor_sync(0xffffffffu, esum, o);
        }
        if (SOFTMAX && MSDA_SOFTMAX_SUM_LATE) {
            const A inv = (A)1 / esum;
#pragma unroll
            for (int i = 0; i < VEC; i++) acc[i] *= inv;
        }
        if (!table_ok) {
#pragma unroll
            for (int i = 0; i < VEC; i++) acc[i] = quiet_nan<A>();
        }
        if (g.active && part == 0)
            store_vec_streaming<Tr, VEC>(reinterpret_cast<S *>(p.output) + group * p.channels + lane * VEC, acc);
    }
}

// The forward. A group is `lanes` x `parts` threads: lane i of part j sums points j, j + parts,
// ... of chunks i, i + lanes, ...; the parts' sums are then added with shuffles. Splitting the
// points shortens each thread's chain of dependent loads where there are too few (n, q, m) to
// fill the device (a decoder's 900 queries, say); the launcher sets parts = 1 otherwise.
// SOFTMAX: the weights are logits, softmaxed per group here (a separate instantiation, so the
// plain kernels' code is what it was).
template <class Tr, class Cr, int VEC, bool SOFTMAX = false>
__device__ __forceinline__ void forward(const msda_kparams &p) {
    typedef typename Tr::S S;
    typedef typename Tr::A A;
    static_assert(sizeof(typename Cr::A) == sizeof(A), "one accumulation type");
    __shared__ level_table lv;
    // An inconsistent table: nothing is sampled, and every output element is NaN.
    const bool table_ok = load_levels(p, lv);
    const int lanes = 1 << p.lanes_log2, parts = 1 << p.parts_log2;
    const int64_t row = (int64_t)p.heads * p.channels; // elements between two spatial positions
    const int LP = p.total_points;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    // As in the backward: whole warps iterate together, so every lane reaches the shuffles.
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < p.threads; t += stride) {
        const group_place g = place_of(p, t);
        const bool active = g.active;
        const int64_t group = g.group;
        const int lane = g.lane, part = g.part;
        const S *value = reinterpret_cast<const S *>(p.value) + (g.n * p.spatial * p.heads + g.m) * p.channels;
        const coords<Cr> loc(p.locations, group * LP * 2, p.coord_f32), wgt(p.weights, group * LP, p.coord_f32);
        S *out = reinterpret_cast<S *>(p.output) + group * p.channels;
        A wmax = (A)0, wsum = (A)1;
        if constexpr (SOFTMAX) {
            if (active && table_ok) softmax_stats<Cr>(wgt, LP, wmax, wsum);
        }
        for (int c0 = 0; c0 < p.chunks; c0 += lanes) {
            const int c = c0 + lane;
            A acc[VEC];
#pragma unroll
            for (int i = 0; i < VEC; i++) acc[i] = (A)0;
            if (active && table_ok && c < p.chunks) {
                const S *vc = value + c * VEC;
                int l = 0, k = part;
                while (l < p.levels && k >= lv.points[l]) k -= lv.points[l], l++;
                for (int lp = part; lp < LP; lp += parts) {
                    const int H = lv.h[l], W = lv.w[l];
                    const S *vl = vc + lv.start[l] * row;
                    bilinear<A> b;
                    A a;
                    if constexpr (SOFTMAX)
                        a = exp(wgt[lp] - wmax) / wsum;
                    else
                        a = wgt[lp];
                    if (locate(loc[2 * lp], loc[2 * lp + 1], H, W, b, p.sampling != 0)) {
#pragma unroll
                        for (int j = 0; j < 4; j++) {
                            if (!b.in[j]) continue;
                            A v[VEC];
                            load_vec<Tr, VEC>(vl + b.off[j] * row, v);
                            const A f = a * b.wt[j];
#pragma unroll
                            for (int i = 0; i < VEC; i++) acc[i] += f * v[i];
                        }
                    }
                    for (k += parts; l < p.levels && k >= lv.points[l];) k -= lv.points[l], l++;
                }
            }
            for (int o = lanes; o < (lanes << p.parts_log2); o <<= 1) {
#pragma unroll
                for (int i = 0; i < VEC; i++) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
            }
            if (!table_ok) {
#pragma unroll
                for (int i = 0; i < VEC; i++) acc[i] = quiet_nan<A>();
            }
            if (active && c < p.chunks && part == 0) store_vec_streaming<Tr, VEC>(out + c * VEC, acc);
        }
    }
}

// Adds a lane's VEC values to the f32 buffer. With 8 values (two 16-byte `red`s) and pairing on,
// lane 2t keeps its low half and takes lane 2t+1's low half, lane 2t+1 the two high halves, so
// that each of the two instructions writes 32 contiguous bytes per pair rather than 16 of every
// 32. The caller guarantees that every lane of the group is here (one chunk per lane).
template <int VEC>
__device__ __forceinline__ void add_to_buffer(float *p, const float (&v)[VEC], int pairing, int lane, int lanes) {
    if constexpr (VEC == 8) {
        if (pairing) {
            const unsigned group_mask =
                lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u) << ((threadIdx.x & 31) & ~(unsigned)(lanes - 1));
            const bool odd = lane & 1;
            float lo[4], hi[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float got = __shfl_xor_sync(group_mask, odd ? v[i] : v[4 + i], 1);
                lo[i] = odd ? got : v[i];     // even: own low half; odd: partner's high half
                hi[i] = odd ? v[4 + i] : got; // even: partner's low half; odd: own high half
            }
            atomic_add_vec<4>(odd ? p - 4 : p, lo);
            atomic_add_vec<4>(odd ? p + 4 : p + 8, hi);
            return;
        }
    }
    (void)pairing, (void)lane, (void)lanes;
    atomic_add_vec<VEC>(p, v);
}

// Which (n, q, m) group the backward's slot (thread t's t >> lanes_log2) takes. Slots run over
// the heads of a phase (M / 2^h heads, h = p.head_phases_log2), then over a batch element's
// queries dealt round-robin to 2^s runs of ceil(Lq / 2^s) (s = p.spread_log2, msda_launch.c),
// then over the phases: the blocks in flight take one phase's heads of a batch element at a
// time, whose value and gradient are 1 / 2^h of the element's, and neighbouring slots, the
// warps in flight together, take queries a run apart. In a model, neighbouring queries sample
// the same cells of the coarse levels, and their value-gradient `red`s to one address queue at
// its L2 slice.
// Slots past a batch element's last query, and past the last group, are inactive: their group
// is out of range, and the backward reads and writes nothing through it (resetting it to group
// 0, as the forward does, took the f32 kernel from 64 to 72 registers on sm_90, and a block
// fewer per SM). With s = 0 the queries keep their order. Batch elements come last, so the
// blocks in flight work through one element at a time and its value and gradient stay in the L2
// (a wave over every (n, m) at once took enc_b8's f32 backward from 3.7 to 7.4-9.6 ms on the
// H100: kernels/PERF.md, session 19); the phases shrink that share further
// (MSDA_BACKWARD_HEAD_PHASES_LOG2).
// Which of a level's R replicas query q adds to: q mod R, in 32 bits where both fit (a 64-bit
// remainder is a long call on the GPU, and this is taken a level a group).
__device__ __forceinline__ int64_t replica_of(int64_t q, int64_t R) {
    return (uint64_t)(q | R) <= UINT32_MAX ? (int64_t)((uint32_t)q % (uint32_t)R) : q % R;
}

struct backward_place {
    bool active;
    int64_t group, n, q; // group = (n * Lq + q) * M + m
    int m;
};

__device__ __forceinline__ backward_place backward_place_of(const msda_kparams &p, int64_t slot) {
    backward_place g;
    const int64_t per_n = p.spread_slots * p.heads;
    g.n = slot / per_n;
    const int64_t r = slot - g.n * per_n;
    const int phase_heads = p.heads >> p.head_phases_log2;
    const int64_t per_phase = p.spread_slots * phase_heads;
    const int phase = (int)(r / per_phase);
    const int64_t in_phase = r - phase * per_phase;
    const int64_t at = in_phase / phase_heads;
    g.m = phase * phase_heads + (int)(in_phase - at * phase_heads);
    const int s = p.spread_log2;
    g.q = (at & ((1 << s) - 1)) * p.spread_run + (at >> s);
    g.group = (g.n * p.queries + g.q) * p.heads + g.m;
    g.active = g.q < p.queries && g.group < p.groups;
    return g;
}

// bf16's half sums (MSDA_BF16_HALF_SUMS): the power of two 2^e their adds are scaled by. An
// element of a level takes at most Lq * P adds (one corner of each point of its head on that
// level), each at most max |grad_output| * max |weight| (bilinear weights are at most 1). With
// those under 2^gk, 2^wk and 2^ck, e = 14 - gk - wk - ck keeps the exact sums of magnitudes
// under 2^14; rounding to nearest at most doubles a sum (an add's error is at most the add, or,
// where the sum enters a higher binade, 2^-11 of it: at most 16 times in f16), so a rounded sum
// stays under 2.02 * 2^14, half of f16's 65504, with the largest as far above f16's smallest
// normal number (2^-14) as that allows. In exponents, so nothing overflows; a bound
// that is not finite (an inf in grad_output or the weights) gives e = 0: such sums are inf or
// NaN whatever the scale. Clamped so that 2^e and 2^-e are normal floats.
__device__ __forceinline__ int half_sum_exponent(const msda_kparams &p) {
    const unsigned *bound = reinterpret_cast<const unsigned *>(p.half_sums);
    const float g = __uint_as_float(bound[0]), w = __uint_as_float(bound[1]);
    if (!isfinite(g) || !isfinite(w)) return 0;
    int gk, wk, ck;
    frexpf(g, &gk);
    frexpf(w, &wk);
    frexpf((float)(p.queries * p.points), &ck); // rounding never takes it below a power of two
    const int e = 14 - gk - wk - ck;
    return e < -126 ? -126 : e > 126 ? 126 : e;
}

__device__ __forceinline__ float exp2_exact(int e) { return __int_as_float((e + 127) << 23); } // e in [-126, 127]

// ---- the deterministic backward: grad_value in exact sums (msda.h, `deterministic`) ----------
// The workspace holds an int64 sum an element of grad_value (p.buffer), then a 4-bit flag an
// element (eight a uint32: 1 an add was +inf, 2 -inf, 4 NaN), then the bounds (p.half_sums):
// the bits of max finite |grad_output| and max finite |weight| as doubles (non-negative doubles
// order as their bits, so atomicMax takes them), and a uint32, nonzero where either tensor holds
// an inf or a NaN. Integer adds give the same sum in any order.
struct exact_bounds {
    unsigned long long g, w;
    unsigned nonfinite;
};

// Each add is a product f * g, |f| <= W (a weight times a bilinear weight, at most 1; a
// softmaxed weight is at most 1) and |g| <= G, and an element takes at most Lq * P of them (one
// corner of each point of its head on its level). With G < 2^gk, W < 2^wk and Lq * P < 2^ck,
// adds scaled by 2^e, e = 61 - gk - wk - ck, sum to under 2^61 in magnitude, and under 2^62
// once each is rounded to an integer: no int64 sum overflows. Clamped so that 2^e and 2^-e are
// normal doubles; only a bound under about 2^-900 loses resolution so.
__device__ __forceinline__ int exact_exponent(const msda_kparams &p) {
    const exact_bounds *b = reinterpret_cast<const exact_bounds *>(p.half_sums);
    const double g = __longlong_as_double((long long)b->g);
    const double w = p.weights_logits ? 1.0 : __longlong_as_double((long long)b->w);
    int gk, wk, ck;
    frexp(g, &gk);
    frexp(w, &wk);
    frexp((double)(p.queries * p.points), &ck);
    const int e = 61 - gk - wk - ck;
    return e < -1020 ? -1020 : e > 1020 ? 1020 : e;
}

__device__ __forceinline__ unsigned *exact_flags(const msda_kparams &p) {
    const int64_t elems = p.groups / p.queries * p.spatial * p.channels; // N * S * M * D
    return reinterpret_cast<unsigned *>(reinterpret_cast<long long *>(p.buffer) + elems);
}

// A row of D sums (one (n, s, m)) holds its elements chunk-minor: element c * VEC + i at
// i * chunks + c, so that the lanes of a group, each holding one chunk, add their i-th elements
// to consecutive 8-byte words (whole sectors). Element-major, lane k's word sat VEC words from
// lane k - 1's, every 8-byte `red` a sector of its own: enc_b2 f32 took 6.7 ms against 0.84 for
// the float atomics (H100, kernels/PERF.md).
// Adds f * g[i] to element chunk * VEC + i of the row of sums at `row` (an element offset) at
// scale 2^e (`scale`). For f32 and 16-bit values the scaled product is exact in a double (24-bit
// factors); f64's is rounded once, the same way on every run.
template <int VEC, typename A>
__device__ __forceinline__ void add_exact(const msda_kparams &p, int64_t row, int chunk, A f, const A (&g)[VEC],
                                          double scale) {
    unsigned long long *sums = reinterpret_cast<unsigned long long *>(p.buffer) + row + chunk;
#pragma unroll
    for (int i = 0; i < VEC; i++) {
        const double c = (double)f * (double)g[i] * scale;
        if (isfinite(c)) {
            const long long v = __double2ll_rn(c);
            if (v) atomicAdd(sums + i * p.chunks, (unsigned long long)v);
        } else {
            const int64_t e = row + chunk * VEC + i; // the flags go by element
            const unsigned bit = isnan(c) ? 4u : c > 0 ? 1u : 2u;
            atomicOr(exact_flags(p) + (e >> 3), bit << (4 * (e & 7)));
        }
    }
}

template <typename A> __device__ __forceinline__ A group_sum(A v, int lanes) {
    for (int o = lanes >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// ALL_BUFFER: every level's value gradient goes to the f32 buffer, which then spans the whole
// (N, S, M, D): a kernel without the native path, so with fewer registers (on sm_90: 94 with
// both paths, 72 without, 64 under MSDA_BUFFER_MIN_BLOCKS; at 94, half the threads were
// resident and the bf16 encoder backward took 17% longer).
// SOFTMAX: the weights are logits (msda.h, MSDA_WEIGHTS_LOGITS). Each point's gradient g with
// respect to the softmaxed weight is stored into grad_weights, less c = the first point's g,
// while every lane sums s = sum_k w_k (g_k - c) from the group-summed g; at the end of the group
// the lane that stored a point turns its store into w * ((g - c) - s) = w * (g - sum_k w_k g_k)
// in place.
// No register array of L*P, whose size is not known at compile time; subtracting c first keeps
// the g the row shares out of the 16-bit rounding of the stores (a row of g near 10 with a
// spread of 1 lost 1.8e-2 relative in bf16 without it, 2e-3 with). The plain instantiations are
// unchanged.
// HALF_SUMS: bf16 only: the levels outside the buffer add as f16 scaled by 2^half_sum_exponent
// into grad_value's memory (zeroed), which finish_half_sums then rounds to bf16 in place.
// REPLICAS (f16's mixed kernels where MSDA_F16_REPLICAS, the half-sum ones where
// MSDA_BF16_REPLICAS): the buffered levels add in f16 (scaled as the others under half sums) to
// their replicas in p.buffer, query q to replica q mod R (msda_plan.h), for gather_replicas
// (f16) or finish_half_sums (bf16) to add up.
template <class Tr, class Cr, int VEC, bool ALL_BUFFER = false, bool SOFTMAX = false, bool HALF_SUMS = false,
          bool EXACT = false>
__device__ __forceinline__ void backward(const msda_kparams &p) {
    typedef typename Tr::S S;
    typedef typename Tr::A A;
    typedef typename Tr::G G;
    static_assert(sizeof(typename Cr::A) == sizeof(A), "one accumulation type");
    static_assert(!HALF_SUMS || (sizeof(S) == 2 && Tr::buffered && !ALL_BUFFER), "half sums: 16-bit, mixed");
    static_assert(!EXACT || (!ALL_BUFFER && !HALF_SUMS), "exact sums: every level in them");
    constexpr bool BUFFERED = Tr::buffered && !ALL_BUFFER && !EXACT; // some levels to the buffer
    constexpr bool REPLICAS = BUFFERED && (HALF_SUMS ? MSDA_BF16_REPLICAS : Tr::replicas);
    // Discrete sampling (p.sampling) goes to the exact-sums kernels alone (msda_launch.c): in the
    // others its selects took registers from every call (sm_90's f32 backward 64 -> 73, past the
    // 64 that 4 resident blocks of 256 allow; kernels/PERF.md).
    constexpr bool DISCRETE_OK = EXACT;
    __shared__ level_table lv;
    __shared__ A staged[3 * MSDA_MAX_THREADS];
    const A half_scale = HALF_SUMS ? (A)exp2_exact(half_sum_exponent(p)) : (A)1;
    const double exact_scale = EXACT ? ldexp(1.0, exact_exponent(p)) : 1.0;
    // An inconsistent table: nothing is sampled or added (grad_value stays as the launcher
    // zeroed it), and the location and weight gradients are NaN.
    const bool table_ok = load_levels(p, lv);
    if constexpr (BUFFERED) plan_buffer(p, lv, table_ok);
    const coords<Cr> gloc_all(p.grad_locations, 0, p.coord_f32), gwgt_all(p.grad_weights, 0, p.coord_f32);
    const int lanes = 1 << p.lanes_log2;
    const int64_t row = (int64_t)p.heads * p.channels;
    const int LP = p.total_points;
    const bool one_chunk = p.chunks <= lanes;
    // Lane k stores point k's location and weight gradients, a level's at once: for each of the
    // three, one store request a group a level rather than one a point, each writing a few bytes
    // of a sector. Lane 0 leaves each point's three in shared memory (`staged`, its group's
    // slots; registers held across the points took the f32 kernel from 64 to 79 on sm_90), and
    // lane k takes point k's after the level. Lane 0 stores them all itself where a group has
    // fewer lanes than a level has points (p.points: the largest level's).
    const bool spread_grads = MSDA_SPREAD_GRADS && lanes >= p.points;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (!table_ok) { // uniform across the block
        const A nan = quiet_nan<A>();
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.groups * LP; i += stride) {
            gloc_all.put(2 * i, nan);
            gloc_all.put(2 * i + 1, nan);
            gwgt_all.put(i, nan);
        }
        return;
    }
    // p.threads and the stride are whole warps, so all 32 lanes of a warp run the same
    // iterations and reach every shuffle together; lanes past the last group carry zeros.
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < p.threads; t += stride) {
        const backward_place place = backward_place_of(p, t >> p.lanes_log2); // p.parts_log2 is 0 here
        const bool active = place.active;
        const int64_t group = place.group, n = place.n;
        const int m = place.m;
        const int lane = (int)(t & (lanes - 1));
        const int64_t vbase = (n * p.spatial * p.heads + m) * p.channels;
        const S *value = reinterpret_cast<const S *>(p.value) + vbase;
        G *gvalue = reinterpret_cast<G *>(p.output) + vbase;
        float *gbuffer = reinterpret_cast<float *>(p.buffer) + (n * p.buffer_spatial * p.heads + m) * p.channels;
        unsigned short *greplica =
            reinterpret_cast<unsigned short *>(p.buffer) + (n * p.buffer_spatial * p.heads + m) * p.channels;
        const coords<Cr> loc(p.locations, group * LP * 2, p.coord_f32), wgt(p.weights, group * LP, p.coord_f32);
        const S *gout = reinterpret_cast<const S *>(p.grad_output) + group * p.channels;
        const coords<Cr> gloc(p.grad_locations, group * LP * 2, p.coord_f32),
            gwgt(p.grad_weights, group * LP, p.coord_f32);

        A g_own[VEC]; // this lane's grad_output vector when it has a single chunk
#pragma unroll
        for (int i = 0; i < VEC; i++) g_own[i] = (A)0;
        if (active && one_chunk && lane < p.chunks) load_vec<Tr, VEC>(gout + lane * VEC, g_own);
        A wmax = (A)0, wsum_inv = (A)1, wdot = (A)0, gfirst = (A)0;
        if constexpr (SOFTMAX) {
            A wsum;
            // MSDA_BACKWARD_SOFTMAX_SHARED: the group's lanes share the statistics (every lane of
            // the warp is here: an inactive group takes no logits), else each lane takes them all.
            if (MSDA_BACKWARD_SOFTMAX_SHARED)
                softmax_stats_group<Cr>(wgt, active ? LP : 0, lane, lanes, wmax, wsum);
            else if (active)
                softmax_stats<Cr>(wgt, LP, wmax, wsum);
            wsum_inv = (A)1 / wsum;
        }

        int lp = 0;
        for (int l = 0; l < p.levels; l++) {
            const int H = lv.h[l], W = lv.w[l];
            const int64_t lstart = lv.start[l] * row;
            const bool to_buffer = BUFFERED && ((lv.buffered >> l) & 1u);
            int64_t bstart = BUFFERED ? lv.buffer_base[l] : 0;
            if (REPLICAS && to_buffer) bstart += replica_of(place.q, lv.replicas[l]) * lv.hw[l];
            bstart *= row;
            const A add_scale = HALF_SUMS && (REPLICAS || !to_buffer) ? half_scale : (A)1;
            const int Pl = lv.points[l];
            for (int k = 0; k < Pl; k++, lp++) {
                A d_weight = (A)0, d_lw = (A)0, d_lh = (A)0, a = (A)0;
                bilinear<A> b;
                bool inside = false;
                if (active) {
                    if constexpr (SOFTMAX)
                        a = exp(wgt[lp] - wmax) * wsum_inv;
                    else
                        a = wgt[lp];
                    if constexpr (DISCRETE_OK)
                        inside = locate(loc[2 * lp], loc[2 * lp + 1], H, W, b, p.sampling != 0);
                    else
                        inside = locate(loc[2 * lp], loc[2 * lp + 1], H, W, b);
                }
                if (inside) {
                    for (int c = lane; c < p.chunks; c += lanes) {
                        A g[VEC];
                        if (one_chunk) {
#pragma unroll
                            for (int i = 0; i < VEC; i++) g[i] = g_own[i];
                        } else {
                            load_vec<Tr, VEC>(gout + c * VEC, g);
                        }
                        // Tr::backward_loads_first: the four corners' loads before any atomic (an
                        // atomic's asm is a memory clobber, so a load after it cannot be issued
                        // before it), at the cost of registers; else each corner's load in turn.
                        // Not in the all-buffer kernel, bounded at 64 registers: it would spill.
                        constexpr bool loads_first =
                            (Tr::backward_loads_first || (HALF_SUMS && MSDA_HALF_SUMS_LOADS_FIRST)) && !ALL_BUFFER;
                        typename vec_of<Tr, VEC>::raw raw[4];
                        if constexpr (loads_first) {
#pragma unroll
                            for (int j = 0; j < 4; j++) {
                                if (b.in[j]) raw[j] = load_raw<Tr, VEC>(value + lstart + b.off[j] * row + c * VEC);
                            }
                        }
                        A dot[4];
#pragma unroll
                        for (int j = 0; j < 4; j++) {
                            dot[j] = (A)0;
                            if (!b.in[j]) continue;
                            const int64_t at = lstart + b.off[j] * row + c * VEC;
                            A v[VEC], add[VEC];
                            if constexpr (!loads_first) raw[j] = load_raw<Tr, VEC>(value + at);
                            unpack_raw<Tr, VEC>(raw[j], v);
                            const A f = HALF_SUMS ? a * b.wt[j] * add_scale : a * b.wt[j];
#pragma unroll
                            for (int i = 0; i < VEC; i++) {
                                dot[j] += g[i] * v[i];
                                add[i] = f * g[i];
                            }
                            if constexpr (EXACT) {
                                add_exact<VEC>(p, vbase + lstart + b.off[j] * row, c, a * b.wt[j], g, exact_scale);
                            } else if constexpr (ALL_BUFFER) {
                                atomic_add_vec<VEC>(gbuffer + at, add);
                            } else if constexpr (BUFFERED) {
                                if (to_buffer) { // uniform across the warp: all lanes are at level l
                                    if constexpr (REPLICAS)
                                        add_gradient<f16_t, VEC>(greplica + bstart + b.off[j] * row + c * VEC, add);
                                    else
                                        add_to_buffer<VEC>(gbuffer + bstart + b.off[j] * row + c * VEC, add,
                                                           p.pair_exchange, lane, lanes);
                                } else if constexpr (HALF_SUMS)
                                    add_gradient<f16_t, VEC>(gvalue + at, add);
                                else
                                    add_gradient<Tr, VEC>(gvalue + at, add);
                            } else {
                                add_gradient<Tr, VEC>(gvalue + at, add);
                            }
                        }
                        d_weight += b.wt[0] * dot[0] + b.wt[1] * dot[1] + b.wt[2] * dot[2] + b.wt[3] * dot[3];
                        d_lw += b.hh * (dot[1] - dot[0]) + b.lh * (dot[3] - dot[2]);
                        d_lh += b.hw * (dot[2] - dot[0]) + b.lw * (dot[3] - dot[1]);
                    }
                }
                d_weight = group_sum(d_weight, lanes);
                d_lw = group_sum(d_lw, lanes);
                d_lh = group_sum(d_lh, lanes);
                if constexpr (SOFTMAX) {
                    if (lp == 0) gfirst = d_weight;
                    d_weight -= gfirst;
                    wdot += a * d_weight; // a NaN weight makes the row NaN, as torch's
                }
                // dw/dx = W and dh/dy = H; zero for points outside, as the forward ignores them,
                // and under discrete sampling, constant between pixel edges.
                bool moves = inside;
                if constexpr (DISCRETE_OK) moves = moves && !p.sampling;
                const A d_x = moves ? a * d_lw * (A)W : (A)0, d_y = moves ? a * d_lh * (A)H : (A)0;
                if (spread_grads) {
                    if (lane == 0) {
                        A *st = staged + 3 * (threadIdx.x + k);
                        st[0] = d_x, st[1] = d_y, st[2] = d_weight;
                    }
                } else if (active && lane == 0) {
                    const coords<Cr> xy = gloc.from(2 * lp);
                    xy.put_streaming(0, d_x);
                    xy.put_streaming(1, d_y);
                    gwgt.put_streaming(lp, d_weight);
                }
            }
            if (spread_grads) {
                __syncwarp();
                if (active && lane < Pl) {
                    const int at = lp - Pl + lane;
                    const A *st = staged + 3 * threadIdx.x;
                    const coords<Cr> xy = gloc.from(2 * at);
                    xy.put_streaming(0, st[0]);
                    xy.put_streaming(1, st[1]);
                    gwgt.put_streaming(at, st[2]);
                }
                __syncwarp();
            }
        }
        if constexpr (SOFTMAX) {
            // Each lane rewrites the gradients it stored itself (spread_grads: its own point of
            // every level), so no lane reads another's stores.
            // One loop for both: under spread_grads turn i is level i's point `lane` (where the
            // level has one), else point i.
            if (active && (spread_grads || lane == 0)) {
                const int turns = spread_grads ? p.levels : LP;
#pragma unroll 1
                for (int i = 0; i < turns; i++) {
                    if (spread_grads && lane >= lv.points[i]) continue;
                    const int k = spread_grads ? lv.point_start[i] + lane : i;
                    const A w = exp(wgt[k] - wmax) * wsum_inv;
                    gwgt.put(k, w * (gwgt[k] - wdot));
                }
            }
        }
    }
}

// The passes over grad_value and the buffer take p.chunks elements a thread (8, 4 or 1, as the
// launcher found rows and pointers allow): fn(vec_width<VEC>()) with that VEC.
// Their grid-stride loops, and those of the bounds and roundings below, are not unrolled
// (#pragma unroll 1): each turn holds 64-bit divisions, and unrolled by 4 they were 29 % of these
// kernels' code to compile for no measured time (kernels/PERF.md, "Fewer kernels to compile").
template <int V> struct vec_width {
    static constexpr int value = V;
};
template <class Fn> __device__ __forceinline__ void by_chunks(int chunks, Fn fn) {
    if (chunks == 8)
        fn(vec_width<8>());
    else if (chunks == 4)
        fn(vec_width<4>());
    else
        fn(vec_width<1>());
}

// The f32 buffer of the 16-bit backward, (N, buffer_spatial, M, D), rounded into its place in
// the gradient, (N, S, M, D); p.threads is the buffer's size. Where it holds every level
// (p.buffer_levels all of them) its rows are the spatial positions; else each buffered level's
// rows follow the previous one's (plan_buffer) and rows past the last are not used.
// p.chunks elements a thread, 8 or 4 where M * D and the gradient's alignment allow (the
// launcher checks): one 16- or 8-byte store, and one division per vector. One element a thread,
// with a 64-bit division each, took 35 us of enc_b2's 0.84 ms bf16 backward on the H200.
template <class Tr, int VEC>
__device__ __forceinline__ void convert_vec(const msda_kparams &p, const level_table &lv, bool every_level) {
    const float *src = reinterpret_cast<const float *>(p.buffer);
    typename Tr::S *dst = reinterpret_cast<typename Tr::S *>(p.output);
    const int64_t row = (int64_t)p.heads * p.channels;
    const int64_t per_n = p.buffer_spatial * row;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x * VEC;
    #pragma unroll 1
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC; i < p.threads; i += stride) {
        const int64_t n = i / per_n, rest = i - n * per_n;
        int64_t to = n * p.spatial * row + rest;
        if (!every_level) {
            const int64_t r = rest / row;
            int l = 0;
            while (l < p.levels && !(((lv.buffered >> l) & 1u) && r - lv.buffer_base[l] < lv.hw[l]))
                l++;
            if (l == p.levels) continue; // a row past the buffered levels' (the host's bound)
            to += (lv.start[l] - lv.buffer_base[l]) * row;
        }
        float v[VEC];
        if constexpr (VEC == 1) {
            v[0] = src[i];
        } else {
#pragma unroll
            for (int k = 0; k < VEC; k += 4) {
                const float4 f = *reinterpret_cast<const float4 *>(src + i + k);
                v[k] = f.x, v[k + 1] = f.y, v[k + 2] = f.z, v[k + 3] = f.w;
            }
        }
        store_vec<Tr, VEC>(dst + to, v);
    }
}

// A staged problem's rows (msda_launch.c, staging): p.groups rows of p.spatial units of
// p.chunks bytes (2, 4 or 8: what both rows and both pointers are whole units of) at p.value
// copied to rows of p.queries units at p.output, the rest of a wider row zeroed. One kernel pads
// value and grad_output into the staged copies and takes output and grad_value back out. Where
// the count fits, the index arithmetic is 32-bit: a 64-bit division a unit held the copy to a
// third of the bandwidth (kernels/PERF.md, "Staged rows").
template <class U> __device__ __forceinline__ void restride_units(const msda_kparams &p) {
    const U *src = reinterpret_cast<const U *>(p.value);
    U *dst = reinterpret_cast<U *>(p.output);
    const int64_t from = p.spatial, to = p.queries, total = p.groups * to;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    if (total < ((int64_t)1 << 31)) { // i + stride stays under 2^32
        const uint32_t to32 = (uint32_t)to, from32 = (uint32_t)from;
        #pragma unroll 1
        for (uint32_t i = (uint32_t)first; i < (uint32_t)total; i += (uint32_t)stride) {
            const uint32_t r = i / to32, c = i - r * to32;
            dst[i] = c < from32 ? src[(size_t)r * from32 + c] : U(0);
        }
        return;
    }
    #pragma unroll 1
    for (int64_t i = first; i < total; i += stride) {
        const int64_t r = i / to, c = i - r * to;
        dst[i] = c < from ? src[r * from + c] : U(0);
    }
}

__device__ __forceinline__ void restride(const msda_kparams &p) {
    if (p.chunks == 8) restride_units<unsigned long long>(p);
    else if (p.chunks == 4) restride_units<unsigned>(p);
    else restride_units<unsigned short>(p);
}

// The plan once, outside the three widths' loops: its code (the level table's checks and the
// planning, 64-bit arithmetic on one thread) is most of these kernels' size to compile.
template <class Tr> __device__ __forceinline__ void convert(const msda_kparams &p) {
    __shared__ level_table lv;
    const bool every_level = p.buffer_levels == msda_all_levels(p.levels); // uniform: a parameter
    if (!every_level) {
        plan_buffer(p, lv, load_levels(p, lv));
        if (!lv.buffered) return; // nothing in the buffer, or an inconsistent table
    }
    by_chunks(p.chunks, [&](auto w) { convert_vec<Tr, decltype(w)::value>(p, lv, every_level); });
}

#if (MSDA_ENABLE_F16 && MSDA_F16_STRATEGY == MSDA_ATOMIC_MIXED) || MSDA_HALF_SUMS_BUILT // the replicas' kernels below
// N, the batch, which the parameters carry as groups = N * Lq * M.
__device__ __forceinline__ int64_t batch_of(const msda_kparams &p) { return p.groups / (p.queries * p.heads); }

// n 16-bit elements from x zeroed by thread tid of `stride`: 16-byte stores where x is so
// aligned, else one element at a time.
__device__ __forceinline__ void zero_halves(unsigned short *x, int64_t n, int64_t tid, int64_t stride) {
    int64_t head = 0;
    if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
        uint4 *x16 = reinterpret_cast<uint4 *>(x);
        head = n / 8 * 8;
        #pragma unroll 1
        for (int64_t i = tid; i < n / 8; i += stride) x16[i] = make_uint4(0, 0, 0, 0);
    }
    #pragma unroll 1
    for (int64_t i = head + tid; i < n; i += stride) x[i] = 0;
}

// Under replicas with the table on the device, before the backward, in one kernel: grad_value
// (p.output, p.threads 16-bit elements), the replica rows that the plan of the table fills, of
// every batch element (the workspace has room for any table of the sizes, often several times
// what this one fills), and under half sums the 16 bytes of their bounds after the buffer.
// grad_value first, which needs no plan. In place of a memset and a zeroing kernel of the
// replicas: 9.6 against 8.2 us for the decoder's f16 backward on an H100, 10.7 against 8.8 for
// bf16 (kernels/PERF.md). (Where the host knows the table, two memsets are faster still: 6.8
// against 7.9 us.) The replicas p.chunks elements a thread: 8 where a row is whole 16-byte
// vectors, else 1.
__device__ __forceinline__ void zero_backward(const msda_kparams &p) {
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    zero_halves(reinterpret_cast<unsigned short *>(p.output), p.threads, tid, stride);
    __shared__ level_table lv;
    plan_buffer(p, lv, load_levels(p, lv));
    if (p.half_sums && tid == 0) *reinterpret_cast<uint4 *>(p.half_sums) = make_uint4(0, 0, 0, 0);
    int64_t rows = 0;
    for (int l = 0; l < p.levels; l++)
        if ((lv.buffered >> l) & 1u) rows += lv.replicas[l] * lv.hw[l];
    const int64_t row = (int64_t)p.heads * p.channels, per_n = rows * row / p.chunks;
    const int64_t total = batch_of(p) * per_n;
    #pragma unroll 1
    for (int64_t i = tid; i < total; i += stride) {
        const int64_t n = i / per_n;
        const int64_t at = n * p.buffer_spatial * row + (i - n * per_n) * p.chunks;
        unsigned short *to = reinterpret_cast<unsigned short *>(p.buffer) + at;
        if (p.chunks == 8)
            *reinterpret_cast<uint4 *>(to) = make_uint4(0, 0, 0, 0);
        else
            *to = 0;
    }
}

// The sum in f32 of one vector's R f16 replicas, `step` elements apart from `from`, added in
// replica order. Four replicas' loads in flight at a time: one at a time, bf16's gather (41
// replicas of enc_b2's coarsest level) took 34.7 us on an H100.
template <int VEC>
__device__ __forceinline__ void sum_replicas(const unsigned short *from, int64_t step, int64_t reps, float (&sum)[VEC]) {
#pragma unroll
    for (int k = 0; k < VEC; k++) sum[k] = 0.0f;
    int64_t r = 0;
    for (; r + 4 <= reps; r += 4, from += 4 * step) {
        float x[4][VEC];
#pragma unroll
        for (int j = 0; j < 4; j++) load_vec<f16_t, VEC>(from + j * step, x[j]);
#pragma unroll
        for (int j = 0; j < 4; j++) {
#pragma unroll
            for (int k = 0; k < VEC; k++) sum[k] += x[j][k];
        }
    }
    for (; r < reps; r++, from += step) {
        float x[VEC];
        load_vec<f16_t, VEC>(from, x);
#pragma unroll
        for (int k = 0; k < VEC; k++) sum[k] += x[k];
    }
}

// f16 under replicas: each replicated level's R f16 sums (replica r at rows lv.buffer_base[l] +
// r * H*W of p.buffer, (N, buffer_spatial, M, D)) added up in f32 and rounded once into the
// level's place in the gradient. (bf16's half sums do this in finish_half_sums.) p.chunks
// elements a thread (8, 4 or 1, as for convert); the threads loop over the replicated levels'
// positions of every batch element as this kernel's own plan of the table finds them (the host
// sizes the grid from its bound where the table is on the device).
template <class Tr, int VEC>
__device__ __forceinline__ void gather_replicas_vec(const msda_kparams &p, const level_table &lv) {
    const int64_t row = (int64_t)p.heads * p.channels;
    int64_t positions = 0;
    for (int l = 0; l < p.levels; l++)
        if ((lv.buffered >> l) & 1u) positions += lv.hw[l];
    const int64_t per_n = positions * row, total = batch_of(p) * per_n;
    const unsigned short *src = reinterpret_cast<const unsigned short *>(p.buffer);
    typename Tr::S *dst = reinterpret_cast<typename Tr::S *>(p.output);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x * VEC;
    #pragma unroll 1
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC; i < total; i += stride) {
        const int64_t n = i / per_n, rest = i - n * per_n;
        int64_t pos = rest / row;
        const int64_t c = rest - pos * row;
        int l = 0;
        for (;; l++) { // i < total: some replicated level holds pos
            if (!((lv.buffered >> l) & 1u)) continue;
            if (pos < lv.hw[l]) break;
            pos -= lv.hw[l];
        }
        float sum[VEC];
        sum_replicas<VEC>(src + (n * p.buffer_spatial + lv.buffer_base[l] + pos) * row + c, lv.hw[l] * row,
                          lv.replicas[l], sum);
        store_vec<Tr, VEC>(dst + (n * p.spatial + lv.start[l] + pos) * row + c, sum);
    }
}

template <class Tr> __device__ __forceinline__ void gather_replicas(const msda_kparams &p) {
    __shared__ level_table lv; // planned once, as in convert
    plan_buffer(p, lv, load_levels(p, lv));
    if (!lv.buffered) return; // nothing replicated, or an inconsistent table
    by_chunks(p.chunks, [&](auto w) { gather_replicas_vec<Tr, decltype(w)::value>(p, lv); });
}
#endif

#if MSDA_HALF_SUMS_BUILT // the helpers of the half-sum kernels below
// bf16's half sums, before the backward: max |grad_output| and max |weight| (1 where the weights
// are logits: p.weights is 0, as softmaxed weights are at most 1) into p.half_sums, by atomicMax
// on their bits (zeroed by the launcher; non-negative floats order as their bits). NaNs are left
// out: they reach the sums whatever the scale.
__device__ __forceinline__ float max_abs(float m, float v) { return fmaxf(m, fabsf(v)); }
__device__ __forceinline__ float max_abs(float m, unsigned short v) { return fmaxf(m, fabsf(bits_to_bf16(v))); }
__device__ __forceinline__ float max_abs_word(float m, unsigned w, unsigned short) {
    return max_abs(max_abs(m, (unsigned short)(w & 0xffffu)), (unsigned short)(w >> 16));
}
__device__ __forceinline__ float max_abs_word(float m, unsigned w, float) { return max_abs(m, __uint_as_float(w)); }

// max |x| over n elements of T (bf16 bits or float) from thread tid of `stride`: 16-byte loads
// where x is so aligned, the rest one element at a time.
template <typename T>
__device__ __forceinline__ float max_abs_of(const T *x, int64_t n, int64_t tid, int64_t stride) {
    constexpr int per = 16 / sizeof(T);
    float m = 0.0f;
    int64_t head = 0;
    if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
        const uint4 *x16 = reinterpret_cast<const uint4 *>(x);
        head = n / per * per;
        #pragma unroll 1
        for (int64_t i = tid; i < n / per; i += stride) {
            const uint4 v = x16[i];
            m = max_abs_word(max_abs_word(max_abs_word(max_abs_word(m, v.x, T()), v.y, T()), v.z, T()), v.w, T());
        }
    }
    #pragma unroll 1
    for (int64_t i = head + tid; i < n; i += stride) m = max_abs(m, x[i]);
    return m;
}

template <class Cr> __device__ __forceinline__ void half_sum_bounds(const msda_kparams &p) {
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    float mg = max_abs_of(reinterpret_cast<const unsigned short *>(p.grad_output), p.groups * p.channels, tid, stride);
    float mw = p.weights ? max_abs_of(reinterpret_cast<const typename Cr::S *>(p.weights),
                                      p.groups * p.total_points, tid, stride)
                         : 1.0f;
    // Reduced in the block first, then one atomicMax pair a block: every warp's own pair, all on
    // two addresses, queued at one L2 slice (8448 pairs for a wave on the H200).
    __shared__ float warp_g[MSDA_MAX_THREADS / 32], warp_w[MSDA_MAX_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        mg = fmaxf(mg, __shfl_xor_sync(0xffffffffu, mg, o));
        mw = fmaxf(mw, __shfl_xor_sync(0xffffffffu, mw, o));
    }
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if ((threadIdx.x & 31) == 0) warp_g[warp] = mg, warp_w[warp] = mw;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < warps; k++) mg = fmaxf(mg, warp_g[k]), mw = fmaxf(mw, warp_w[k]);
        unsigned *bound = reinterpret_cast<unsigned *>(p.half_sums);
        atomicMax(bound, __float_as_uint(mg));
        atomicMax(bound + 1, __float_as_uint(mw));
    }
}

// n elements from v, f16 scaled by 2^e, rounded in place to bf16 at inv = 2^-e (exact: a power of
// two), by thread tid of `stride`: 16-byte vectors where v is so aligned.
__device__ __forceinline__ void unscale_halves(unsigned short *v, int64_t n, float inv, int64_t tid, int64_t stride) {
    int64_t head = 0;
    if (reinterpret_cast<uintptr_t>(v) % 16 == 0) {
        uint4 *v8 = reinterpret_cast<uint4 *>(v);
        head = n / 8 * 8;
        #pragma unroll 1
        for (int64_t i = tid; i < n / 8; i += stride) {
            uint4 x = v8[i];
            unsigned *w = &x.x;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float lo = bits_to_f16((unsigned short)(w[k] & 0xffffu)) * inv;
                const float hi = bits_to_f16((unsigned short)(w[k] >> 16)) * inv;
                w[k] = (unsigned)bf16_to_bits(lo) | ((unsigned)bf16_to_bits(hi) << 16);
            }
            v8[i] = x;
        }
    }
    #pragma unroll 1
    for (int64_t i = head + tid; i < n; i += stride) v[i] = bf16_to_bits(bits_to_f16(v[i]) * inv);
}

template <int VEC> __device__ __forceinline__ void finish_replicated(const msda_kparams &p, const level_table &lv, float inv) {
    const int64_t row = (int64_t)p.heads * p.channels, per_n = p.spatial * row;
    const int64_t batch = batch_of(p), stride = (int64_t)gridDim.x * blockDim.x * VEC;
    for (int64_t n = blockIdx.y; n < batch; n += gridDim.y) {
        unsigned short *out = reinterpret_cast<unsigned short *>(p.output) + n * per_n;
        const unsigned short *reps = reinterpret_cast<const unsigned short *>(p.buffer) + n * p.buffer_spatial * row;
        #pragma unroll 1
        for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC; i < per_n; i += stride) {
            int l = 0;
            for (; l < p.levels; l++) {
                const int64_t from = lv.start[l] * row;
                if (((lv.buffered >> l) & 1u) && i >= from && i - from < lv.hw[l] * row) break;
            }
            float x[VEC];
            if (l == p.levels)
                load_vec<f16_t, VEC>(out + i, x);
            else
                sum_replicas<VEC>(reps + lv.buffer_base[l] * row + (i - lv.start[l] * row), lv.hw[l] * row,
                                  lv.replicas[l], x);
#pragma unroll
            for (int k = 0; k < VEC; k++) x[k] *= inv;
            store_vec<bf16_t, VEC>(out + i, x);
        }
    }
}

// bf16's half sums, after the backward: grad_value's p.threads elements, f16 scaled by 2^e,
// rounded in place to bf16 at 2^-e (exact: a power of two). Rows of the f32 buffer's levels hold
// zeros here; the conversion that follows writes them. Under replicas (p.replica_adds > 0) this
// pass writes the replicated levels' rows too, from their replicas (scaled alike), so that one
// pass follows the backward: the gather as a kernel of its own cost 10 us of the decoder's bf16
// backward on an H100 (kernels/PERF.md). Then blockIdx.y takes the batch elements, so that an
// element's level is found by comparing its offset in the batch element with the levels' ranges,
// without a division; p.chunks elements a thread, 8 where a row is whole 16-byte vectors and
// grad_value so aligned, else 1.
__device__ __forceinline__ void finish_half_sums(const msda_kparams &p) {
    const float inv = exp2_exact(-half_sum_exponent(p));
    if (p.replica_adds > 0) { // uniform: a parameter
        __shared__ level_table lv;
        plan_buffer(p, lv, load_levels(p, lv));
        if (lv.buffered) {
            by_chunks(p.chunks, [&](auto w) { finish_replicated<decltype(w)::value>(p, lv, inv); });
            return;
        }
    }
    // Nothing replicated (or an inconsistent table): every thread of the grid over the elements.
    const int64_t tid = ((int64_t)blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    unscale_halves(reinterpret_cast<unsigned short *>(p.output), p.threads, inv, tid,
                   (int64_t)gridDim.x * gridDim.y * blockDim.x);
}
#endif

// The deterministic backward, before it: the bounds (exact_bounds) of grad_output (Tr) and the
// weights (Cr), by every thread of the grid, reduced in the block, then one atomic a block.
template <class Tr, class Cr> __device__ __forceinline__ void exact_bounds_of(const msda_kparams &p) {
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    const typename Tr::S *gout = reinterpret_cast<const typename Tr::S *>(p.grad_output);
    const typename Cr::S *wgt = reinterpret_cast<const typename Cr::S *>(p.weights);
    double mg = 0.0, mw = 0.0;
    unsigned bad = 0;
    #pragma unroll 1
    for (int64_t i = tid; i < p.groups * p.channels; i += stride) {
        const double x = (double)to_acc<Tr>(gout[i]);
        if (isfinite(x))
            mg = fmax(mg, fabs(x));
        else
            bad = 1;
    }
    #pragma unroll 1
    for (int64_t i = tid; i < p.groups * p.total_points; i += stride) {
        const double x = (double)to_acc<Cr>(wgt[i]);
        if (isfinite(x))
            mw = fmax(mw, fabs(x));
        else
            bad = 1;
    }
    __shared__ double warp_g[MSDA_MAX_THREADS / 32], warp_w[MSDA_MAX_THREADS / 32];
    __shared__ unsigned warp_bad[MSDA_MAX_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        mg = fmax(mg, __shfl_xor_sync(0xffffffffu, mg, o));
        mw = fmax(mw, __shfl_xor_sync(0xffffffffu, mw, o));
        bad |= __shfl_xor_sync(0xffffffffu, bad, o);
    }
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if ((threadIdx.x & 31) == 0) warp_g[warp] = mg, warp_w[warp] = mw, warp_bad[warp] = bad;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < warps; k++) mg = fmax(mg, warp_g[k]), mw = fmax(mw, warp_w[k]), bad |= warp_bad[k];
        exact_bounds *b = reinterpret_cast<exact_bounds *>(p.half_sums);
        atomicMax(&b->g, (unsigned long long)__double_as_longlong(mg));
        atomicMax(&b->w, (unsigned long long)__double_as_longlong(mw));
        if (bad) atomicOr(&b->nonfinite, 1u);
    }
}

// The deterministic backward, after it: each of grad_value's p.threads elements from its sum at
// 2^-e, or inf or NaN from its flags, rounded once to Tr. Sums are read in order, chunk-minor
// (add_exact), p.chunks chunks of D / p.chunks elements a row.
template <class Tr> __device__ __forceinline__ void exact_finish(const msda_kparams &p) {
    const double inv = ldexp(1.0, -exact_exponent(p));
    const long long *sums = reinterpret_cast<const long long *>(p.buffer);
    const unsigned *flags = reinterpret_cast<const unsigned *>(sums + p.threads);
    const bool nonfinite = reinterpret_cast<const exact_bounds *>(p.half_sums)->nonfinite != 0;
    typename Tr::S *out = reinterpret_cast<typename Tr::S *>(p.output);
    const int D = p.channels, chunks = p.chunks, vec = D / chunks;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < p.threads; j += stride) {
        const int64_t r = j / D;
        const int k = (int)(j - r * D), e_in = k / chunks;
        const int64_t i = r * D + (k - e_in * chunks) * vec + e_in; // the element
        typename Tr::A x = (typename Tr::A)((double)sums[j] * inv);
        if (nonfinite) { // uniform: a flag is set only where grad_output or the weights hold one
            const unsigned f = (flags[i >> 3] >> (4 * (i & 7))) & 15u;
            if (f & 4u || f == 3u)
                x = quiet_nan<typename Tr::A>();
            else if (f)
                x = f == 1u ? (typename Tr::A)INFINITY : -(typename Tr::A)INFINITY;
        }
        out[i] = from_acc<Tr>(x);
    }
}

} // namespace

#define MSDA_KERNEL extern "C" __global__ void __launch_bounds__(MSDA_MAX_THREADS)
// Resident blocks per SM that the points kernels' registers must allow (msda_device.cuh).
#define MSDA_POINTS_KERNEL extern "C" __global__ void __launch_bounds__(MSDA_MAX_THREADS, MSDA_POINTS_MIN_BLOCKS)
// MSDA_FORWARD_POINTS=0: the points kernels run the general forward (to time one against the other).
#if MSDA_FORWARD_POINTS
#define MSDA_POINTS_BODY(TR, CR, VEC, SOFTMAX) forward_points<TR, CR, VEC, SOFTMAX, MSDA_FAST_POINTS>(p)
#else
#define MSDA_POINTS_BODY(TR, CR, VEC, SOFTMAX) forward<TR, CR, VEC, SOFTMAX>(p)
#endif
// The all-buffer backward wants 1024 resident threads per SM (64 registers at most): with 72,
// as ptxas gives it unbounded on sm_90, 768 fit; at 64 it does not spill there.
#define MSDA_BUFFER_KERNEL extern "C" __global__ void __launch_bounds__(MSDA_MAX_THREADS, MSDA_BUFFER_MIN_BLOCKS)
// The fused backward: f32's with 16-byte vectors bounded to MSDA_F32_SOFTMAX_BACKWARD_MIN_BLOCKS
// resident blocks (msda_device.cuh), the others as MSDA_KERNEL (a second bound of 0 is none).
#define MSDA_SOFTMAX_BACKWARD_KERNEL(TR, VEC)                                                                        \
    extern "C" __global__ void __launch_bounds__(                                                                    \
        MSDA_MAX_THREADS, sizeof(typename TR::S) == 4 && VEC == 4 ? MSDA_F32_SOFTMAX_BACKWARD_MIN_BLOCKS : 0)

// NAME: the value type, and "c32" where the coordinates are f32 beside a 16-bit value (or none
// where the kernel takes either: coord16). Each forward comes with its fused-softmax twin, msda_forward_softmax_NAME_vVEC, and
// its points twins, msda_forward_points_[softmax_]NAME_vVEC (msda_module.c names them so); each
// backward with its fused twin, msda_backward_softmax_NAME_vVEC.
#define MSDA_FORWARD_PAIR(NAME, TR, CR, VEC)                                                                         \
    MSDA_KERNEL msda_forward_##NAME##_v##VEC(const msda_kparams p) { forward<TR, CR, VEC>(p); }                    \
    MSDA_KERNEL msda_forward_softmax_##NAME##_v##VEC(const msda_kparams p) { forward<TR, CR, VEC, true>(p); }      \
    MSDA_POINTS_KERNEL msda_forward_points_##NAME##_v##VEC(const msda_kparams p) { MSDA_POINTS_BODY(TR, CR, VEC, false); } \
    MSDA_POINTS_KERNEL msda_forward_points_softmax_##NAME##_v##VEC(const msda_kparams p) {                         \
        MSDA_POINTS_BODY(TR, CR, VEC, true);                                                                         \
    }
#define MSDA_BACKWARD_PAIR(NAME, TR, CR, VEC)                                                                        \
    MSDA_KERNEL msda_backward_##NAME##_v##VEC(const msda_kparams p) { backward<TR, CR, VEC>(p); }                  \
    MSDA_SOFTMAX_BACKWARD_KERNEL(TR, VEC) msda_backward_softmax_##NAME##_v##VEC(const msda_kparams p) {           \
        backward<TR, CR, VEC, false, true>(p);                                                                       \
    }
#define MSDA_KERNEL_PAIR(NAME, TR, CR, VEC) MSDA_FORWARD_PAIR(NAME, TR, CR, VEC) MSDA_BACKWARD_PAIR(NAME, TR, CR, VEC)
// A 16-bit value's kernels with 16-byte vectors, those its usual problems run, keep one
// instantiation per coordinate type (NAME: the value's own, NAMEc32: f32), whose code the
// coordinates' run-time type (coord16) made slower by 1 to 3 % on the H200 (kernels/PERF.md,
// "Fewer kernels to compile"). 8-byte vectors, which only rows of 4 but not 8 elements (or no
// lane pairing in the backward) take, are built for the value's own coordinates only: f32 ones
// there are staged to rows of 8, or take the all-buffer backward (msda_launch.c, PERF.md).
// PAIR (MSDA_FORWARD_PAIR, MSDA_BACKWARD_PAIR, MSDA_HALF_SUMS_PAIR) for each of them.
#define MSDA_16BIT_SET(PAIR, NAME, TR)                                                                               \
    PAIR(NAME, TR, TR, 8)                                                                                            \
    PAIR(NAME##c32, TR, f32_t, 8)                                                                                    \
    PAIR(NAME, TR, TR, 4)
#define MSDA_BUFFER_SET(NAME, TR, CR)                                                                                \
    MSDA_BUFFER_KERNEL msda_backward_##NAME##_buffer_v4(const msda_kparams p) { backward<TR, CR, 4, true>(p); }    \
    MSDA_BUFFER_KERNEL msda_backward_softmax_##NAME##_buffer_v4(const msda_kparams p) {                              \
        backward<TR, CR, 4, true, true>(p);                                                                          \
    }

#if MSDA_IN_PART(MSDA_PART_MAIN)
MSDA_KERNEL msda_restride(const msda_kparams p) { restride(p); }
MSDA_KERNEL_PAIR(f32, f32_t, f32_t, 4)
MSDA_KERNEL_PAIR(f64, f64_t, f64_t, 2)
#endif
// Under the f32-buffer strategy every level of a 16-bit backward goes through the buffer, which
// the all-buffer kernel serves alone (msda_launch.c, plan_buffer: no level adds natively), so
// that type's mixed backward is not built there (sm_35 to sm_62 for both types, sm_70 to sm_75
// for bf16: a third to a fifth of their kernels' code).
#if MSDA_ENABLE_F16 && MSDA_IN_PART(MSDA_PART_F16)
MSDA_16BIT_SET(MSDA_FORWARD_PAIR, f16, f16_t)
#if MSDA_F16_STRATEGY != MSDA_ATOMIC_F32_BUFFER
MSDA_16BIT_SET(MSDA_BACKWARD_PAIR, f16, f16_t)
#endif
MSDA_KERNEL msda_convert_f16(const msda_kparams p) { convert<f16_t>(p); }
#if MSDA_F16_STRATEGY == MSDA_ATOMIC_F32_BUFFER || MSDA_F16_STRATEGY == MSDA_ATOMIC_MIXED
MSDA_BUFFER_SET(f16, f16_t, coord16<f16_t>)
#endif
#if MSDA_F16_STRATEGY == MSDA_ATOMIC_MIXED // where replicas can be in effect (msda_config says)
MSDA_KERNEL msda_gather_replicas_f16(const msda_kparams p) { gather_replicas<f16_t>(p); }
MSDA_KERNEL msda_zero_backward_f16(const msda_kparams p) { zero_backward(p); }
#endif
#endif
#if MSDA_ENABLE_BF16 && MSDA_IN_PART(MSDA_PART_MAIN)
MSDA_16BIT_SET(MSDA_FORWARD_PAIR, bf16, bf16_t)
// Where bf16 takes half sums its mixed backward runs on none of the problems the launcher gives
// it (past half sums' limit of adds it takes the all-buffer kernel), so it is not built; nor
// under the f32-buffer strategy (above).
#if !MSDA_BF16_HALF_SUMS && MSDA_BF16_STRATEGY != MSDA_ATOMIC_F32_BUFFER
MSDA_16BIT_SET(MSDA_BACKWARD_PAIR, bf16, bf16_t)
#endif
MSDA_KERNEL msda_convert_bf16(const msda_kparams p) { convert<bf16_t>(p); }
#if MSDA_BF16_STRATEGY == MSDA_ATOMIC_F32_BUFFER || MSDA_BF16_STRATEGY == MSDA_ATOMIC_MIXED
MSDA_BUFFER_SET(bf16, bf16_t, coord16<bf16_t>)
#endif
#if MSDA_HALF_SUMS_BUILT
// bf16's half sums (msda_device.cuh): msda_backward_[softmax_]bf16[c32]_half_vVEC (as
// MSDA_16BIT_SET), the bounds their scale comes from (grad_output's, then the weights' in
// bf16 or f32), and the rounding in place.
#define MSDA_HALF_SUMS_PAIR(NAME, TR, CR, VEC)                                                                      \
    MSDA_KERNEL msda_backward_##NAME##_half_v##VEC(const msda_kparams p) { backward<TR, CR, VEC, false, false, true>(p); } \
    MSDA_KERNEL msda_backward_softmax_##NAME##_half_v##VEC(const msda_kparams p) {                                 \
        backward<TR, CR, VEC, false, true, true>(p);                                                                 \
    }
MSDA_16BIT_SET(MSDA_HALF_SUMS_PAIR, bf16, bf16_t)
MSDA_KERNEL msda_half_bounds_bf16(const msda_kparams p) { half_sum_bounds<bf16_t>(p); }
MSDA_KERNEL msda_half_bounds_bf16c32(const msda_kparams p) { half_sum_bounds<f32_t>(p); }
MSDA_KERNEL msda_finish_half_bf16(const msda_kparams p) { finish_half_sums(p); }
MSDA_KERNEL msda_zero_backward_bf16(const msda_kparams p) { zero_backward(p); }
#endif
#endif

// The deterministic backward (exact sums): msda_backward_[softmax_]NAME_exact_vVEC, the bounds
// (msda_exact_bounds_NAME: grad_output's type, then the weights') and the rounding.
#define MSDA_EXACT_PAIR(NAME, TR, CR, VEC)                                                                          \
    MSDA_KERNEL msda_backward_##NAME##_exact_v##VEC(const msda_kparams p) {                                         \
        backward<TR, CR, VEC, false, false, false, true>(p);                                                         \
    }                                                                                                                \
    MSDA_KERNEL msda_backward_softmax_##NAME##_exact_v##VEC(const msda_kparams p) {                                 \
        backward<TR, CR, VEC, false, true, false, true>(p);                                                          \
    }
// A 16-bit value's set, with 8-byte vectors (the launcher takes no 16-byte one: each
// element's exact sum is its own 64-bit atomic, which bounds the kernel, so the wider load saved
// nothing worth a third kernel to compile), and its bounds (grad_output, then the weights' type:
// the value's, and f32 beside it).
#define MSDA_EXACT_SET(NAME, TR)                                                                                     \
    MSDA_EXACT_PAIR(NAME, TR, coord16<TR>, 4)                                                                        \
    MSDA_KERNEL msda_exact_bounds_##NAME(const msda_kparams p) { exact_bounds_of<TR, TR>(p); }                      \
    MSDA_KERNEL msda_exact_bounds_##NAME##c32(const msda_kparams p) { exact_bounds_of<TR, f32_t>(p); }              \
    MSDA_KERNEL msda_exact_finish_##NAME(const msda_kparams p) { exact_finish<TR>(p); }
#if MSDA_IN_PART(MSDA_PART_MAIN)
MSDA_EXACT_PAIR(f32, f32_t, f32_t, 4)
MSDA_EXACT_PAIR(f64, f64_t, f64_t, 2)
MSDA_KERNEL msda_exact_bounds_f32(const msda_kparams p) { exact_bounds_of<f32_t, f32_t>(p); }
MSDA_KERNEL msda_exact_bounds_f64(const msda_kparams p) { exact_bounds_of<f64_t, f64_t>(p); }
MSDA_KERNEL msda_exact_finish_f32(const msda_kparams p) { exact_finish<f32_t>(p); }
MSDA_KERNEL msda_exact_finish_f64(const msda_kparams p) { exact_finish<f64_t>(p); }
#endif
#if MSDA_ENABLE_F16 && MSDA_IN_PART(MSDA_PART_F16)
MSDA_EXACT_SET(f16, f16_t)
#endif
#if MSDA_ENABLE_BF16 && MSDA_IN_PART(MSDA_PART_F16)
MSDA_EXACT_SET(bf16, bf16_t)
#endif
