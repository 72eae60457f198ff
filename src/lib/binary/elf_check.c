#include "elf_check.h"

#include <errno.h>

#include <gelf.h>
#include <stdio.h>
#include <string.h>

#define SHT_CUDA_NOBITS 0x7000000au

const char *md_elf_why(const char *fallback)
{
    int e = elf_errno();
    return e ? elf_errmsg(e) : fallback;
}

md_status md_elf_fail(md_error *err, const char *kind, const char *fallback)
{
    /* libelf calls its failed allocations errors of the file; only errno tells them apart. */
    if (errno == ENOMEM) {
        (void)elf_errno(); /* clears it */
        return md_fail(err, MD_ERR_NOMEM, "out of memory reading the %s", kind);
    }
    return md_fail(err, MD_ERR_FORMAT, "corrupt %s: %s", kind, md_elf_why(fallback));
}

/* Whether [OFFSET, OFFSET + COUNT * ENTSIZE) lies inside SIZE bytes, without overflow. */
static int table_fits(uint64_t offset, uint64_t count, uint64_t entsize, size_t size)
{
    if (offset > size)
        return 0;
    return entsize == 0 || count <= (size - offset) / entsize;
}

md_status md_elf_check(Elf *elf, size_t size, const char *kind, size_t *shnum_out,
                       size_t *shstrndx_out, md_error *err)
{
    GElf_Ehdr ehdr;
    if (!gelf_getehdr(elf, &ehdr)) {
        char what[64];
        snprintf(what, sizeof what, "%s header", kind);
        return md_elf_fail(err, what, "not a valid ELF header (class, byte order or version)");
    }
    int cls = gelf_getclass(elf);
    uint64_t shdr_size = cls == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
    uint64_t phdr_size = cls == ELFCLASS64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
    /* PN_XNUM (0xffff) moves the count into section 0; no reader here uses program headers
     * then, so only a plain count is checked. */
    if (ehdr.e_phnum && ehdr.e_phnum != 0xffff &&
        (ehdr.e_phentsize != phdr_size || !table_fits(ehdr.e_phoff, ehdr.e_phnum, phdr_size, size)))
        return md_fail(err, MD_ERR_FORMAT, "truncated or corrupt %s: program headers (%u of %u bytes at "
                       "offset %llu) end past its %zu bytes", kind, (unsigned)ehdr.e_phnum, (unsigned)ehdr.e_phentsize,
                       (unsigned long long)ehdr.e_phoff, size);
    size_t shnum = 0, shstrndx = 0;
    if (ehdr.e_shoff != 0) {
        /* Section 0 must be there before libelf reads the extended count from it. */
        if (ehdr.e_shentsize != shdr_size || !table_fits(ehdr.e_shoff, 1, shdr_size, size))
            return md_fail(err, MD_ERR_FORMAT, "truncated or corrupt %s: section headers (entry size %u) "
                           "at offset %llu, past its %zu bytes", kind, (unsigned)ehdr.e_shentsize,
                           (unsigned long long)ehdr.e_shoff, size);
        /* The header's own count: libelf says 0 sections when the table is cut off. Past 0xff00
         * sections e_shnum is 0 and section 0 holds the count, which libelf reads. */
        shnum = ehdr.e_shnum;
        if (shnum == 0 && (elf_getshdrnum(elf, &shnum) != 0 || shnum == 0))
            return md_fail(err, MD_ERR_FORMAT, "truncated or corrupt %s: the section count in section 0 "
                           "is unreadable: %s", kind, md_elf_why("0, or the table does not fit the file"));
        if (!table_fits(ehdr.e_shoff, shnum, shdr_size, size))
            return md_fail(err, MD_ERR_FORMAT, "truncated %s: %zu section headers at offset %llu end past "
                           "its %zu bytes", kind, shnum, (unsigned long long)ehdr.e_shoff, size);
    } else if (ehdr.e_shnum != 0) {
        return md_fail(err, MD_ERR_FORMAT, "corrupt %s: %u section headers at offset 0", kind,
                       (unsigned)ehdr.e_shnum);
    }
    if (shnum > 0) {
        if (elf_getshdrstrndx(elf, &shstrndx) != 0 || shstrndx == 0 || shstrndx >= shnum)
            return md_fail(err, MD_ERR_FORMAT, "corrupt %s: section-name table index %zu out of range "
                           "(%zu sections)", kind, shstrndx, shnum);
        GElf_Shdr strh;
        if (!gelf_getshdr(elf_getscn(elf, shstrndx), &strh) || strh.sh_type != SHT_STRTAB)
            return md_fail(err, MD_ERR_FORMAT, "corrupt %s: section %zu, named as the section-name table, "
                           "is not a string table", kind, shstrndx);
        /* Checked before the names are read from it, so that the message says what is wrong. */
        if (strh.sh_offset > size || strh.sh_size > size - strh.sh_offset)
            return md_fail(err, MD_ERR_FORMAT, "truncated or corrupt %s: the section-name table (offset %llu, "
                           "size %llu) ends past its %zu bytes", kind, (unsigned long long)strh.sh_offset,
                           (unsigned long long)strh.sh_size, size);
    }
    size_t seen = 1;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        size_t index = elf_ndxscn(scn);
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr))
            return md_fail(err, MD_ERR_FORMAT, "corrupt %s section header %zu: %s", kind, index,
                           md_elf_why("unreadable"));
        const char *name = shnum ? elf_strptr(elf, shstrndx, shdr.sh_name) : NULL;
        if (!name)
            return md_fail(err, MD_ERR_FORMAT, "corrupt %s: the name of section %zu is outside the "
                           "section-name table", kind, index);
        /* Type 0x7000000a (.nv_debug.shared in NCCL 2.30's cubins) occupies no file space, like
         * SHT_NOBITS: its offset and size describe memory, and nothing here reads it. */
        if (shdr.sh_type != SHT_NOBITS && shdr.sh_type != SHT_NULL && shdr.sh_type != SHT_CUDA_NOBITS &&
            (shdr.sh_offset > size || shdr.sh_size > size - shdr.sh_offset))
            return md_fail(err, MD_ERR_FORMAT, "truncated or corrupt %s: section %zu '%s' (type %#x, offset %llu, size "
                           "%llu) ends past its %zu bytes", kind, index, name, (unsigned)shdr.sh_type, (unsigned long long)shdr.sh_offset,
                           (unsigned long long)shdr.sh_size, size);
        if (shdr.sh_type == SHT_SYMTAB || shdr.sh_type == SHT_DYNSYM) {
            uint64_t sym_size = cls == ELFCLASS64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
            GElf_Shdr linked;
            if (shdr.sh_link == 0 || shdr.sh_link >= shnum ||
                !gelf_getshdr(elf_getscn(elf, shdr.sh_link), &linked) || linked.sh_type != SHT_STRTAB)
                return md_fail(err, MD_ERR_FORMAT, "corrupt %s: symbol table (section %zu) links to section %u, "
                               "which is not a string table", kind, index, (unsigned)shdr.sh_link);
            if (shdr.sh_entsize != sym_size || shdr.sh_size % sym_size != 0)
                return md_fail(err, MD_ERR_FORMAT, "corrupt %s: symbol table (section %zu) of %llu bytes "
                               "is not a whole number of %llu-byte entries", kind, index,
                               (unsigned long long)shdr.sh_size, (unsigned long long)sym_size);
        }
        seen++;
    }
    if (shnum > 0 && seen != shnum)
        return md_fail(err, MD_ERR_FORMAT, "corrupt %s: %zu sections announced, %zu readable", kind, shnum, seen);
    if (shnum_out)
        *shnum_out = shnum;
    if (shstrndx_out)
        *shstrndx_out = shstrndx;
    return MD_OK;
}
