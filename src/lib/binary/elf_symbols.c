/* Dynamic symbols through libelf (elf_symbols.h). */
#include "elf_check.h"
#include "elf_symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int fd;
    Elf *elf;
    Elf_Data *syms;
    size_t n_syms;
    size_t strtab; /* section index of the names */
} dynsym_view;

static void view_close(dynsym_view *v)
{
    if (v->elf)
        elf_end(v->elf);
    if (v->fd >= 0)
        close(v->fd);
}

/* Opens PATH and finds its .dynsym; an object without one has no dynamic symbols (n_syms 0). */
static md_status view_open(const char *path, dynsym_view *v, md_error *err)
{
    *v = (dynsym_view){ .fd = -1 };
    if (elf_version(EV_CURRENT) == EV_NONE)
        return md_fail(err, MD_ERR_INTERNAL, "libelf: %s", md_elf_why("version mismatch"));
    v->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (v->fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(v->fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        view_close(v);
        return md_fail(err, MD_ERR_IO, "'%s': not a regular file", path);
    }
    char ident[SELFMAG];
    if (pread(v->fd, ident, SELFMAG, 0) != SELFMAG || memcmp(ident, ELFMAG, SELFMAG) != 0) {
        view_close(v);
        return md_fail(err, MD_ERR_UNKNOWN_TYPE, "'%s' is not an ELF file", path);
    }
    v->elf = elf_begin(v->fd, ELF_C_READ_MMAP, NULL);
    GElf_Ehdr ehdr;
    if (!v->elf || elf_kind(v->elf) != ELF_K_ELF || !gelf_getehdr(v->elf, &ehdr)) {
        md_status st = md_fail(err, MD_ERR_FORMAT, "'%s': corrupt ELF header: %s", path, md_elf_why("not a valid ELF header (class, byte order or version)"));
        view_close(v);
        return st;
    }
    if (ehdr.e_type != ET_DYN && ehdr.e_type != ET_EXEC) {
        view_close(v);
        return md_fail(err, MD_ERR_UNKNOWN_TYPE, "'%s' is not a shared object", path);
    }
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(v->elf, scn)) != NULL) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr)) {
            md_status st = md_fail(err, MD_ERR_FORMAT, "'%s': corrupt section header: %s", path, md_elf_why("unreadable"));
            view_close(v);
            return st;
        }
        if (shdr.sh_type != SHT_DYNSYM)
            continue;
        if (shdr.sh_offset > (uint64_t)sb.st_size || shdr.sh_size > (uint64_t)sb.st_size - shdr.sh_offset ||
            !(v->syms = elf_getdata(scn, NULL))) {
            view_close(v);
            return md_fail(err, MD_ERR_FORMAT, "'%s': unreadable dynamic symbol table", path);
        }
        v->n_syms = v->syms->d_size / (gelf_getclass(v->elf) == ELFCLASS64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym));
        v->strtab = shdr.sh_link;
        break;
    }
    return MD_OK;
}

