// Device helpers of the MSDA kernels: element types, vector loads and stores, and the atomic
// additions of the value gradient, chosen per architecture by the knobs of msda.h.
#ifndef MSDA_DEVICE_CUH
#define MSDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "msda.h" // the statuses an inconsistent device level table is reported with
#include "msda_kparams.h"
#include "msda_plan.h"

// The per-architecture knobs come from the build (kernels/libmsda.json, through `msda-doctor
// build`), never from defaults here: one owner decides them, for the wheel and the tests alike.
#if !defined(MSDA_MAX_THREADS) || !defined(MSDA_ENABLE_F16) || !defined(MSDA_ENABLE_BF16) || \
    !defined(MSDA_F16_ATOMIC) || !defined(MSDA_BF16_ATOMIC)
#error "MSDA_MAX_THREADS, MSDA_ENABLE_F16/BF16 and MSDA_F16/BF16_ATOMIC are set per architecture by msda-doctor build from kernels/libmsda.json"
#endif
#ifndef MSDA_BUFFER_MIN_BLOCKS // min resident blocks per SM of the all-buffer 16-bit backward
#define MSDA_BUFFER_MIN_BLOCKS (MSDA_MAX_THREADS <= 1024 / 4 ? 1024 / MSDA_MAX_THREADS : 1)
#endif
#ifndef MSDA_VECTOR_ATOMICS
#define MSDA_VECTOR_ATOMICS 1
#endif
#ifndef MSDA_FORWARD_POINTS // 0: the points kernels run the general forward (for timing it)
#define MSDA_FORWARD_POINTS 1
#endif
#ifndef MSDA_SPREAD_GRADS // 0: lane 0 stores every point's location and weight gradients (for timing)
#define MSDA_SPREAD_GRADS 1
#endif

#if MSDA_MAX_THREADS < 32 || MSDA_MAX_THREADS > 1024 || MSDA_MAX_THREADS % 32 != 0
#error "MSDA_MAX_THREADS must be a multiple of 32 from 32 to 1024"
#endif

// The architecture of this compilation pass (0 in a host pass, where no kernel body is built).
#ifdef __CUDA_ARCH__
#define MSDA_ARCH (__CUDA_ARCH__ / 10)
#else
#define MSDA_ARCH 0
#endif

// Min resident blocks per SM of the forward's points kernels (MSDA_POINTS_MIN_BLOCKS overrides).
// On sm_90, blocks of 256, four (64 registers): with a point's four corner loads in flight
// together the kernels need 61-64 registers, and at five they spill (68 bytes in f16). H200,
// graph ms, enc_b2 forward, four / five blocks: f16 0.1337 / 0.1566, bf16 0.1420 / 0.1583, f32
// 0.2335 / 0.2369 (kernels/PERF.md). Other architectures: unbounded, unmeasured.
#ifndef MSDA_POINTS_MIN_BLOCKS
#if MSDA_ARCH >= 90 && MSDA_MAX_THREADS == 256
#define MSDA_POINTS_MIN_BLOCKS 4
#else
#define MSDA_POINTS_MIN_BLOCKS 1
#endif
#endif

// The 16-bit points forward: where its work is at most this many waves of resident blocks, one
// wave of blocks loops over all of it (msda_launch.c; 0: never). Each block then reads and
// checks its level table once, and its warps go from tile to tile without waiting for the
// block's slowest. H200, graph ms, one wave against a block per tile (kernels/PERF.md, session
// 11): enc_b1 (4 waves) -6 to -9%, enc_b2 (8) -3 to -7%, enc_b4 (17) -3 to +1%, enc_b8 (34) -2 to
// +3%, enc_b16 (67) +4%: with many tiles a block, the blocks drift apart over the value. f32
// (L2-bound) was slower with it, but for a decoder whose points are split over parts, past two
// waves (msda_launch.c; session 12), which the launcher does where this is not 0. Other
// architectures: never, unmeasured.
#ifndef MSDA_POINTS16_WAVES
#if MSDA_ARCH >= 90
#define MSDA_POINTS16_WAVES 16
#else
#define MSDA_POINTS16_WAVES 0
#endif
#endif

