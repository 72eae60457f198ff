/* The glibc floor of a host ELF object. The version-needs section (.gnu.version_r) lists, per
 * needed library, the symbol versions used, each with an index; .gnu.version gives each .dynsym
 * entry its index, which names the version that symbol binds to (dlopen -> GLIBC_2.34). */
#include "elf_check.h"
#include "elf_glibc.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "recipes/platform.h"

#define VERSYM_INDEX_MASK 0x7fffu /* the top bit marks a hidden version */
#define VERSYM_FIRST_NAMED 2      /* 0 is local, 1 is the unversioned global */

/* glibc 2.36 added this marker for objects linked with -z pack-relative-relocs; older glibcs
 * refuse them, so it is a floor like any GLIBC_x.y. */
#define DT_RELR_MARKER "GLIBC_ABI_DT_RELR"

typedef struct {
    unsigned index;       /* vna_other */
    const char *name;     /* in the ELF's string table */
    md_glibc_version version;
    bool is_glibc;        /* name parsed as a numbered glibc version */
} needed_version;

int md_glibc_version_compare(md_glibc_version a, md_glibc_version b)
{
    if (a.major != b.major)
        return a.major < b.major ? -1 : 1;
    if (a.minor != b.minor)
        return a.minor < b.minor ? -1 : 1;
    if (a.patch != b.patch)
        return a.patch < b.patch ? -1 : 1;
    return 0;
}

static bool parse_number(const char **p, unsigned *out)
{
    const char *s = *p;
    unsigned long v = 0;
    if (*s < '0' || *s > '9')
        return false;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > 1000000)
            return false;
        s++;
    }
    *out = (unsigned)v;
    *p = s;
    return true;
}

bool md_glibc_version_parse(const char *name, md_glibc_version *out)
{
    if (strncmp(name, "GLIBC_", 6) != 0)
        return false;
    const char *p = name + 6;
    md_glibc_version v = { 0, 0, 0 };
    if (!parse_number(&p, &v.major) || *p++ != '.' || !parse_number(&p, &v.minor))
        return false;
    if (*p == '.') {
        p++;
        if (!parse_number(&p, &v.patch))
            return false;
    }
    if (*p != '\0')
        return false;
    *out = v;
    return true;
}

void md_elf_glibc_free(md_elf_glibc *info)
{
    if (!info)
        return;
    for (size_t i = 0; i < info->n_above; i++) {
        free(info->above[i].symbol);
        free(info->above[i].version_name);
    }
    free(info->above);
    for (size_t i = 0; i < info->n_needed; i++)
        free(info->needed[i].soname);
    free(info->needed);
    memset(info, 0, sizeof *info);
}

/* Reads the version-needs section into *VERSIONS (the names point into the ELF image). */
static md_status read_verneed(Elf *elf, Elf_Scn *scn, const GElf_Shdr *shdr, needed_version **versions,
                              size_t *count, md_error *err)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data)
        return md_fail(err, MD_ERR_FORMAT, "unreadable version-needs section: %s", md_elf_why("its data lies outside the file"));
    size_t size = data->d_size;
    /* Each entry sits at a larger offset than the one before (the links are unsigned and a
     * zero link ends a chain), so the loops end; the cap on entries bounds memory too. */
    size_t cap = size / sizeof(GElf_Vernaux) + 1, n = 0;
    needed_version *list = calloc(cap, sizeof *list);
    if (!list)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = MD_OK;
    size_t offset = 0;
    for (size_t file = 0; file < shdr->sh_info; file++) {
        GElf_Verneed vn;
        if (offset > size || offset > INT_MAX || !gelf_getverneed(data, (int)offset, &vn)) {
            st = md_fail(err, MD_ERR_FORMAT, "version-needs entry %zu lies outside its section", file);
            goto end;
        }
        size_t aux = offset + vn.vn_aux;
        for (unsigned k = 0; k < vn.vn_cnt; k++) {
            GElf_Vernaux vna;
            if (aux < offset || aux > size || aux > INT_MAX || !gelf_getvernaux(data, (int)aux, &vna)) {
                st = md_fail(err, MD_ERR_FORMAT, "version-needs entry %zu has a version outside its section",
                             file);
                goto end;
            }
            const char *name = elf_strptr(elf, shdr->sh_link, vna.vna_name);
            if (!name) {
                st = md_fail(err, MD_ERR_FORMAT, "version-needs entry %zu has an unreadable name", file);
                goto end;
            }
            if (n == cap) {
                st = md_fail(err, MD_ERR_FORMAT, "version-needs section has more entries than fit in it");
                goto end;
            }
            needed_version *v = &list[n++];
            v->index = vna.vna_other & VERSYM_INDEX_MASK;
            v->name = name;
            if (md_glibc_version_parse(name, &v->version))
                v->is_glibc = true;
            else if (strcmp(name, DT_RELR_MARKER) == 0)
                v->is_glibc = true, v->version = (md_glibc_version){ 2, 36, 0 };
            if (vna.vna_next == 0)
                break;
            aux += vna.vna_next;
        }
        if (vn.vn_next == 0)
            break;
        offset += vn.vn_next;
    }
