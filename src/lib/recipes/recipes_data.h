/* The recipes/ JSON files, embedded at build time by tools/embed.c.
 * Scope: private to src/lib/recipes. */
#ifndef MD_RECIPES_DATA_H
#define MD_RECIPES_DATA_H
#include <stddef.h>

struct md_recipe_blob {
    const char *name;  /* base name, e.g. "architectures.json" */
    const char *text;  /* NUL-terminated JSON */
    size_t size;       /* bytes, without the NUL */
};

/* Terminated by an entry whose name is NULL. */
extern const struct md_recipe_blob md_recipe_blobs[];

#endif