// The backward's queries dealt round-robin to at most 2^MSDA_BACKWARD_SPREAD_LOG2 runs
// (msda_kernels.cu, backward_place_of; msda_launch.c keeps each run at least 128 queries long;
// 0: in order), so that the warps in flight together work on queries far apart in the image,
// whose value-gradient `red`s seldom meet at one address. H200, enc_b2 backward with realistic
// locations, graph ms, in order / 8 / 32 / 128 runs: f16 0.613 / 0.587 / 0.585 / 0.580, bf16
// 0.699 / 0.688 / 0.687 / 0.680, f32 0.685 / 0.671 / 0.690 / 0.668; random locations and the
// decoder (900 queries: 4 runs) unchanged within 0.3% (kernels/PERF.md, session 12). Other
// architectures: in order, unmeasured.
#ifndef MSDA_BACKWARD_SPREAD_LOG2
#if MSDA_ARCH >= 90
#define MSDA_BACKWARD_SPREAD_LOG2 7
#else
#define MSDA_BACKWARD_SPREAD_LOG2 0
#endif
#endif
#if MSDA_BACKWARD_SPREAD_LOG2 < 0 || MSDA_BACKWARD_SPREAD_LOG2 > 16
#error "MSDA_BACKWARD_SPREAD_LOG2 must be in [0, 16]"
#endif

// The backward takes a batch element's heads in at most 2^MSDA_BACKWARD_HEAD_PHASES_LOG2
// phases, one after another (msda_kernels.cu, backward_place_of), where the element's work
// spans more than one wave of resident blocks (msda_launch.c, head_phases_log2): the L2 then
// holds half the element's value and value gradient at a time (enc_b2 f32: 18 MB, of the H100's
// 50 MB, rather than 36). H100, graph ms, backward, one phase / 2 / 4: enc_b2 f32 random 0.955
// / 0.850 / 0.875, realistic 0.767 / 0.762 / 0.789; enc_b8 f32 random 3.628 / 3.332 / 3.391;
// bf16 enc_b2 random 0.606 / 0.595 / 0.592; f16 unchanged (kernels/PERF.md, session 21). Other
// architectures: one phase, unmeasured.
#ifndef MSDA_BACKWARD_HEAD_PHASES_LOG2
#if MSDA_ARCH >= 90
#define MSDA_BACKWARD_HEAD_PHASES_LOG2 1
#else
#define MSDA_BACKWARD_HEAD_PHASES_LOG2 0
#endif
#endif
#if MSDA_BACKWARD_HEAD_PHASES_LOG2 < 0 || MSDA_BACKWARD_HEAD_PHASES_LOG2 > 5
#error "MSDA_BACKWARD_HEAD_PHASES_LOG2 must be in [0, 5]"
#endif

