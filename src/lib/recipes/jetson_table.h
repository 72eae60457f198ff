/* The Jetson table (recipes/jetson.json): L4T releases to JetPack and CUDA, device-tree model
 * strings to modules and their compute capability. Its one reader; the Jetson probe asks it.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_JETSON_TABLE_H
#define MD_JETSON_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

typedef struct {
    char l4t[16];      /* "36.4.3" */
    char jetpack[16];  /* "6.2" */
    char cuda[16];     /* "12.6" */
    char ubuntu[16];
    char glibc[16];
    char cudnn[16];
} md_jetson_release;

/* What a whole L4T major line ships, for a point release the table does not list. */
typedef struct {
    unsigned l4t_major;  /* 36 */
    char jetpack[16];    /* "6" */
    char cuda[16];       /* "12.2-12.6" */
} md_jetson_family;

typedef struct {
    char id[24];                   /* "orin-nx" */
    char name[64];                 /* "Jetson Orin NX" */
    char soc[16];                  /* "tegra234" */
    unsigned sm;                   /* 87 */
    unsigned sms;                  /* streaming multiprocessors */
    unsigned registers_per_block;  /* 32768 on TX1, Nano and the TX2s */
    char max_jetpack[16];
} md_jetson_module;

/* Loads the embedded table once; later calls return at once. Not thread-safe on first call.
 * MD_ERR_INTERNAL naming the entry when the recipe is malformed (a release pattern that does
 * not compile, a model rule naming no module, a module without its compute capability). The
 * lookups below need it loaded and find nothing otherwise. */
md_status md_jetson_table_load(md_error *err);

/* Replaces the table with one read from DOC, a document shaped like jetson.json (tests feed
 * it broken ones). The caller keeps DOC. On failure the table is left empty. */
md_status md_jetson_table_load_json(json_t *doc, md_error *err);

/* Frees the loaded table (for leak-checked tests). */
void md_jetson_table_free(void);

/* Finds the L4T version in TEXT, the contents of /etc/nv_tegra_release, with the recipe's
 * pattern ("# R32 (release), REVISION: 7.4" gives "32.7.4") into L4T. False when no line
 * matches. */
bool md_jetson_l4t_parse(const char *text, char *l4t, size_t size);

/* The release L4T ("32.7.4"), or NULL when the table does not list it. */
const md_jetson_release *md_jetson_release_find(const char *l4t);

/* The family of L4T major version MAJOR (32), or NULL. */
const md_jetson_family *md_jetson_family_find(unsigned major);

/* The module with ID ("tx2"), or NULL. */
const md_jetson_module *md_jetson_module_find(const char *id);

/* The module the device-tree MODEL string names: the first model rule whose substring MODEL
 * contains wins. NULL when no rule matches. */
const md_jetson_module *md_jetson_module_for_model(const char *model);

#endif
