/* An installed extension's host symbols against the torch that Python imports: the cause of
 * "undefined symbol: _ZN3c10..." after a torch upgrade (torch-abi-mismatch) and of unresolved
 * THP* symbols in a CMake build that did not link libtorch_python (torch-python-unlinked). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag.h"
#include "binary/elf_glibc.h"
#include "binary/elf_symbols.h"
#include "recipes/product.h"

/* A mangled name in namespace at, c10 or torch, or their vtables and type infos:
 * _Z[TV|TI|TS]N[K](2at|3c10|5torch)... */
static bool is_torch_symbol(const char *name)
{
    if (strncmp(name, "_Z", 2) != 0)
        return false;
    name += 2;
    if (name[0] == 'T' && (name[1] == 'V' || name[1] == 'I' || name[1] == 'S'))
        name += 2;
    if (*name++ != 'N')
        return false;
    if (*name == 'K')
        name++;
    return strncmp(name, "2at", 3) == 0 || strncmp(name, "3c10", 4) == 0 || strncmp(name, "5torch", 6) == 0;
}

/* Symbols only libtorch_python.so exports: THPVariable_Wrap and the like (plain or as a
 * function's mangled name), and namespace torch::python. */
static bool is_torch_python_symbol(const char *name)
{
    if (strncmp(name, "THP", 3) == 0)
        return true;
    if (strncmp(name, "_Z", 2) == 0) {
        const char *p = name + 2;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p > name + 2 && strncmp(p, "THP", 3) == 0)
            return true;
    }
    return strncmp(name, "_ZN5torch6python", 16) == 0 || strncmp(name, "_ZNK5torch6python", 17) == 0;
}

static bool is_torch_or_python_symbol(const char *name)
{
    return is_torch_symbol(name) || is_torch_python_symbol(name);
}

static bool is_torch_library(const char *name)
{
    return (strncmp(name, "libc10", 6) == 0 || strncmp(name, "libtorch", 8) == 0) && strstr(name, ".so");
}

/* Marks in FOUND the imports that some library of torch's lib folder exports; the number of
 * libraries read, or -1 where the folder cannot be listed. */
static int mark_torch_exports(const char *dir, const md_symbol_list *imports, bool *found, md_check *c)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int read = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_torch_library(e->d_name))
            continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
            continue;
        md_error err;
        if (md_elf_mark_exports(path, imports, found, &err) == MD_OK)
            read++;
        else
            md_check_add(c, MD_LINE_DETAIL, "  %s", err.message);
    }
    closedir(d);
    return read;
}

void md_probe_binary_symbols(const md_machine *m, md_binary_facts *f, md_check *c)
{
    f->torch_imports = f->torch_missing = f->needs_torch_python = f->links_torch_python = -1;
    f->missing_symbol[0] = '\0';
    if (f->kind == MD_BIN_MSDA_WHEEL)
        return; /* libmsda links no torch: nothing to resolve */
    md_error err;
    md_symbol_list all, imports = { 0 };
    if (md_elf_imports(f->path, is_torch_or_python_symbol, &all, &err) != MD_OK) {
        md_symbol_list_free(&all);
        return; /* a member of an archive, or not ELF: inspect has said what it could */
    }
    /* The torch symbols, still sorted, taken out of ALL; the Python-only ones stay there. */
    imports.names = malloc((all.n ? all.n : 1) * sizeof *imports.names);
    if (!imports.names) {
        md_symbol_list_free(&all);
        return;
    }
    f->needs_torch_python = 0;
    size_t kept = 0;
    for (size_t i = 0; i < all.n; i++) {
        f->needs_torch_python |= is_torch_python_symbol(all.names[i]);
        if (is_torch_symbol(all.names[i]))
            imports.names[imports.n++] = all.names[i];
        else
            all.names[kept++] = all.names[i];
    }
    all.n = kept;
    md_symbol_list_free(&all);
    md_elf_glibc links;
    if (md_elf_glibc_read_file(f->path, MD_GLIBC_FLOOR_MAJOR, MD_GLIBC_FLOOR_MINOR, &links, &err) == MD_OK) {
        f->links_torch_python = 0;
        for (size_t i = 0; i < links.n_needed; i++)
            if (strncmp(links.needed[i].soname, "libtorch_python.so", 18) == 0)
                f->links_torch_python = 1;
    }
    md_elf_glibc_free(&links);
    if (f->needs_torch_python == 1 && f->links_torch_python == 0) {
        md_check_add(c, MD_LINE_PROBLEM, "%s imports torch's Python bindings (THP*) but does not link libtorch_python.so",
                     f->path);
        md_check_raise(c, MD_CHECK_FAIL);
    }

    f->torch_imports = (int)imports.n;
    if (imports.n == 0)
        f->torch_missing = 0; /* nothing of torch's to resolve */
    bool *found = imports.n ? calloc(imports.n, sizeof *found) : NULL;
    if (imports.n && m->py.torch_lib_dir[0] && found &&
        mark_torch_exports(m->py.torch_lib_dir, &imports, found, c) > 0) {
        f->torch_missing = 0;
        for (size_t i = 0; i < imports.n; i++) {
            if (found[i])
                continue;
            if (f->torch_missing++ == 0)
                snprintf(f->missing_symbol, sizeof f->missing_symbol, "%s", imports.names[i]);
        }
        if (f->torch_missing) {
            md_check_add(c, MD_LINE_PROBLEM,
                         "%s needs %d torch symbol%s that torch %s does not export, e.g. %s: it was built against "
                         "another torch",
                         f->path, f->torch_missing, f->torch_missing == 1 ? "" : "s", m->py.torch_version,
                         f->missing_symbol);
            md_check_raise(c, MD_CHECK_FAIL);
        } else {
            md_check_add(c, MD_LINE_DETAIL, "  its %d torch symbols resolve against torch %s", f->torch_imports,
                         m->py.torch_version);
        }
    }
    free(found);
    md_symbol_list_free(&imports);
}