// bf16's half sums: the bf16 backward adds the levels that the mixed rule leaves out of the f32
// buffer (with f16's limit) as f16 in grad_value's own memory, scaled by a power of two that
// keeps every sum inside f16's range (msda_kernels.cu, half_sum_exponent), then rounds them to
// bf16 in place. An f16 `red` moves half the bytes of an f32 one, and the L2's reductions bound
// the backward; bf16 atomics, as fast, lose 1.9e-2 on the encoder. H200, graph ms, backward,
// f32 buffer's mixed rule / half sums: enc_b2 random 0.743 / 0.697, realistic 0.678 / 0.623,
// enc_b8 2.923 / 2.665, dec_b2_q900 0.0584 / 0.0555; grad_value error on enc_b2 1.66e-3 /
// 1.80e-3, on the decoder 3.05e-3 / 1.80e-3 (kernels/PERF.md, session 13). Other architectures:
// the f32 buffer's mixed rule, unmeasured with this.
// Where the half-sum kernels exist: wherever bf16 is built and mixed (sm_80 and newer), in the
// host pass too, which compiles their launch wrappers without knowing the device pass's
// architecture; MSDA_BF16_HALF_SUMS (msda_config.bf16_half_sums) says where the launcher takes them.
#define MSDA_HALF_SUMS_BUILT (MSDA_ENABLE_BF16 && MSDA_BF16_ATOMIC == MSDA_ATOMIC_MIXED)
#ifndef MSDA_BF16_HALF_SUMS
#if MSDA_ARCH >= 90 && MSDA_HALF_SUMS_BUILT
#define MSDA_BF16_HALF_SUMS 1
#else
#define MSDA_BF16_HALF_SUMS 0
#endif
#endif
#if MSDA_BF16_HALF_SUMS && !MSDA_HALF_SUMS_BUILT
#error "MSDA_BF16_HALF_SUMS needs the bf16 kernels with the mixed strategy (MSDA_ENABLE_BF16=1, MSDA_BF16_ATOMIC=4)"
#endif
// The fused forward's points kernel takes the softmax's sum with the points (each point's
// exp(logit - max) comes with its set-up) and divides the output by it at the end; before the
// first point only the max is taken, where the sum took a second pass over the logits, its
// shuffles and a division. H200, graph ms, fused forward, sum first / late (means of two runs,
// kernels/PERF.md, session 16): enc_b8 f16 realistic 0.4809 / 0.4748, random 0.5180 / 0.5118;
// enc_b2 bf16 realistic 0.1281 / 0.1259; dec_b2_q900 f32 random 0.0191 / 0.0184; enc_b2 f32
// realistic 0.1925 / 0.1932 the one not faster. 0: the sum first (for timing).
#ifndef MSDA_SOFTMAX_SUM_LATE
#define MSDA_SOFTMAX_SUM_LATE 1
#endif
// The fused backward's softmax statistics (max and sum over the L*P logits) shared by a group's
// lanes (softmax_stats_group, as the forward); 0: each lane takes every logit itself (for
// timing). Either way a point's weight is a product by 1 / sum. H100, graph ms, fused backward,
// each lane and a division a point (before) / shared (means of two runs, kernels/PERF.md,
// session 16): enc_b2 f32 realistic 0.8531 / 0.8257, random 1.0342 / 1.0120; bf16 random
// 0.8117 / 0.8055; f16 level.
#ifndef MSDA_BACKWARD_SOFTMAX_SHARED
#define MSDA_BACKWARD_SOFTMAX_SHARED 1
#endif
// Min resident blocks per SM of the f32 fused backward (0: unbounded). On sm_90, blocks of 256,
// four: 64 registers with 24 bytes spilled, where unbounded it took 80 and three blocks fitted.
// H100, graph ms, fused backward, unbounded / four: dec_b2_q900 realistic 0.0988 / 0.0788,
// random 0.1036 / 0.0834; enc_b2 realistic 0.8257 / 0.7984, random 1.0120 / 1.0121 (the plain
// f32 backward, at 64 registers unbounded, reads 0.0755 and 0.7683). Other architectures:
// unbounded, unmeasured.
#ifndef MSDA_F32_SOFTMAX_BACKWARD_MIN_BLOCKS
#if MSDA_ARCH >= 90 && MSDA_MAX_THREADS == 256
#define MSDA_F32_SOFTMAX_BACKWARD_MIN_BLOCKS 4
#else
#define MSDA_F32_SOFTMAX_BACKWARD_MIN_BLOCKS 0
#endif
#endif
// The half-sum backward loads a point's four corners before any atomic, as f16's does (H200,
// enc_b2 bf16 backward, graph ms, in turn / first: random 0.765 / 0.697, realistic 0.714 / 0.623).
#ifndef MSDA_HALF_SUMS_LOADS_FIRST // 0: the half-sum kernels load each corner in turn (for timing)
#define MSDA_HALF_SUMS_LOADS_FIRST 1
#endif

// The strategies in effect. Why these per architecture (kernels/libmsda.json): bf16's 8-bit
// mantissa loses too much where many points add to one value element (measured on an H200,
// Deformable-DETR encoder: relative error 1.9e-2 with bf16 atomics or CAS on every level,
// 2.5e-5 with the f32 buffer; f16 atomics: 2.5e-3), so where bf16 atomics exist the coarse
// levels, where that happens, go through the buffer (mixed).
#if MSDA_F16_ATOMIC < MSDA_ATOMIC_NATIVE || MSDA_F16_ATOMIC > MSDA_ATOMIC_MIXED || \
    MSDA_BF16_ATOMIC < MSDA_ATOMIC_NATIVE || MSDA_BF16_ATOMIC > MSDA_ATOMIC_MIXED
