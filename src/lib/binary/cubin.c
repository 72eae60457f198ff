/* Cubins: ELF with e_machine EM_CUDA. Kernels are the functions with a .nv.info.<name>
 * section; registers come from EIATTR_REGCOUNT in .nv.info, launch bounds from
 * EIATTR_MAX_THREADS in .nv.info.<name>, static shared memory from .nv.shared.<name>. */
#include "devcode.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include "bytes.h"
#include "elf_check.h"

#define EM_CUDA_MACHINE 190
#define NVINFO_SECTION_TYPE 0x70000000u
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_ARCH_SPECIFIC 0x09 /* in .nv.compat: 1 for sm_XXa code */
#define EIATTR_REGCOUNT 0x2f
#define EIFMT_SVAL 4
#define SYSTEM_SHARED_RESERVATION 1024u
/* An ABI-7 cubin's e_version is the toolkit that wrote it, times ten (118 for 11.8); ABI 8 writes 1
 * and names the release in this note instead ("Cuda compilation tools, release 13.0, V13.0.88"). */
#define TKINFO_SECTION ".note.nv.tkinfo"
#define TKINFO_RELEASE "release "

bool md_is_cubin(const uint8_t *data, size_t size)
{
    return size >= 64 && memcmp(data, ELFMAG, SELFMAG) == 0 && data[EI_CLASS] == ELFCLASS64 &&
           md_rd16(data + 18) == EM_CUDA_MACHINE;
}

typedef struct {
    const uint8_t *value;
    unsigned attribute;
    unsigned format;
    unsigned length;  /* bytes at value */
} nvinfo_record;

/* Steps through the records of an .nv.info-style section. Returns 1 with REC filled, 0 at the
 * end, -1 when a record runs past the section. */
static int next_record(const uint8_t *data, size_t size, size_t *pos, nvinfo_record *rec)
{
    if (size - *pos < 4)
        return 0; /* the end, or alignment padding */
    const uint8_t *p = data + *pos;
    rec->format = p[0];
    rec->attribute = p[1];
    if (rec->format == EIFMT_SVAL) {
        rec->length = md_rd16(p + 2);
        rec->value = p + 4;
        if (rec->length > size - *pos - 4)
            return -1;
        *pos += 4 + rec->length;
    } else if (rec->format >= 1 && rec->format <= 3) {
        rec->length = 2;
        rec->value = p + 2;
        *pos += 4;
    } else {
        return -1;
    }
    return 1;
}

/* Kernels are gathered unsorted, then sorted once and looked up by binary search: a lookup per
 * section by linear scan made a cubin of n kernels cost n^2 (200k sections: two minutes). */
typedef struct {
    md_code_entry *e;
    size_t cap;
} kernel_list;

static md_kernel *append_kernel(kernel_list *l, const char *name)
{
    md_code_entry *e = l->e;
    if (e->n_kernels == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        md_kernel *grown = realloc(e->kernels, cap * sizeof *grown);
        if (!grown)
            return NULL;
        e->kernels = grown;
        l->cap = cap;
    }
    md_kernel *k = &e->kernels[e->n_kernels];
    memset(k, 0, sizeof *k);
    if (!(k->name = strdup(name)))
        return NULL;
    e->n_kernels++;
    return k;
}

static int compare_kernels(const void *a, const void *b)
{
    return strcmp(((const md_kernel *)a)->name, ((const md_kernel *)b)->name);
}

/* Sorts the kernels by name and merges duplicates (one kernel, two .nv.info.<name> sections). */
static void sort_kernels(md_code_entry *e)
{
    if (e->n_kernels < 2)
        return;
    qsort(e->kernels, e->n_kernels, sizeof *e->kernels, compare_kernels);
    size_t out = 0;
    for (size_t i = 1; i < e->n_kernels; i++) {
        md_kernel *last = &e->kernels[out];
        if (strcmp(last->name, e->kernels[i].name) == 0) {
            if (e->kernels[i].max_threads)
                last->max_threads = e->kernels[i].max_threads;
            free(e->kernels[i].name);
        } else {
            e->kernels[++out] = e->kernels[i];
        }
    }
    e->n_kernels = out + 1;
}

static md_kernel *find_kernel(md_code_entry *e, const char *name)
{
    md_kernel key = { .name = (char *)(uintptr_t)name };
    return e->n_kernels ? bsearch(&key, e->kernels, e->n_kernels, sizeof *e->kernels, compare_kernels) : NULL;
}

