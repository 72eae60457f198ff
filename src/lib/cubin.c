/* Cubins: ELF with e_machine EM_CUDA. Kernels are the functions with a .nv.info.<name>
 * section; registers come from EIATTR_REGCOUNT in .nv.info, launch bounds from
 * EIATTR_MAX_THREADS in .nv.info.<name>, static shared memory from .nv.shared.<name>. */
#include "devcode.h"

#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include "bytes.h"

#define EM_CUDA_MACHINE 190
#define NVINFO_SECTION_TYPE 0x70000000u
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_ARCH_SPECIFIC 0x09 /* in .nv.compat: 1 for sm_XXa code */
#define EIATTR_REGCOUNT 0x2f
#define EIFMT_SVAL 4
#define SYSTEM_SHARED_RESERVATION 1024u

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

static md_kernel *find_kernel(md_code_entry *e, const char *name)
{
    for (size_t i = 0; i < e->n_kernels; i++)
        if (strcmp(e->kernels[i].name, name) == 0)
            return &e->kernels[i];
    return NULL;
}

static md_kernel *add_kernel(md_code_entry *e, const char *name)
{
    md_kernel *k = find_kernel(e, name);
    if (k)
        return k;
    md_kernel *grown = realloc(e->kernels, (e->n_kernels + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    e->kernels = grown;
    k = &e->kernels[e->n_kernels];
    memset(k, 0, sizeof *k);
    k->name = strdup(name);
    if (!k->name)
        return NULL;
    e->n_kernels++;
    return k;
}

static int compare_kernels(const void *a, const void *b)
{
    return strcmp(((const md_kernel *)a)->name, ((const md_kernel *)b)->name);
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

md_status md_cubin_read(const uint8_t *data, size_t size, md_code_entry *e, md_error *err)
{
    if (!md_is_cubin(data, size))
        return md_fail(err, MD_ERR_FORMAT, "sm_%u entry: payload is not a 64-bit CUDA ELF", e->sm);
    if (elf_version(EV_CURRENT) == EV_NONE)
        return md_fail(err, MD_ERR_INTERNAL, "libelf: %s", elf_errmsg(-1));
    md_status st = MD_OK;
    /* libelf reads in place for native byte order and does not write to the image. */
    Elf *elf = elf_memory((char *)(uintptr_t)data, size);
    GElf_Ehdr ehdr;
    size_t shstrndx;
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr) ||
        elf_getshdrstrndx(elf, &shstrndx) != 0) {
        st = md_fail(err, MD_ERR_FORMAT, "corrupt cubin: %s", elf_errmsg(-1));
        goto end;
    }
    unsigned sm = ehdr.e_ident[EI_ABIVERSION] >= 8 ? (ehdr.e_flags >> 8) & 0xff : ehdr.e_flags & 0xff;
    if (e->sm == 0)
        e->sm = sm;

    Elf_Scn *info_scn = NULL, *symtab_scn = NULL;
    GElf_Shdr symtab_shdr = { 0 };
    Elf_Scn *scn = NULL;
    /* First pass: the kernels, launch bounds and the arch-specific mark. */
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr shdr;
        const char *name;
        if (!gelf_getshdr(scn, &shdr) || !(name = elf_strptr(elf, shstrndx, shdr.sh_name))) {
            st = md_fail(err, MD_ERR_FORMAT, "corrupt cubin section header: %s", elf_errmsg(-1));
            goto end;
        }
        if (shdr.sh_type == SHT_SYMTAB) {
            symtab_scn = scn;
            symtab_shdr = shdr;
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
            st = md_fail(err, MD_ERR_FORMAT, "cubin section '%s' unreadable: %s", name, elf_errmsg(-1));
            goto end;
        }
        md_kernel *k = NULL;
        if (is_info && name[8] == '.' && !(k = add_kernel(e, name + 9))) {
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

    /* Second pass: static shared memory and the pre-CUDA-12 register count in .text sh_info.
     * From sm_90 on, a cubin with a .nv.shared.reserved.* section lays each kernel's shared
     * window out after a 1 KB system reservation and counts it in the section's size; ptxas -v
     * reports the kernel's own bytes, and so do we. */
    bool reserved_window = false;
    scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr shdr;
        const char *name;
        if (gelf_getshdr(scn, &shdr) && (name = elf_strptr(elf, shstrndx, shdr.sh_name)) &&
            strncmp(name, ".nv.shared.reserved.", 20) == 0)
            reserved_window = true;
    }
    scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr shdr;
        const char *name;
        if (!gelf_getshdr(scn, &shdr) || !(name = elf_strptr(elf, shstrndx, shdr.sh_name)))
            continue;
        md_kernel *k;
        if (strncmp(name, ".nv.shared.", 11) == 0 && (k = find_kernel(e, name + 11)))
            k->shared_bytes = reserved_window && shdr.sh_size >= SYSTEM_SHARED_RESERVATION
                                  ? shdr.sh_size - SYSTEM_SHARED_RESERVATION : shdr.sh_size;
        else if (strncmp(name, ".text.", 6) == 0 && (k = find_kernel(e, name + 6)) && !k->registers)
            k->registers = (unsigned)(shdr.sh_info >> 24);
    }

    if (info_scn && symtab_scn) {
        const uint8_t *bytes;
        size_t n;
        Elf_Data *syms = elf_getdata(symtab_scn, NULL);
        if (section_bytes(info_scn, &bytes, &n) != MD_OK || !syms) {
            st = md_fail(err, MD_ERR_FORMAT, "cubin .nv.info or symbol table unreadable");
            goto end;
        }
        size_t pos = 0;
        nvinfo_record rec;
        int r;
        while ((r = next_record(bytes, n, &pos, &rec)) == 1) {
            if (rec.attribute != EIATTR_REGCOUNT || rec.format != EIFMT_SVAL || rec.length < 8)
                continue;
            GElf_Sym sym;
            const char *sym_name;
            md_kernel *k;
            uint32_t index = md_rd32(rec.value);
            if (index < syms->d_size / sizeof(Elf64_Sym) && gelf_getsym(syms, (int)index, &sym) &&
                (sym_name = elf_strptr(elf, symtab_shdr.sh_link, sym.st_name)) &&
                (k = find_kernel(e, sym_name)))
                k->registers = md_rd32(rec.value + 4);
        }
        if (r < 0) {
            st = md_fail(err, MD_ERR_FORMAT, "cubin section '.nv.info': record runs past the section");
            goto end;
        }
    }
    if (e->n_kernels > 1)
        qsort(e->kernels, e->n_kernels, sizeof *e->kernels, compare_kernels);
    e->kernels_read = true;
end:
    if (elf)
        elf_end(elf);
    return st;
}