#error "MSDA_F16_ATOMIC and MSDA_BF16_ATOMIC: 1 native, 2 compare-and-swap, 3 f32 buffer, 4 mixed"
#endif
#define MSDA_F16_STRATEGY MSDA_F16_ATOMIC
#define MSDA_BF16_STRATEGY MSDA_BF16_ATOMIC
#if defined(__CUDA_ARCH__) && MSDA_F16_ATOMIC == MSDA_ATOMIC_NATIVE && __CUDA_ARCH__ < 700
#error "MSDA_F16_ATOMIC=1 (native) needs sm_70 or newer: use 2 (CAS) or 3 (f32 buffer)"
#endif
#if defined(__CUDA_ARCH__) && MSDA_BF16_ATOMIC == MSDA_ATOMIC_NATIVE && __CUDA_ARCH__ < 800
#error "MSDA_BF16_ATOMIC=1 (native) needs sm_80 or newer: use 2 (CAS) or 3 (f32 buffer)"
#endif

// 16-byte `red` needs sm_90 and PTX ISA 8.1 (CUDA 12.1); older toolkits fall back to scalars.
#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 1))
#define MSDA_VECTOR_RED (MSDA_VECTOR_ATOMICS && MSDA_ARCH >= 90)
#else
#define MSDA_VECTOR_RED 0
#endif

// f16 replicas (msda_plan.h, msda_level_replicas): where the mixed f16 backward, or bf16's half
// sums, would send a level to the f32 buffer, it splits that level's adds over f16 sums of at
// most about this many adds an element each, which one pass adds up in f32 afterwards (the
// msda_gather_replicas_* kernels): half the bytes of the buffer's f32 `red`s, and the L2's
// reductions bound the backward. 0: the f32 buffer. The error of an f16 sum grows as the square
// root of its adds; bf16's own rounding of the result takes most of issue 11's 2e-3, so its
// replicas take fewer adds than f16's.
#ifndef MSDA_F16_REPLICA_ADDS
#if MSDA_VECTOR_RED
#define MSDA_F16_REPLICA_ADDS 128
#else
#define MSDA_F16_REPLICA_ADDS 0
#endif
#endif
#ifndef MSDA_BF16_REPLICA_ADDS
#if MSDA_VECTOR_RED
#define MSDA_BF16_REPLICA_ADDS 32
#else
#define MSDA_BF16_REPLICA_ADDS 0
#endif
#endif
#if MSDA_F16_REPLICA_ADDS < 0 || MSDA_F16_REPLICA_ADDS > 32768 || MSDA_BF16_REPLICA_ADDS < 0 || MSDA_BF16_REPLICA_ADDS > 32768
#error "MSDA_F16_REPLICA_ADDS and MSDA_BF16_REPLICA_ADDS: 0 (the f32 buffer) to 32768"
#endif
// In effect where the strategy is mixed (f16) and where bf16 takes half sums.
#define MSDA_F16_REPLICAS (MSDA_F16_REPLICA_ADDS > 0 && MSDA_ENABLE_F16 && MSDA_F16_ATOMIC == MSDA_ATOMIC_MIXED)
#define MSDA_BF16_REPLICAS (MSDA_BF16_REPLICA_ADDS > 0 && MSDA_BF16_HALF_SUMS)