end:
    if (st != MD_OK) {
        free(list);
        return st;
    }
    *versions = list;
    *count = n;
    return MD_OK;
}

static const needed_version *find_version(const needed_version *list, size_t n, unsigned index)
{
    for (size_t i = 0; i < n; i++)
        if (list[i].index == index)
            return &list[i];
    return NULL;
}

static md_status add_above(md_elf_glibc *out, const char *symbol, const needed_version *v)
{
    md_glibc_symbol *grown = realloc(out->above, (out->n_above + 1) * sizeof *grown);
    if (!grown)
        return MD_ERR_NOMEM;
    out->above = grown;
    md_glibc_symbol *s = &out->above[out->n_above];
    s->symbol = strdup(symbol);
    s->version_name = strdup(v->name);
    s->version = v->version;
    if (!s->symbol || !s->version_name) {
        free(s->symbol);
        free(s->version_name);
        return MD_ERR_NOMEM;
    }
    out->n_above++;
    return MD_OK;
}

/* Lists the .dynsym symbols bound to a glibc version above FLOOR. */
static md_status read_symbols(Elf *elf, Elf_Scn *dynsym, const GElf_Shdr *dynsym_shdr, Elf_Scn *versym,
                              const needed_version *versions, size_t n_versions, md_glibc_version floor,
                              md_elf_glibc *out, md_error *err)
{
    Elf_Data *syms = elf_getdata(dynsym, NULL);
    Elf_Data *vers = elf_getdata(versym, NULL);
    if (!syms || !vers)
        return md_fail(err, MD_ERR_FORMAT, "unreadable symbol or symbol-version table: %s", md_elf_why("its data lies outside the file"));
    /* Translated data holds native Elf32_Sym or Elf64_Sym entries. */
    size_t n_syms = syms->d_size / (gelf_getclass(elf) == ELFCLASS64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym));
    size_t n_vers = vers->d_size / sizeof(GElf_Versym);
    if (n_vers < n_syms)
        return md_fail(err, MD_ERR_FORMAT, "symbol-version table has %zu entries for %zu symbols", n_vers,
                       n_syms);
    for (size_t i = 1; i < n_syms && i <= INT_MAX; i++) {
        GElf_Sym sym;
        GElf_Versym vs;
        if (!gelf_getsym(syms, (int)i, &sym) || !gelf_getversym(vers, (int)i, &vs))
            return md_fail(err, MD_ERR_FORMAT, "unreadable dynamic symbol %zu: %s", i, md_elf_why("index past the table"));
        unsigned index = vs & VERSYM_INDEX_MASK;
        if (index < VERSYM_FIRST_NAMED)
            continue;
        const needed_version *v = find_version(versions, n_versions, index);
        if (!v || !v->is_glibc)
            continue; /* a version this object defines, or another library's (GLIBCXX_...) */
        /* Tags name major.minor only: GLIBC_2.2.5 is not above a 2.2 floor. */
        md_glibc_version major_minor = { v->version.major, v->version.minor, 0 };
        if (md_glibc_version_compare(major_minor, floor) <= 0)
            continue;
        const char *name = elf_strptr(elf, dynsym_shdr->sh_link, sym.st_name);
        if (!name)
            return md_fail(err, MD_ERR_FORMAT, "dynamic symbol %zu has an unreadable name", i);
        if (add_above(out, name, v) != MD_OK)
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    return MD_OK;
}