/* "X.Y" at P (at most END) as a CUDA version, 13000; 0 when it is not one. */
static unsigned release_at(const uint8_t *p, const uint8_t *end)
{
    unsigned major = 0, minor = 0;
    const uint8_t *s = p;
    while (s < end && *s >= '0' && *s <= '9' && major < 100)
        major = major * 10 + (unsigned)(*s++ - '0');
    if (s == p || s >= end || *s++ != '.' || s >= end || *s < '0' || *s > '9' || major == 0 || major >= 100)
        return 0;
    const uint8_t *m = s;
    while (s < end && *s >= '0' && *s <= '9' && minor < 100)
        minor = minor * 10 + (unsigned)(*s++ - '0');
    return s > m && minor < 100 ? major * 1000 + minor * 10 : 0;
}

/* The toolkit named in a .note.nv.tkinfo section: the first "release X.Y" in its bytes (the note's
 * description holds the tool's name, then nvcc's version line); 0 when none. */
static unsigned tkinfo_release(const uint8_t *bytes, size_t n)
{
    const size_t key = sizeof TKINFO_RELEASE - 1;
    for (size_t i = 0; n >= key && i <= n - key; i++)
        if (memcmp(bytes + i, TKINFO_RELEASE, key) == 0)
            return release_at(bytes + i + key, bytes + n);
    return 0;
}

/* The suffix of the target ptxas was given, "-arch sm_100f" in a .note.nv.tkinfo section: 'a',
 * 'f', or 0. A standalone cubin records family code nowhere else (its ELF header and .nv.compat
 * are those of plain sm_100), and some toolkits' arch-specific cubins only here. */
static char tkinfo_arch_suffix(const uint8_t *bytes, size_t n, unsigned sm)
{
    static const char key[] = "-arch sm_";
    const size_t len = sizeof key - 1;
    for (size_t i = 0; n >= len && i <= n - len; i++) {
        if (memcmp(bytes + i, key, len) != 0)
            continue;
        size_t p = i + len;
        unsigned number = 0;
        while (p < n && bytes[p] >= '0' && bytes[p] <= '9' && number < 10000)
            number = number * 10 + (unsigned)(bytes[p++] - '0');
        if (p < n && number == sm && (bytes[p] == 'a' || bytes[p] == 'f'))
            return (char)bytes[p];
        return 0;
    }
    return 0;
}

static md_status section_bytes(Elf_Scn *scn, const uint8_t **data, size_t *size)
{
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (!d || (!d->d_buf && d->d_size)) {
        *data = NULL;
        *size = 0;
        return MD_ERR_FORMAT;
    }
    *data = d->d_buf;
    *size = d->d_size;
    return MD_OK;
}

/* Every kernel must be a symbol of the symbol table: a table linked to the wrong string table
 * (a corrupt sh_link) names no kernel, and would silently leave every kernel at 0 registers. */
static md_status check_kernel_symbols(Elf *elf, Elf_Data *syms, size_t nsyms, size_t strndx,
                                      md_code_entry *e, md_error *err)
{
    if (e->n_kernels == 0)
        return MD_OK;
    bool *seen = calloc(e->n_kernels, sizeof *seen);
    if (!seen)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    size_t found = 0;
    for (size_t i = 1; i < nsyms && found < e->n_kernels; i++) {
        GElf_Sym sym;
        const char *name;
        md_kernel *k;
        if (gelf_getsym(syms, (int)i, &sym) && (name = elf_strptr(elf, strndx, sym.st_name)) &&
            (k = find_kernel(e, name)) && !seen[k - e->kernels]) {
            seen[k - e->kernels] = true;
            found++;
        }
    }
    md_status st = MD_OK;
    for (size_t i = 0; i < e->n_kernels && found < e->n_kernels; i++)
        if (!seen[i]) {
            st = md_fail(err, MD_ERR_FORMAT, "corrupt cubin: kernel '%s' (section .nv.info.%s) is not in its "
                         "symbol table (a wrong string-table link?)", e->kernels[i].name, e->kernels[i].name);
            break;
        }
    free(seen);
    return st;
}