namespace msda {

// Element types: S is the storage, A the accumulation type, G where the value gradient goes.
// backward_loads_first: the backward issues a point's four corner loads before using any
// (msda_kernels.cu, backward). H200, graph ms, enc_b2 / dec_b2_q900 backward, loads first
// against in turn: f16 0.711 / 0.0398 against 0.757 / 0.0444 (125 registers against 98); f32
// 0.807 / 0.0737 against 0.838 / 0.0679; bf16 0.933 / 0.0513 against 0.799 / 0.0584 (its
// coarse levels go through the f32 buffer). Taken where it won on every shape measured: f16 on
// sm_90; other architectures unmeasured.
struct f32_t {
    typedef float S;
    typedef float A;
    typedef float G;
    static constexpr bool buffered = false;
    static constexpr bool replicas = false;
    static constexpr bool backward_loads_first = false;
};
struct f64_t {
    typedef double S;
    typedef double A;
    typedef double G;
    static constexpr bool buffered = false;
    static constexpr bool replicas = false;
    static constexpr bool backward_loads_first = false;
};
// `buffered`: some levels' value gradient goes to an f32 buffer (msda_kparams.buffer_levels).
struct f16_t {
    typedef unsigned short S;
    typedef float A;
    typedef unsigned short G;
    static constexpr int strategy = MSDA_F16_STRATEGY;
    static constexpr bool buffered = strategy == MSDA_ATOMIC_F32_BUFFER || strategy == MSDA_ATOMIC_MIXED;
    static constexpr bool replicas = MSDA_F16_REPLICAS; // the mixed backward's buffered levels
    static constexpr bool backward_loads_first = MSDA_ARCH >= 90;
};
struct bf16_t {
    typedef unsigned short S;
    typedef float A;
    typedef unsigned short G;
    static constexpr int strategy = MSDA_BF16_STRATEGY;
    static constexpr bool buffered = strategy == MSDA_ATOMIC_F32_BUFFER || strategy == MSDA_ATOMIC_MIXED;
    static constexpr bool replicas = false; // only under half sums (MSDA_BF16_REPLICAS), in f16
    static constexpr bool backward_loads_first = false;
};

__device__ __forceinline__ float bits_to_f16(unsigned short b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ unsigned short f16_to_bits(float f) { return __half_as_ushort(__float2half_rn(f)); }

__device__ __forceinline__ float bits_to_bf16(unsigned short b) { return __uint_as_float((unsigned)b << 16); }
// Round to nearest even, NaN kept quiet: the same rule as the CPU path's msda_f32_to_bf16.
__device__ __forceinline__ unsigned short bf16_to_bits(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

template <class Tr> __device__ __forceinline__ typename Tr::A to_acc(typename Tr::S s);
template <> __device__ __forceinline__ float to_acc<f32_t>(float s) { return s; }
template <> __device__ __forceinline__ double to_acc<f64_t>(double s) { return s; }
template <> __device__ __forceinline__ float to_acc<f16_t>(unsigned short s) { return bits_to_f16(s); }
template <> __device__ __forceinline__ float to_acc<bf16_t>(unsigned short s) { return bits_to_bf16(s); }

template <typename A> __device__ __forceinline__ A quiet_nan();
template <> __device__ __forceinline__ float quiet_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ __forceinline__ double quiet_nan<double>() { return __longlong_as_double(0x7ff8000000000000ll); }

template <class Tr> __device__ __forceinline__ typename Tr::S from_acc(typename Tr::A a);
template <> __device__ __forceinline__ float from_acc<f32_t>(float a) { return a; }
template <> __device__ __forceinline__ double from_acc<f64_t>(double a) { return a; }
template <> __device__ __forceinline__ unsigned short from_acc<f16_t>(float a) { return f16_to_bits(a); }
template <> __device__ __forceinline__ unsigned short from_acc<bf16_t>(float a) { return bf16_to_bits(a); }

// h = y * H - 0.5 rounded step by step, never contracted to an FMA: the CPU path computes the
// same, so both paths take the same corners for a location next to a pixel boundary.
__device__ __forceinline__ float scale_shift(float v, int n) { return __fsub_rn(__fmul_rn(v, (float)n), 0.5f); }
__device__ __forceinline__ double scale_shift(double v, int n) { return __dsub_rn(__dmul_rn(v, (double)n), 0.5); }
// The pixel that discrete sampling takes in a dimension of n (msda.h, MSDA_SAMPLING_DISCRETE):
// trunc(v * n + 0.5), each step rounded, clamped to [0, n - 1] by comparisons before any
// conversion. The caller has ruled out NaN.
__device__ __forceinline__ int nearest_pixel(float v, int n) {
    const float f = __fadd_rn(__fmul_rn(v, (float)n), 0.5f);
    return f < 1.0f ? 0 : f >= (float)n ? n - 1 : (int)f;
}
__device__ __forceinline__ int nearest_pixel(double v, int n) {
    const double f = __dadd_rn(__dmul_rn(v, (double)n), 0.5);
    return f < 1.0 ? 0 : f >= (double)n ? n - 1 : (int)f;
}

template <int BYTES> struct raw_of;
template <> struct raw_of<16> { typedef uint4 type; };
template <> struct raw_of<8> { typedef uint2 type; };
template <> struct raw_of<4> { typedef unsigned int type; };
template <> struct raw_of<2> { typedef unsigned short type; };

// A vector of VEC elements as raw bytes: one access of VEC*sizeof(S) bytes (the launcher picks
// a width only where D and every pointer allow its alignment, and stages the other calls).
template <class Tr, int VEC> struct vec_of {
    typedef typename raw_of<VEC * sizeof(typename Tr::S)>::type raw;
};

// Read through the read-only path. load_raw and unpack_raw apart let several loads be in
// flight before any is used; load_vec is both at once.
template <class Tr, int VEC>
__device__ __forceinline__ typename vec_of<Tr, VEC>::raw load_raw(const typename Tr::S *p) {
    return __ldg(reinterpret_cast<const typename vec_of<Tr, VEC>::raw *>(p));
}

// Two 16-bit elements of one 32-bit word, the first in its low half. A bf16 is the high half of
// an f32: a shift and a mask, one instruction each, where converting each half alone took the
// high one a shift down and back up (sm_90 SASS of the bf16 forward: 12 instructions a vector
// of 8, against f16's 8).
template <class Tr> __device__ __forceinline__ void unpack_word(unsigned w, float &lo, float &hi);
template <> __device__ __forceinline__ void unpack_word<f16_t>(unsigned w, float &lo, float &hi) {
    lo = bits_to_f16((unsigned short)(w & 0xffffu));
    hi = bits_to_f16((unsigned short)(w >> 16));
}
template <> __device__ __forceinline__ void unpack_word<bf16_t>(unsigned w, float &lo, float &hi) {
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xffff0000u);
}

template <class Tr, int VEC>
__device__ __forceinline__ void unpack_raw(typename vec_of<Tr, VEC>::raw r, typename Tr::A (&out)[VEC]) {
    if constexpr (sizeof(typename Tr::S) == 2 && VEC % 2 == 0) {
        union {
            typename vec_of<Tr, VEC>::raw r;
            unsigned w[VEC / 2];
        } u;
        u.r = r;
#pragma unroll
        for (int i = 0; i < VEC / 2; i++) unpack_word<Tr>(u.w[i], out[2 * i], out[2 * i + 1]);
    } else {
        union {
            typename vec_of<Tr, VEC>::raw r;
            typename Tr::S s[VEC];
        } u;
        u.r = r;
#pragma unroll
        for (int i = 0; i < VEC; i++) out[i] = to_acc<Tr>(u.s[i]);
    }
}

template <class Tr, int VEC>
__device__ __forceinline__ void load_vec(const typename Tr::S *p, typename Tr::A (&out)[VEC]) {
    unpack_raw<Tr, VEC>(load_raw<Tr, VEC>(p), out);
}

template <class Tr, int VEC>
__device__ __forceinline__ typename vec_of<Tr, VEC>::raw pack_raw(const typename Tr::A (&in)[VEC]) {
    union {
        typename vec_of<Tr, VEC>::raw r;
        typename Tr::S s[VEC];
    } u;
#pragma unroll
    for (int i = 0; i < VEC; i++) u.s[i] = from_acc<Tr>(in[i]);
    return u.r;
}

template <class Tr, int VEC>
__device__ __forceinline__ void store_vec(typename Tr::S *p, const typename Tr::A (&in)[VEC]) {
    *reinterpret_cast<typename vec_of<Tr, VEC>::raw *>(p) = pack_raw<Tr, VEC>(in);
}

// What a kernel writes and does not use again (the forward's output, the backward's location
// and weight gradients; the fused backward reads its weight gradients back once, at the group's
// end) is stored evict-first (st.global.cs), so that it leaves the L2 to the value and its
// gradient, which the gathers and reductions keep coming back to. H100, graph ms: the f32
// backward 0.7-1.4% faster on random locations (enc_b2 0.959 -> 0.952, enc_b8 3.701 -> 3.660),
// the rest unchanged; evict-first loads of the locations, weights and grad_output took the f32
// forward 14-33% slower (kernels/PERF.md, session 20).
template <class Tr, int VEC>
__device__ __forceinline__ void store_vec_streaming(typename Tr::S *p, const typename Tr::A (&in)[VEC]) {
    __stcs(reinterpret_cast<typename vec_of<Tr, VEC>::raw *>(p), pack_raw<Tr, VEC>(in));
}

// ---- atomic additions of the value gradient --------------------------------------------------

__device__ __forceinline__ void atomic_add_f64(double *p, double v) {
#if __CUDA_ARCH__ >= 600
    atomicAdd(p, v);
#else
    unsigned long long *w = reinterpret_cast<unsigned long long *>(p);
    unsigned long long old = *w, seen;
    do {
        seen = old;
        old = atomicCAS(w, seen, __double_as_longlong(__longlong_as_double(seen) + v));
    } while (old != seen);
#endif
}

template <int VEC> __device__ __forceinline__ void atomic_add_vec(float *p, const float (&v)[VEC]) {
#if MSDA_VECTOR_RED && __CUDA_ARCH__ >= 900
    if constexpr (VEC % 4 == 0) {
#pragma unroll
        for (int i = 0; i < VEC; i += 4)
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p + i), "f"(v[i]), "f"(v[i + 1]),
                         "f"(v[i + 2]), "f"(v[i + 3])
                         : "memory");
    } else
#endif
    {
#pragma unroll
        for (int i = 0; i < VEC; i++) atomicAdd(p + i, v[i]);
    }
}