static md_status read_needed(Elf *elf, Elf_Scn *scn, const GElf_Shdr *shdr, md_elf_glibc *out, md_error *err)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data)
        return md_fail(err, MD_ERR_FORMAT, "unreadable dynamic section: %s", md_elf_why("its data lies outside the file"));
    size_t entry = gelf_getclass(elf) == ELFCLASS64 ? sizeof(Elf64_Dyn) : sizeof(Elf32_Dyn);
    size_t n = data->d_size / entry;
    for (size_t i = 0; i < n && i <= INT_MAX; i++) {
        GElf_Dyn dyn;
        if (!gelf_getdyn(data, (int)i, &dyn))
            return md_fail(err, MD_ERR_FORMAT, "unreadable dynamic entry %zu: %s", i, md_elf_why("index past the table"));
        if (dyn.d_tag == DT_NULL)
            break;
        if (dyn.d_tag != DT_NEEDED)
            continue;
        const char *name =
            dyn.d_un.d_val <= SIZE_MAX ? elf_strptr(elf, shdr->sh_link, (size_t)dyn.d_un.d_val) : NULL;
        if (!name)
            return md_fail(err, MD_ERR_FORMAT, "DT_NEEDED entry %zu has an unreadable name", i);
        md_elf_needed *grown = realloc(out->needed, (out->n_needed + 1) * sizeof *grown);
        if (!grown)
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        out->needed = grown;
        out->needed[out->n_needed].allowed = false;
        if (!(out->needed[out->n_needed].soname = strdup(name)))
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        out->n_needed++;
    }
    return MD_OK;
}

