/* Access to the embedded recipes/ JSON documents.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_RECIPES_H
#define MD_RECIPES_H

#include <jansson.h>
#include "base/status.h"

/* Parses the embedded recipe NAME ("architectures.json"). The caller owns the returned
 * reference (json_decref). On failure returns NULL with MD_ERR_INTERNAL in ERR. */
json_t *md_recipe_load(const char *name, md_error *err);

/* Loads the embedded recipe NAME and hands it to PARSE, the owner's typed-table reader, then
 * drops it: the one way a table module turns its recipe into a table. Returns PARSE's status,
 * or MD_ERR_INTERNAL when NAME is missing or not JSON. */
md_status md_recipe_parse(const char *name, md_status (*parse)(json_t *doc, md_error *err), md_error *err);

#endif