template <int VEC> __device__ __forceinline__ void atomic_add_vec(double *p, const double (&v)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; i++) atomic_add_f64(p + i, v[i]);
}

// Two 16-bit lanes packed as one 32-bit word (low element first, as in memory).
template <class Tr> __device__ __forceinline__ unsigned pack2(float lo, float hi) {
    return (unsigned)from_acc<Tr>(lo) | ((unsigned)from_acc<Tr>(hi) << 16);
}

// Compare-and-swap on the aligned 32-bit word holding two 16-bit elements; works on every
// architecture. `lo`/`hi` are added to the low/high element (0 leaves one unchanged).
template <class Tr> __device__ __forceinline__ void cas_add_pair(unsigned *word, float lo, float hi) {
    unsigned old = *word, seen;
    do {
        seen = old;
        float a = to_acc<Tr>((unsigned short)(seen & 0xffffu)) + lo;
        float b = to_acc<Tr>((unsigned short)(seen >> 16)) + hi;
        unsigned next = (unsigned)from_acc<Tr>(a) | ((unsigned)from_acc<Tr>(b) << 16);
        if (next == seen) return;
        old = atomicCAS(word, seen, next);
    } while (old != seen);
}

template <class Tr> __device__ __forceinline__ void native_add_pair(unsigned short *p, float lo, float hi);