md_status md_elf_glibc_read(uint8_t *data, size_t size, unsigned floor_major, unsigned floor_minor,
                            md_elf_glibc *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    if (size < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) != 0)
        return md_fail(err, MD_ERR_UNKNOWN_TYPE, "not an ELF file");
    if (elf_version(EV_CURRENT) == EV_NONE)
        return md_fail(err, MD_ERR_INTERNAL, "libelf: %s", md_elf_why("version mismatch"));
    md_status st = MD_OK;
    needed_version *versions = NULL;
    size_t n_versions = 0;
    Elf *elf = elf_memory((char *)data, size);
    GElf_Ehdr ehdr;
    size_t shstrndx;
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr)) {
        st = md_fail(err, MD_ERR_FORMAT, "corrupt ELF header: %s", md_elf_why("not a valid ELF header (class, byte order or version)"));
        goto end;
    }
    if (ehdr.e_type != ET_DYN && ehdr.e_type != ET_EXEC) {
        st = md_fail(err, MD_ERR_UNKNOWN_TYPE, "ELF file is not a shared object or executable (type %u)",
                     (unsigned)ehdr.e_type);
        goto end;
    }
    out->machine = ehdr.e_machine;
    const md_platform *platform = md_platform_by_machine(ehdr.e_machine);
    out->machine_name = platform ? platform->name : NULL;
    /* As in inspect.c: libelf shows fewer sections for a file cut short, so check extents. */
    uint64_t shnum = ehdr.e_shnum ? ehdr.e_shnum : ehdr.e_shoff ? 1 : 0;
    if (ehdr.e_shoff == 0 || shnum == 0) {
        st = md_fail(err, MD_ERR_FORMAT, "ELF file has no section headers");
        goto end;
    }
    if (ehdr.e_shoff > size || shnum * ehdr.e_shentsize > size - ehdr.e_shoff) {
        st = md_fail(err, MD_ERR_FORMAT, "truncated ELF file: section headers end past its %zu bytes", size);
        goto end;
    }
    if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
        st = md_fail(err, MD_ERR_FORMAT, "corrupt ELF section header table: %s", md_elf_why("section-name table index out of range"));
        goto end;
    }
    Elf_Scn *scn = NULL, *dynsym = NULL, *versym = NULL, *verneed = NULL, *dynamic = NULL;
    GElf_Shdr dynsym_shdr = { 0 }, verneed_shdr = { 0 }, dynamic_shdr = { 0 };
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr)) {
            st = md_fail(err, MD_ERR_FORMAT, "corrupt ELF section header: %s", md_elf_why("unreadable"));
            goto end;
        }
        bool wanted = shdr.sh_type == SHT_DYNSYM || shdr.sh_type == SHT_GNU_versym ||
                      shdr.sh_type == SHT_GNU_verneed || shdr.sh_type == SHT_DYNAMIC;
        if (!wanted)
            continue;
        if (shdr.sh_offset > size || shdr.sh_size > size - shdr.sh_offset) {
            st = md_fail(err, MD_ERR_FORMAT, "section %zu points outside the file (offset %llu, size %llu)",
                         elf_ndxscn(scn), (unsigned long long)shdr.sh_offset,
                         (unsigned long long)shdr.sh_size);
            goto end;
        }
        /* The first of each kind: a well-formed object has one. */
        if (shdr.sh_type == SHT_DYNSYM && !dynsym)
            dynsym = scn, dynsym_shdr = shdr;
        else if (shdr.sh_type == SHT_GNU_versym && !versym)
            versym = scn;
        else if (shdr.sh_type == SHT_GNU_verneed && !verneed)
            verneed = scn, verneed_shdr = shdr;
        else if (shdr.sh_type == SHT_DYNAMIC && !dynamic)
            dynamic = scn, dynamic_shdr = shdr;
    }
    if (verneed && (st = read_verneed(elf, verneed, &verneed_shdr, &versions, &n_versions, err)) != MD_OK)
        goto end;
    for (size_t i = 0; i < n_versions; i++) {
        if (strcmp(versions[i].name, "GLIBC_PRIVATE") == 0)
            out->glibc_private = true;
        if (versions[i].is_glibc && md_glibc_version_compare(versions[i].version, out->glibc) > 0) {
            out->glibc = versions[i].version;
            size_t len = strlen(versions[i].name);
            if (len >= sizeof out->glibc_name)
                len = sizeof out->glibc_name - 1;
            memcpy(out->glibc_name, versions[i].name, len);
            out->glibc_name[len] = '\0';
        }
    }
    md_glibc_version floor = { floor_major, floor_minor, 0 };
    if (dynsym && versym) {
        st = read_symbols(elf, dynsym, &dynsym_shdr, versym, versions, n_versions, floor, out, err);
        if (st != MD_OK)
            goto end;
    }
    if (dynamic && (st = read_needed(elf, dynamic, &dynamic_shdr, out, err)) != MD_OK)
        goto end;
end:
    free(versions);
    if (elf)
        elf_end(elf);
    return st;
}

md_status md_elf_glibc_read_file(const char *path, unsigned floor_major, unsigned floor_minor,
                                 md_elf_glibc *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int saved = errno;
        close(fd);
        return md_fail(err, MD_ERR_IO, "cannot stat '%s': %s", path, strerror(saved));
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size == 0) {
        close(fd);
        return md_fail(err, S_ISREG(sb.st_mode) ? MD_ERR_UNKNOWN_TYPE : MD_ERR_IO, "'%s': %s", path,
                       S_ISREG(sb.st_mode) ? "empty file" : "not a regular file");
    }
    size_t size = (size_t)sb.st_size;
    /* Private and writable, as in inspect.c: libelf may adjust its view, the file never changes. */
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED)
        return md_fail(err, MD_ERR_IO, "cannot map '%s': %s", path, strerror(saved));
    md_error inner;
    md_error_clear(&inner);
    md_status st = md_elf_glibc_read(map, size, floor_major, floor_minor, out, &inner);
    munmap(map, size);
    if (st != MD_OK)
        md_fail(err, st, "'%s': %s", path, inner.message);
    return st;
}

md_status md_elf_check_libraries(md_elf_glibc *info, md_error *err)
{
    md_status st = md_platform_table_load(err);
    if (st != MD_OK)
        return st;
    info->n_disallowed = 0;
    for (size_t i = 0; i < info->n_needed; i++) {
        info->needed[i].allowed = md_platform_library_allowed(info->needed[i].soname);
        if (!info->needed[i].allowed)
            info->n_disallowed++;
    }
    return MD_OK;
}