md_status md_cubin_read(const uint8_t *data, size_t size, md_code_entry *e, md_error *err)
{
    if (!md_is_cubin(data, size))
        return md_fail(err, MD_ERR_FORMAT, "sm_%u entry: payload is not a 64-bit CUDA ELF", e->sm);
    if (elf_version(EV_CURRENT) == EV_NONE)
        return md_fail(err, MD_ERR_INTERNAL, "libelf: %s", md_elf_why("version mismatch"));
    md_status st = MD_OK;
    kernel_list kernels = { .e = e };
    errno = 0; /* md_elf_fail tells a failed allocation by it */
    /* libelf reads in place for native byte order and does not write to the image. */
    Elf *elf = elf_memory((char *)(uintptr_t)data, size);
    GElf_Ehdr ehdr;
    size_t shnum = 0, shstrndx = 0;
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr)) {
        st = md_elf_fail(err, "cubin", "not a valid ELF header (class, byte order or version)");
        goto end;
    }
    /* Headers, sections and names checked against the real size first: a truncated cubin or
     * one with a corrupt table is an error, as for cuobjdump ("Invalid ELF"), never "0 kernels". */
    if ((st = md_elf_check(elf, size, "cubin", &shnum, &shstrndx, err)) != MD_OK)
        goto end;
    if (shnum == 0) {
        st = md_fail(err, MD_ERR_FORMAT, "corrupt cubin: no section headers");
        goto end;
    }
    unsigned sm = ehdr.e_ident[EI_ABIVERSION] >= 8 ? (ehdr.e_flags >> 8) & 0xff : ehdr.e_flags & 0xff;
    if (e->sm == 0)
        e->sm = sm;
    /* Arch-specific code (sm_90a) is a bit of e_flags, where cuobjdump reads it: 0x800 up to ABI 7
     * (CUDA 12), 0x8 from ABI 8 (CUDA 13). Cubins written by NVIDIA's own assembler record it
     * nowhere else. Family code (sm_100f) has no bit: only ptxas's -arch in .note.nv.tkinfo. */
    if (!e->variant && (ehdr.e_flags & (ehdr.e_ident[EI_ABIVERSION] >= 8 ? 0x8u : 0x800u)))
        e->variant = 'a';
    e->cubin_abi = ehdr.e_ident[EI_ABIVERSION];
    /* 30 to 129: CUDA 3.0 to 12.9, the releases that wrote their version there. */
    if (e->cubin_abi < 8 && ehdr.e_version >= 30 && ehdr.e_version <= 129)
        e->toolkit = ehdr.e_version / 10 * 1000 + ehdr.e_version % 10 * 10;

    Elf_Scn *info_scn = NULL, *symtab_scn = NULL;
    GElf_Shdr symtab_shdr = { 0 };
    Elf_Scn *scn = NULL;
    /* From sm_90 on, a cubin with a .nv.shared.reserved.* section lays each kernel's shared
     * window out after a 1 KB system reservation and counts it in the section's size; ptxas -v
     * reports the kernel's own bytes, and so do we. */
    bool reserved_window = false;
    /* First pass: the kernels, launch bounds and the arch-specific mark. */
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr shdr;
        const char *name;
        if (!gelf_getshdr(scn, &shdr) || !(name = elf_strptr(elf, shstrndx, shdr.sh_name))) {
            st = md_elf_fail(err, "cubin section header", "unreadable");
            goto end;
        }
        if (shdr.sh_type == SHT_SYMTAB) {
            if (symtab_scn) {
                st = md_fail(err, MD_ERR_FORMAT, "corrupt cubin: two symbol tables");
                goto end;
            }
            symtab_scn = scn;
            symtab_shdr = shdr;
        }
        if (strncmp(name, ".nv.shared.reserved.", 20) == 0)
            reserved_window = true;
        if (strcmp(name, TKINFO_SECTION) == 0 && shdr.sh_type == SHT_NOTE) {
            const uint8_t *bytes;
            size_t n;
            if (section_bytes(scn, &bytes, &n) != MD_OK) {
                st = md_fail(err, MD_ERR_FORMAT, "cubin section '%s' unreadable: %s", name, md_elf_why("no data"));
                goto end;
            }
            unsigned release = tkinfo_release(bytes, n);
            if (release)
                e->toolkit = release;
            char suffix = tkinfo_arch_suffix(bytes, n, sm);
            if (suffix && !e->variant)
                e->variant = suffix;
            continue;
        }
        bool is_info = shdr.sh_type == NVINFO_SECTION_TYPE && strncmp(name, ".nv.info", 8) == 0;
        bool is_compat = strcmp(name, ".nv.compat") == 0;
        if (!is_info && !is_compat)
            continue;
        if (is_info && name[8] == '\0') {
            info_scn = scn;
            continue;
        }
        const uint8_t *bytes;
        size_t n;
        if (section_bytes(scn, &bytes, &n) != MD_OK) {
            st = md_fail(err, MD_ERR_FORMAT, "cubin section '%s' unreadable: %s", name, md_elf_why("no data"));
            goto end;
        }
        md_kernel *k = NULL;
        if (is_info && name[8] == '.' && !(k = append_kernel(&kernels, name + 9))) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            goto end;
        }
        size_t pos = 0;
        nvinfo_record rec;
        int r;
        while ((r = next_record(bytes, n, &pos, &rec)) == 1) {
            if (k && rec.attribute == EIATTR_MAX_THREADS && rec.format == EIFMT_SVAL && rec.length >= 12)
                k->max_threads = md_rd32(rec.value) * md_rd32(rec.value + 4) * md_rd32(rec.value + 8);
            if (is_compat && rec.attribute == EIATTR_ARCH_SPECIFIC && rec.format == 2 && rec.value[0])
                e->variant = 'a';
        }
        if (r < 0) {
            st = md_fail(err, MD_ERR_FORMAT, "cubin section '%s': record runs past the section", name);
            goto end;
        }
    }
    sort_kernels(e);

    /* Second pass: static shared memory and the pre-CUDA-12 register count in .text sh_info. */
    scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr shdr;
        const char *name;
        if (!gelf_getshdr(scn, &shdr) || !(name = elf_strptr(elf, shstrndx, shdr.sh_name)))
            continue; /* not reached: the first pass read every header */
        md_kernel *k;
        if (strncmp(name, ".nv.shared.", 11) == 0 && (k = find_kernel(e, name + 11)))
            k->shared_bytes = reserved_window && shdr.sh_size >= SYSTEM_SHARED_RESERVATION
                                  ? shdr.sh_size - SYSTEM_SHARED_RESERVATION : shdr.sh_size;
        else if (strncmp(name, ".text.", 6) == 0 && (k = find_kernel(e, name + 6)) && !k->registers)
            k->registers = (unsigned)(shdr.sh_info >> 24);
    }

    if (symtab_scn) {
        Elf_Data *syms = elf_getdata(symtab_scn, NULL);
        if (!syms) {
            st = md_fail(err, MD_ERR_FORMAT, "cubin symbol table unreadable: %s", md_elf_why("no data"));
            goto end;
        }
        size_t nsyms = syms->d_size / sizeof(Elf64_Sym);
        if ((st = check_kernel_symbols(elf, syms, nsyms, symtab_shdr.sh_link, e, err)) != MD_OK)
            goto end;
        const uint8_t *bytes;
        size_t n;
        if (info_scn && section_bytes(info_scn, &bytes, &n) != MD_OK) {
            st = md_fail(err, MD_ERR_FORMAT, "cubin section '.nv.info' unreadable: %s", md_elf_why("no data"));
            goto end;
        }
        size_t pos = 0;
        nvinfo_record rec;
        int r = 0;
        while (info_scn && (r = next_record(bytes, n, &pos, &rec)) == 1) {
            if (rec.attribute != EIATTR_REGCOUNT || rec.format != EIFMT_SVAL || rec.length < 8)
                continue;
            GElf_Sym sym;
            const char *sym_name;
            md_kernel *k;
            uint32_t index = md_rd32(rec.value);
            if (index >= nsyms || !gelf_getsym(syms, (int)index, &sym) ||
                !(sym_name = elf_strptr(elf, symtab_shdr.sh_link, sym.st_name))) {
                st = md_fail(err, MD_ERR_FORMAT, "corrupt cubin: a register count names symbol %u of %zu",
                             index, nsyms);
                goto end;
            }
            if ((k = find_kernel(e, sym_name)))
                k->registers = md_rd32(rec.value + 4);
        }
        if (r < 0) {
            st = md_fail(err, MD_ERR_FORMAT, "cubin section '.nv.info': record runs past the section");
            goto end;
        }
    } else if (info_scn) {
        st = md_fail(err, MD_ERR_FORMAT, "corrupt cubin: register counts in .nv.info but no symbol table");
        goto end;
    }
    e->kernels_read = true;
    md_code_entry_settle_needs(e);
end:
    if (elf)
        elf_end(elf);
    return st;
}