template <> __device__ __forceinline__ void native_add_pair<f16_t>(unsigned short *p, float lo, float hi) {
#if __CUDA_ARCH__ >= 600
    atomicAdd(reinterpret_cast<__half2 *>(p), __floats2half2_rn(lo, hi));
#else
    cas_add_pair<f16_t>(reinterpret_cast<unsigned *>(p), lo, hi);
#endif
}
template <> __device__ __forceinline__ void native_add_pair<bf16_t>(unsigned short *p, float lo, float hi) {
#if __CUDA_ARCH__ >= 800
    atomicAdd(reinterpret_cast<__nv_bfloat162 *>(p), __floats2bfloat162_rn(lo, hi));
#else
    cas_add_pair<bf16_t>(reinterpret_cast<unsigned *>(p), lo, hi);
#endif
}

// One 16-byte reduction of eight 16-bit elements (PTX ISA 8.1, sm_90 and newer).
template <class Tr> __device__ __forceinline__ void red_v8(unsigned short *p, const float *v);
template <> __device__ __forceinline__ void red_v8<f16_t>(unsigned short *p, const float *v) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(pack2<f16_t>(v[0], v[1])),
                 "r"(pack2<f16_t>(v[2], v[3])), "r"(pack2<f16_t>(v[4], v[5])), "r"(pack2<f16_t>(v[6], v[7]))
                 : "memory");
