/* The device code's parts: msda_kernels.cu is compiled MSDA_PART_COUNT times per image, once
 * with each MSDA_PART, so that a build of one architecture runs as many compilers side by side
 * (cicc and ptxas each take one core). Each part is its own fatbin and, once loaded, its own
 * module; every part holds msda_config. Shared by the device code, which compiles a part's
 * kernels only, and the loader, which looks each kernel up in its part's module.
 *
 * The split balances cicc's and ptxas's time (CUDA 13.0, sm_90, cicc + ptxas on one core: part 0
 * 7.5 + 5.8 s, part 1 5.8 + 4.2 s; kernels/PERF.md, "Fewer kernels to compile"):
 *   part 0: the f32 and f64 kernels, and bf16's but for its deterministic backward;
 *   part 1: the f16 kernels, and bf16's deterministic backward.
 * kernels/libmsda.json's device.parts says how many parts the build compiles; a library whose
 * fatbins were built in another number of parts is refused when loaded. */
#ifndef MSDA_PARTS_H
#define MSDA_PARTS_H

#define MSDA_PART_COUNT 2
#define MSDA_PART_MAIN 0   /* f32, f64, bf16 */
#define MSDA_PART_F16 1    /* f16, bf16's deterministic backward */

#if defined(MSDA_PART) && (MSDA_PART < 0 || MSDA_PART >= MSDA_PART_COUNT)
#error "MSDA_PART must be from 0 to MSDA_PART_COUNT - 1"
#endif

/* Whether the translation unit compiles the kernels of part P: all of them when MSDA_PART is not
 * defined (one unit, as tests/kernels/check-same-ptx compiles it). */
#ifdef MSDA_PART
#define MSDA_IN_PART(P) (MSDA_PART == (P))
#else
#define MSDA_IN_PART(P) 1
#endif

#endif /* MSDA_PARTS_H */
