/* What GPU code a binary carries: the model filled by the fatbin and cubin readers.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_DEVCODE_H
#define MD_DEVCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

typedef struct {
    char *name;              /* mangled, as in the cubin's symbol table */
    unsigned registers;      /* per thread; 0 when the cubin does not say */
    unsigned max_threads;    /* __launch_bounds__ (EIATTR_MAX_THREADS x*y*z); 0 when none */
    uint64_t shared_bytes;   /* static shared memory (.nv.shared.<kernel>) */
} md_kernel;

typedef enum { MD_CODE_SASS = 1, MD_CODE_PTX = 2 } md_code_kind;

typedef enum {
    MD_COMPRESS_NONE = 0,
    MD_COMPRESS_LZ4,   /* flag 0x2000 (CUDA 11.x/12.x) */
    MD_COMPRESS_ZSTD   /* flag 0x8000 (CUDA 13) */
} md_compression;

typedef struct {
    md_code_kind kind;
    unsigned sm;             /* 90 for sm_90 / compute_90 */
    char variant;            /* 'a' (arch-specific, runs only on exactly this CC), 'f' (family), 0 */
    unsigned container;      /* index of the fatbin container, from 0, within its section */
    const char *section;     /* the host ELF section holding it (".nv_fatbin", "__nv_relfatbin"); NULL
                              * in a .fatbin file or a cubin */
    md_compression compression;
    uint64_t size;           /* payload bytes as stored */
    uint64_t uncompressed_size;
    bool kernels_read;       /* the cubin was parsed (SASS, uncompressed or opened) */
    /* What wrote the entry and what it asks of a driver, from its headers (docs/FACTS.md). */
    unsigned toolkit;        /* the CUDA release that wrote a cubin, as 11080; 0 when its headers do
                              * not say (PTX, or SASS that could not be opened) */
    unsigned ptx_isa;        /* PTX entries: the ISA, major * 10 + minor (78 for 7.8); else 0 */
    unsigned cubin_abi;      /* SASS: the cubin's ELF ABI version, 7 (up to CUDA 12) or 8; 0 unknown */
    int needs_cuda;          /* the oldest driver CUDA version that loads it, as 11000; 0 unknown */
    char note[96];           /* why the kernels were not read, when they were not */
    md_kernel *kernels;
    size_t n_kernels;
} md_code_entry;

typedef enum {
    MD_FILE_ELF = 1,   /* host executable, shared object or relocatable object */
    MD_FILE_FATBIN,
    MD_FILE_CUBIN,
    MD_FILE_WHEEL      /* only as a container; members are reported as their own binaries */
} md_file_type;

typedef struct {
    char *path;              /* as displayed: "lib.so", or "pkg.whl!pkg/lib.so" for a member */
    md_file_type type;
    unsigned containers;     /* fatbin containers found */
    md_code_entry *entries;
    size_t n_entries;
} md_binary;

/* The most code entries kept for one binary: twelve times the most seen in a real library
 * (libcublasLt.so.13, 5576), so that memory stays bounded (about 2 kB per entry with --json)
 * whatever a file announces; a fatbin with more is refused as corrupt. */
#define MD_MAX_CODE_ENTRIES 65536u

/* Releases everything a binary owns and zeroes it. */
void md_binary_free(md_binary *bin);

/* Appends a zeroed entry; returns NULL when out of memory. */
md_code_entry *md_binary_add_entry(md_binary *bin);

/* The longest run of zero bytes taken as padding between two fatbin containers: nvcc pads them
 * to a few bytes; a longer run (a section that is a hole of zeros) is refused as soon as it is
 * seen, without reading the rest. */
#define MD_FATBIN_MAX_PADDING 65536u

/* Reads a fatbin region (one or more containers back to back, as in a .nv_fatbin section or a
 * .fatbin file) of SIZE bytes at DATA, appending its entries to BIN. Never reads outside
 * [DATA, DATA+SIZE). Malformed data gives MD_ERR_FORMAT with the offset in the message, and so
 * do an entry past MD_MAX_CODE_ENTRIES and zeros past MD_FATBIN_MAX_PADDING. */
md_status md_fatbin_read(const uint8_t *data, size_t size, md_binary *bin, md_error *err);

/* Reads a cubin (ELF, e_machine EM_CUDA) of SIZE bytes into ENTRY: sm, variant, kernels.
 * DATA must stay valid during the call only. Malformed data gives MD_ERR_FORMAT. */
md_status md_cubin_read(const uint8_t *data, size_t size, md_code_entry *entry, md_error *err);

/* True when DATA starts like a fatbin container / a cubin. */
bool md_is_fatbin(const uint8_t *data, size_t size);
bool md_is_cubin(const uint8_t *data, size_t size);

/* Sets E's needs_cuda from its toolkit, cubin_abi and ptx_isa (recipes/toolkits.json's rules).
 * The readers call it; an ABI-8 cubin whose toolkit is unknown gets CUDA 12.8's rule, the first
 * release that writes ABI 8. */
void md_code_entry_settle_needs(md_code_entry *e);

/* Sorted, de-duplicated architecture lists of a binary, as "sm_75", "compute_90" strings in
 * caller-provided arrays of capacity CAP; returns the count (at most CAP). */
size_t md_binary_archs(const md_binary *bin, md_code_kind kind, char (*out)[24], size_t cap);

#endif