#else
    for (int i = 0; i < 8; i += 2) native_add_pair<f16_t>(p + i, v[i], v[i + 1]);
#endif
}
template <> __device__ __forceinline__ void red_v8<bf16_t>(unsigned short *p, const float *v) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(pack2<bf16_t>(v[0], v[1])),
                 "r"(pack2<bf16_t>(v[2], v[3])), "r"(pack2<bf16_t>(v[4], v[5])), "r"(pack2<bf16_t>(v[6], v[7]))
                 : "memory");
#else
    for (int i = 0; i < 8; i += 2) native_add_pair<bf16_t>(p + i, v[i], v[i + 1]);
#endif
}

// One 8-byte reduction of four 16-bit elements (sm_90).
template <class Tr> __device__ __forceinline__ void red_v4(unsigned short *p, const float *v);
template <> __device__ __forceinline__ void red_v4<f16_t>(unsigned short *p, const float *v) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.noftz.v2.f16x2 [%0], {%1, %2};" ::"l"(p), "r"(pack2<f16_t>(v[0], v[1])),
                 "r"(pack2<f16_t>(v[2], v[3]))
                 : "memory");
#else
    for (int i = 0; i < 4; i += 2) native_add_pair<f16_t>(p + i, v[i], v[i + 1]);
#endif
}
template <> __device__ __forceinline__ void red_v4<bf16_t>(unsigned short *p, const float *v) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.noftz.v2.bf16x2 [%0], {%1, %2};" ::"l"(p), "r"(pack2<bf16_t>(v[0], v[1])),
                 "r"(pack2<bf16_t>(v[2], v[3]))
                 : "memory");
#else
    for (int i = 0; i < 4; i += 2) native_add_pair<bf16_t>(p + i, v[i], v[i + 1]);
#endif
}

// Adds VEC floats to VEC 16-bit elements of type Tr: CAS for that strategy, else native (also
// for the levels that the f32-buffer and mixed strategies leave out of the buffer). A 16-bit
// value's kernels take 4 or 8 elements a lane (odd rows are staged), so pairs of elements.
template <class Tr, int VEC>
__device__ __forceinline__ void atomic_add_half(unsigned short *p, const float (&v)[VEC]) {
    static_assert(VEC % 2 == 0, "16-bit gradients are added in pairs");
    if constexpr (Tr::strategy != MSDA_ATOMIC_CAS) {
#if MSDA_VECTOR_RED && __CUDA_ARCH__ >= 900
        if constexpr (VEC % 8 == 0) {
#pragma unroll
            for (int i = 0; i < VEC; i += 8) red_v8<Tr>(p + i, v + i);
        } else if constexpr (VEC % 4 == 0) {
#pragma unroll
            for (int i = 0; i < VEC; i += 4) red_v4<Tr>(p + i, v + i);
        } else
#endif
        {
#pragma unroll
            for (int i = 0; i < VEC; i += 2) native_add_pair<Tr>(p + i, v[i], v[i + 1]);
        }
    } else {
#pragma unroll
        for (int i = 0; i < VEC; i += 2) cas_add_pair<Tr>(reinterpret_cast<unsigned *>(p + i), v[i], v[i + 1]);
    }
}

// Adds to the value gradient, whatever its storage (float, double, or 16-bit by strategy).
template <class Tr, int VEC>
__device__ __forceinline__ void add_gradient(typename Tr::G *p, const typename Tr::A (&v)[VEC]) {
    if constexpr (sizeof(typename Tr::G) == 2)
        atomic_add_half<Tr, VEC>(p, v);
    else
        atomic_add_vec<VEC>(p, v);
}

} // namespace msda

#endif // MSDA_DEVICE_CUH
