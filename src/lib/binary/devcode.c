#include "devcode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes/arch.h"
#include "recipes/toolkit_table.h"

void md_binary_free(md_binary *bin)
{
    for (size_t i = 0; i < bin->n_entries; i++) {
        md_code_entry *e = &bin->entries[i];
        for (size_t k = 0; k < e->n_kernels; k++)
            free(e->kernels[k].name);
        free(e->kernels);
    }
    free(bin->entries);
    free(bin->path);
    memset(bin, 0, sizeof *bin);
}

md_code_entry *md_binary_add_entry(md_binary *bin)
{
    /* Grow by doubling: libraries like libtorch_cuda.so hold thousands of entries. */
    size_t n = bin->n_entries;
    if ((n & (n - 1)) == 0) {
        size_t cap = n ? n * 2 : 8;
        md_code_entry *grown = realloc(bin->entries, cap * sizeof *grown);
        if (!grown)
            return NULL;
        bin->entries = grown;
    }
    md_code_entry *e = &bin->entries[bin->n_entries++];
    memset(e, 0, sizeof *e);
    return e;
}

/* The first toolkit that writes ABI-8 cubins (for sm_100 and later; 13.0 for every SM). */
#define FIRST_ABI8_MAJOR 12u
#define FIRST_ABI8_MINOR 8u

void md_code_entry_settle_needs(md_code_entry *e)
{
    if (e->kind == MD_CODE_PTX)
        e->needs_cuda = e->ptx_isa ? md_ptx_needs_cuda(e->ptx_isa) : 0;
    else if (e->toolkit)
        e->needs_cuda = md_sass_needs_cuda(e->toolkit / 1000, e->toolkit % 1000 / 10);
    else if (e->cubin_abi >= 8)
        e->needs_cuda = md_sass_needs_cuda(FIRST_ABI8_MAJOR, FIRST_ABI8_MINOR);
    else
        e->needs_cuda = 0;
}

static int compare_arch_names(const void *a, const void *b)
{
    /* "sm_75" < "sm_100": compare the numbers, then the suffix. */
    const char *x = strchr((const char *)a, '_'), *y = strchr((const char *)b, '_');
    unsigned long nx = strtoul(x + 1, NULL, 10), ny = strtoul(y + 1, NULL, 10);
    if (nx != ny)
        return nx < ny ? -1 : 1;
    return strcmp((const char *)a, (const char *)b);
}

size_t md_binary_archs(const md_binary *bin, md_code_kind kind, char (*out)[24], size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < bin->n_entries && n < cap; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (e->kind != kind)
            continue;
        char name[24];
        md_arch_format(name, sizeof name, kind == MD_CODE_PTX, e->sm, e->variant);
        size_t j = 0;
        while (j < n && strcmp(out[j], name) != 0)
            j++;
        if (j == n)
            memcpy(out[n++], name, sizeof name);
    }
    if (n > 1)
        qsort(out, n, sizeof *out, compare_arch_names);
    return n;
}