/* The name of symbol I, or NULL where it has none; MD_ERR_FORMAT where it is unreadable. */
static md_status symbol_at(const dynsym_view *v, size_t i, GElf_Sym *sym, const char **name, const char *path,
                           md_error *err)
{
    if (i > INT_MAX || !gelf_getsym(v->syms, (int)i, sym))
        return md_fail(err, MD_ERR_FORMAT, "'%s': unreadable dynamic symbol %zu", path, i);
    *name = sym->st_name ? elf_strptr(v->elf, v->strtab, sym->st_name) : NULL;
    if (sym->st_name && !*name)
        return md_fail(err, MD_ERR_FORMAT, "'%s': dynamic symbol %zu has an unreadable name", path, i);
    return MD_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

md_status md_elf_imports(const char *path, bool (*keep)(const char *name), md_symbol_list *out, md_error *err)
{
    *out = (md_symbol_list){ 0 };
    dynsym_view v;
    md_status st = view_open(path, &v, err);
    if (st != MD_OK)
        return st;
    size_t cap = 0;
    for (size_t i = 1; i < v.n_syms && st == MD_OK; i++) {
        GElf_Sym sym;
        const char *name;
        if ((st = symbol_at(&v, i, &sym, &name, path, err)) != MD_OK)
            break;
        int bind = GELF_ST_BIND(sym.st_info);
        if (!name || sym.st_shndx != SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) || (keep && !keep(name)))
            continue;
        if (out->n == cap) {
            size_t grown_cap = cap ? 2 * cap : 64;
            char **grown = realloc(out->names, grown_cap * sizeof *grown);
            if (!grown) {
                st = md_fail(err, MD_ERR_NOMEM, "out of memory");
                break;
            }
            out->names = grown;
            cap = grown_cap;
        }
        if (!(out->names[out->n] = strdup(name))) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            break;
        }
        out->n++;
    }
    view_close(&v);
    if (out->n > 1) {
        qsort(out->names, out->n, sizeof *out->names, compare_names);
        size_t kept = 1; /* one entry per name: versioned imports can repeat one */
        for (size_t i = 1; i < out->n; i++) {
            if (strcmp(out->names[i], out->names[kept - 1]) == 0)
                free(out->names[i]);
            else
                out->names[kept++] = out->names[i];
        }
        out->n = kept;
    }
    return st;
}

md_status md_elf_mark_exports(const char *path, const md_symbol_list *wanted, bool *found, md_error *err)
{
    dynsym_view v;
    md_status st = view_open(path, &v, err);
    if (st != MD_OK)
        return st;
    for (size_t i = 1; i < v.n_syms; i++) {
        GElf_Sym sym;
        const char *name;
        if ((st = symbol_at(&v, i, &sym, &name, path, err)) != MD_OK)
            break;
        if (!name || sym.st_shndx == SHN_UNDEF || GELF_ST_BIND(sym.st_info) == STB_LOCAL)
            continue;
        char **hit = bsearch(&name, wanted->names, wanted->n, sizeof *wanted->names, compare_names);
        if (hit)
            found[hit - wanted->names] = true;
    }
    view_close(&v);
    return st;
}

void md_symbol_list_free(md_symbol_list *list)
{
    for (size_t i = 0; i < list->n; i++)
        free(list->names[i]);
    free(list->names);
    *list = (md_symbol_list){ 0 };
}

int md_elf_defines_version(const char *path, const char *version, md_error *err)
{
    dynsym_view v;
    if (view_open(path, &v, err) != MD_OK)
        return -1;
    int found = 0;
    Elf_Scn *scn = NULL;
    while (!found && (scn = elf_nextscn(v.elf, scn)) != NULL) {
        GElf_Shdr shdr;
        Elf_Data *data;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_GNU_verdef || !(data = elf_getdata(scn, NULL)))
            continue;
        size_t off = 0;
        for (size_t i = 0; i < shdr.sh_info && !found; i++) {
            GElf_Verdef def;
            GElf_Verdaux aux;
            if (!gelf_getverdef(data, (int)off, &def) || !gelf_getverdaux(data, (int)(off + def.vd_aux), &aux))
                break;
            const char *name = elf_strptr(v.elf, shdr.sh_link, aux.vda_name);
            found = name && strcmp(name, version) == 0;
            if (def.vd_next == 0)
                break;
            off += def.vd_next;
        }
    }
    view_close(&v);
    return found;
}

int md_elf_exports_containing(const char *path, const char *part, md_error *err)
{
    dynsym_view v;
    if (view_open(path, &v, err) != MD_OK)
        return -1;
    int found = 0;
    for (size_t i = 0; i < v.n_syms && !found; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(v.syms, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
            continue;
        const char *name = elf_strptr(v.elf, v.strtab, sym.st_name);
        found = name && strstr(name, part) != NULL;
    }
    view_close(&v);
    return found;
}
