/* The placeholders of recipes/signatures.json's texts: "{name}", or "{a|b}" for the first of
 * several that has a value; "${NAME}" (shell, CMake) is not one. The one reader of that syntax,
 * for the knowledge check and for filling fixes alike.
 * Scope: private to src/lib/diagnose. */
#ifndef MD_TEMPLATE_H
#define MD_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *start;   /* the '{' */
    size_t length;       /* of the whole "{...}" */
    const char *names;   /* "a|b": the alternatives, not NUL-terminated */
    size_t names_length;
} md_template_slot;

/* The first placeholder of TEXT at or after AT into SLOT; false when there is none. */
bool md_template_next(const char *text, const char *at, md_template_slot *slot);

/* The alternative after *POS (0 first) of SLOT into NAME, advancing *POS; false after the last. */
bool md_template_alternative(const md_template_slot *slot, size_t *pos, char *name, size_t size);

#endif
