#include "recipes.h"

#include <errno.h>
#include <string.h>
#include "recipes_data.h"

json_t *md_recipe_load(const char *name, md_error *err)
{
    for (const struct md_recipe_blob *b = md_recipe_blobs; b->name; b++) {
        if (strcmp(b->name, name) != 0)
            continue;
        json_error_t jerr;
        errno = 0;
        json_t *doc = json_loadb(b->text, b->size, 0, &jerr);
        /* jansson leaves the reason empty, or (its lexer) calls it a bad token, when an allocation
         * fails part way; errno, cleared before, tells. */
        if (!doc && (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0] || errno == ENOMEM))
            md_fail(err, MD_ERR_NOMEM, "out of memory reading the embedded recipe '%s'", name);
        else if (!doc)
            md_fail(err, MD_ERR_INTERNAL, "embedded recipe '%s' is not valid JSON: line %d: %s",
                    name, jerr.line, jerr.text);
        return doc;
    }
    md_fail(err, MD_ERR_INTERNAL, "no embedded recipe named '%s'", name);
    return NULL;
}

md_status md_recipe_parse(const char *name, md_status (*parse)(json_t *doc, md_error *err), md_error *err)
{
    json_t *doc = md_recipe_load(name, err);
    if (!doc)
        return err ? err->code : MD_ERR_INTERNAL;
    md_status st = parse(doc, err);
    json_decref(doc);
    return st;
}
