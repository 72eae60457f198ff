/* Growable NULL-terminated string vectors: argument vectors for spawned tools, file lists.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_STRV_H
#define MD_STRV_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char **items;   /* NULL-terminated once anything was added; owned */
    size_t n;
} strv;

/* Appends a formatted string; false when out of memory (V is unchanged then). */
bool strv_add(strv *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends each string of the NULL-terminated LIST. */
bool strv_add_all(strv *v, char *const *list);

/* Frees a NULL-terminated vector and its strings; NULL is fine. */
void strv_free(char **items);

#endif
