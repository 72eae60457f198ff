/* Access to the embedded recipes/ JSON documents. */
#ifndef MD_RECIPES_H
#define MD_RECIPES_H

#include <jansson.h>
#include "status.h"

/* Parses the embedded recipe NAME ("architectures.json"). The caller owns the returned
 * reference (json_decref). On failure returns NULL with MD_ERR_INTERNAL in ERR. */
json_t *md_recipe_load(const char *name, md_error *err);

#endif
