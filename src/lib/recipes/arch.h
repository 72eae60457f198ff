/* The GPU architecture table (recipes/architectures.json) and parsing of architecture names.
 * Scope: public: src/cli may include it. */
#ifndef MD_ARCH_H
#define MD_ARCH_H

#include <jansson.h>
#include <stdbool.h>
#include "base/status.h"

typedef struct {
    unsigned sm;                   /* 61 for CC 6.1, 100 for 10.0 */
    unsigned major, minor;
    char family[16];
    unsigned registers_per_block;  /* 32768 on 5.3 and 6.2 */
    unsigned registers_per_sm;
    unsigned max_threads_per_block;
    unsigned max_threads_per_sm;
    unsigned shared_kb_per_sm;
    unsigned shared_kb_per_block_optin;
    bool fp16, fp16_fast, half2_atomic_add, half_atomic_add, bf16, bf16_atomic_native;
    bool jetson;
} md_arch;

/* A GPU as named by the user: the architecture it has, and a display name. */
typedef struct {
    const md_arch *arch;
    char label[96]; /* "sm_61", or the GPU's name: "Tesla P40 (sm_61)" */
} md_gpu_target;

/* Loads the embedded table once; later calls return at once. Not thread-safe on first call. */
md_status md_arch_table_load(md_error *err);

/* Reads a document shaped like architectures.json into the table, replacing any loaded one
 * (the fuzz target feeds it broken ones). MD_ERR_INTERNAL names what is malformed. */
md_status md_arch_table_load_json(json_t *doc, md_error *err);

/* The entry for SM (e.g. 61), or NULL when the table has none. Needs md_arch_table_load. */
const md_arch *md_arch_by_sm(unsigned sm);

/* The largest block that fits REGISTERS_PER_BLOCK when each thread takes the most registers a
 * thread may have (255, allocated per warp in units of 256, so 256 a thread): 128 threads on a
 * 32K-register block, 256 on 64K. The one statement of that rule: the build's thread knob and
 * diagnose's advice both ask it. */
unsigned md_arch_threads_at_max_registers(unsigned registers_per_block);

/* All architectures, ascending; *count receives their number. */
const md_arch *md_arch_all(unsigned *count);

/* Parses "sm_61", "sm_90a", "compute_86", "6.1", "61" or a GPU name from the table ("p40",
 * "Tesla P40", "orin"; case, spaces and dashes ignored) into OUT.
 * Returns MD_ERR_ARGUMENT with a message naming the input when it is unknown. */
md_status md_gpu_target_parse(const char *text, md_gpu_target *out, md_error *err);

/* Parses the numeric forms alone ("sm_88", "sm_90a", "compute_86", "8.8", "88") into *SM,
 * whether or not the table knows the architecture; false for anything else. */
bool md_arch_parse_number(const char *text, unsigned *sm);

/* Writes "sm_90", "sm_90a", "compute_86" into BUF. */
void md_arch_format(char *buf, unsigned size, bool ptx, unsigned sm, char variant);

/* Frees the loaded table (for leak-checked tests). */
void md_arch_table_free(void);

#endif
