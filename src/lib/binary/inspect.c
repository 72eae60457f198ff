#include "inspect.h"

#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "elf_check.h"
#include "zip_members.h"
#include "base/write_all.h"
#include "recipes/toolkit_table.h"

#define ZIP_MAGIC "PK\003\004"
#define ZIP_EMPTY_MAGIC "PK\005\006"

typedef enum { SOURCE_ARGUMENT, SOURCE_DIRECTORY, SOURCE_WHEEL } file_source;

static md_inspected *add_item(md_inspection *out, const char *path)
{
    /* Grown by doubling: a folder of many files costs linear time, not quadratic. */
    size_t n = out->count;
    if (n < 8 ? n == 0 : (n & (n - 1)) == 0) {
        size_t cap = n < 8 ? 8 : n * 2;
        md_inspected *grown = realloc(out->items, cap * sizeof *grown);
        if (!grown)
            return NULL;
        out->items = grown;
    }
    md_inspected *it = &out->items[out->count];
    memset(it, 0, sizeof *it);
    it->bin.path = strdup(path);
    if (!it->bin.path)
        return NULL;
    out->count++;
    return it;
}

static void drop_last_item(md_inspection *out)
{
    md_binary_free(&out->items[--out->count].bin);
}

void md_inspection_free(md_inspection *ins)
{
    for (size_t i = 0; i < ins->count; i++)
        md_binary_free(&ins->items[i].bin);
    free(ins->items);
    memset(ins, 0, sizeof *ins);
}

static bool is_zip(const uint8_t *data, size_t size)
{
    return size >= 4 && (memcmp(data, ZIP_MAGIC, 4) == 0 || memcmp(data, ZIP_EMPTY_MAGIC, 4) == 0);
}

/* A host ELF: the fatbin sections. Executables and shared objects carry .nv_fatbin; objects
 * built with -rdc carry __nv_relfatbin. */
static md_status read_host_elf(const uint8_t *data, size_t size, md_binary *bin, md_error *err)
{
    if (elf_version(EV_CURRENT) == EV_NONE)
        return md_fail(err, MD_ERR_INTERNAL, "libelf: %s", md_elf_why("version mismatch"));
    md_status st = MD_OK;
    errno = 0; /* md_elf_fail tells a failed allocation by it */
    Elf *elf = elf_memory((char *)(uintptr_t)data, size);
    size_t shstrndx;
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        st = md_elf_fail(err, "ELF file", "not a valid ELF header (class, byte order or version)");
        goto end;
    }
    /* A file cut short loses its section headers (they come last) or the data they describe;
     * libelf then shows fewer sections, so every extent is checked against the real size. */
    if ((st = md_elf_check(elf, size, "ELF file", NULL, &shstrndx, err)) != MD_OK)
        goto end;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr shdr;
        const char *name;
        if (!gelf_getshdr(scn, &shdr) || !(name = elf_strptr(elf, shstrndx, shdr.sh_name))) {
            st = md_fail(err, MD_ERR_FORMAT, "corrupt ELF section header: %s", md_elf_why("unreadable"));
            goto end;
        }
        if (strcmp(name, ".nv_fatbin") != 0 && strcmp(name, "__nv_relfatbin") != 0)
            continue;
        if (shdr.sh_type == SHT_NOBITS || shdr.sh_size == 0)
            continue;
        size_t first = bin->n_entries;
        st = md_fatbin_read(data + shdr.sh_offset, shdr.sh_size, bin, err);
        if (st != MD_OK)
            goto end;
        for (size_t i = first; i < bin->n_entries; i++)
            bin->entries[i].section = strcmp(name, ".nv_fatbin") == 0 ? ".nv_fatbin" : "__nv_relfatbin";
    }
end:
    if (elf)
        elf_end(elf);
    return st;
}

/* Reads a mapped file of a known kind. *recognised is false for anything that is not ELF,
 * fatbin or cubin (zip is handled by the caller). */
static md_status read_mapped(const uint8_t *data, size_t size, md_binary *bin, bool *recognised,
                             md_error *err)
{
    *recognised = true;
    if (md_is_fatbin(data, size)) {
        bin->type = MD_FILE_FATBIN;
        return md_fatbin_read(data, size, bin, err);
    }
    if (size >= SELFMAG && memcmp(data, ELFMAG, SELFMAG) == 0) {
        if (md_is_cubin(data, size)) {
            bin->type = MD_FILE_CUBIN;
            md_code_entry *e = md_binary_add_entry(bin);
            if (!e)
                return md_fail(err, MD_ERR_NOMEM, "out of memory");
            e->kind = MD_CODE_SASS;
            e->size = e->uncompressed_size = size;
            return md_cubin_read(data, size, e, err);
        }
        bin->type = MD_FILE_ELF;
        return read_host_elf(data, size, bin, err);
    }
    *recognised = false;
    return MD_OK;
}

static md_status read_wheel(int fd, const char *wheel_path, md_inspection *out, md_error *err);

/* What a file that is not a regular file is, for the message refusing it. */
static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
           : S_ISSOCK(mode) ? "a socket" : S_ISLNK(mode) ? "a symbolic link" : "not a regular file";
}

/* Reads the open file FD (closed by the caller) shown as PATH. */
static md_status inspect_fd(int fd, const char *path, file_source source, md_inspection *out,
                            md_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return md_fail(err, MD_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    md_inspected *it = add_item(out, path);
    if (!it)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    if (!S_ISREG(st.st_mode) || st.st_size == 0) {
        if (source == SOURCE_ARGUMENT) {
            it->status = MD_ERR_UNKNOWN_TYPE;
            if (S_ISREG(st.st_mode))
                snprintf(it->message, sizeof it->message, "'%s': empty file", path);
            else
                snprintf(it->message, sizeof it->message, "'%s': %s, not a regular file", path,
                         file_kind(st.st_mode));
        } else {
            drop_last_item(out);
            out->skipped++;
        }
        return MD_OK;
    }
    size_t size = (size_t)st.st_size;
    /* Private and writable: libelf may adjust its view; the file is never changed. Pages are
     * read on demand, so a 1 GB library costs only what is touched. */
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        it->status = MD_ERR_IO;
        snprintf(it->message, sizeof it->message, "cannot map '%s': %s", path, strerror(errno));
        return MD_OK;
    }
    const uint8_t *data = map;
    md_error ferr;
    md_error_clear(&ferr);
    bool recognised = false;
    md_status rc = MD_OK;
    if (is_zip(data, size)) {
        munmap(map, size);
        drop_last_item(out); /* the members are the items */
        size_t before = out->count;
        rc = read_wheel(fd, path, out, err);
        if (rc == MD_OK && out->count == before && source == SOURCE_ARGUMENT) {
            /* A wheel without GPU code is still worth one line. */
            if (!(it = add_item(out, path)))
                return md_fail(err, MD_ERR_NOMEM, "out of memory");
            it->bin.type = MD_FILE_WHEEL;
        }
        return rc;
    }
    rc = read_mapped(data, size, &it->bin, &recognised, &ferr);
    munmap(map, size);
    if (rc == MD_ERR_NOMEM)
        return md_fail(err, rc, "%s", ferr.message);
    if (!recognised || (source == SOURCE_DIRECTORY && rc == MD_OK && it->bin.n_entries == 0)) {
        if (source == SOURCE_ARGUMENT) {
            it->status = MD_ERR_UNKNOWN_TYPE;
            snprintf(it->message, sizeof it->message,
                     "'%s': not an ELF file, fatbin, cubin or wheel", path);
        } else {
            drop_last_item(out);
            out->skipped++;
        }
        return MD_OK;
    }
    if (rc != MD_OK) {
        it->status = rc;
        snprintf(it->message, sizeof it->message, "'%s': %s", path, ferr.message);
    }
    return MD_OK;
}

static bool is_code_member(const char *name)
{
    size_t n = strlen(name);
    return (n > 3 && strcmp(name + n - 3, ".so") == 0) || strstr(name, ".so.") ||
           (n > 6 && strcmp(name + n - 6, ".cubin") == 0) ||
           (n > 7 && strcmp(name + n - 7, ".fatbin") == 0);
}

/* The largest wheel member spooled to disk: four times the largest CUDA library seen in a wheel
 * (libtorch_cuda.so, 520 MB), so that a zip bomb (a few kB that inflate to gigabytes) cannot
 * fill TMPDIR. MSDA_MAX_MEMBER_SIZE changes it (documented in the man page). */
#define MEMBER_MAX_DEFAULT ((uint64_t)2 << 30)

/* MSDA_MAX_MEMBER_SIZE: bytes, with an optional K, M or G (powers of 1024); anything else is
 * ignored for the default rather than taken for a limit nobody meant. */
static uint64_t member_max(void)
{
    const char *s = getenv("MSDA_MAX_MEMBER_SIZE");
    if (!s || !*s)
        return MEMBER_MAX_DEFAULT;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *end || *s == '-' || v == 0 || v > (UINT64_MAX >> shift))
        return MEMBER_MAX_DEFAULT;
    return (uint64_t)v << shift;
}

typedef struct {
    int fd;
    uint64_t written, max;
    bool over;            /* stopped at the limit, not by an error */
    const char *member_path;
    const char *dir;
} spool_sink;

static md_status spool_block(const void *data, size_t len, void *ctx, md_error *err)
{
    spool_sink *to = ctx;
    /* The header's size can lie: count what really comes out of the inflater. */
    if (len > to->max - to->written) {
        to->over = true;
        return md_fail(err, MD_ERR_FORMAT, "'%s': member inflates past the %llu-byte limit on wheel members "
                       "(MSDA_MAX_MEMBER_SIZE)", to->member_path, (unsigned long long)to->max);
    }
    int e = md_write_all(to->fd, data, len);
    if (e != 0)
        return md_fail(err, MD_ERR_IO, "cannot write a temporary file in '%s' for '%s': %s", to->dir,
                       to->member_path, strerror(e));
    to->written += len;
    return MD_OK;
}

/* Streams the current member M into an unlinked temporary file under TMPDIR (else /tmp), to be
 * mapped like any file; members larger than member_max() are refused, by their header's size
 * before anything is written and by the bytes counted while writing. Returns the descriptor,
 * or -1 with ERR set; *TOO_BIG tells a refused size (the archive can still be read past it)
 * from a corrupt member. */
static int spool_member(md_zip *zip, const md_zip_member *m, const char *member_path, bool *too_big,
                        md_error *err)
{
    *too_big = false;
    spool_sink to = { .fd = -1, .max = member_max(), .member_path = member_path };
    if (m->size > to.max) {
        *too_big = true;
        md_fail(err, MD_ERR_FORMAT, "'%s': member of %llu bytes is over the %llu-byte limit on wheel members "
                "(MSDA_MAX_MEMBER_SIZE)", member_path, (unsigned long long)m->size, (unsigned long long)to.max);
        return -1;
    }
    const char *dir = getenv("TMPDIR");
    to.dir = dir && *dir ? dir : "/tmp";
    char name[4096];
    if ((size_t)snprintf(name, sizeof name, "%s/msda-doctor-XXXXXX", to.dir) >= sizeof name) {
        md_fail(err, MD_ERR_IO, "'%s': TMPDIR '%.64s...' is too long", member_path, to.dir);
        return -1;
    }
    to.fd = mkostemp(name, O_CLOEXEC);
    if (to.fd < 0) {
        md_fail(err, MD_ERR_IO, "'%s': cannot create a temporary file in '%s': %s", member_path, to.dir,
                strerror(errno));
        return -1;
    }
    unlink(name); /* gone when closed, whatever happens to us */
    md_status st = md_zip_read(zip, spool_block, &to, NULL, err);
    if (st != MD_OK) {
        *too_big = to.over;
        close(to.fd);
        return -1;
    }
    return to.fd;
}

/* Sets the wheel's own item to its error: the archive cannot be read past it. */
static md_status wheel_failed(md_inspection *out, const char *wheel_path, const md_error *why, md_error *err)
{
    md_inspected *it = add_item(out, wheel_path);
    if (!it)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    it->status = why->code;
    snprintf(it->message, sizeof it->message, "%s", why->message);
    return MD_OK;
}

static md_status read_wheel(int fd, const char *wheel_path, md_inspection *out, md_error *err)
{
    md_error zerr;
    md_error_clear(&zerr);
    md_zip *zip;
    md_status st = md_zip_open_fd(fd, wheel_path, &zip, &zerr);
    if (st == MD_ERR_NOMEM)
        return md_fail(err, st, "%s", zerr.message);
    if (st != MD_OK)
        return wheel_failed(out, wheel_path, &zerr, err);
    md_zip_member m;
    bool end = false;
    while ((st = md_zip_next(zip, &m, &end, &zerr)) == MD_OK && !end) {
        if (m.type != MD_ZIP_FILE || !is_code_member(m.name))
            continue;
        char member_path[4096];
        snprintf(member_path, sizeof member_path, "%s!%s", wheel_path, m.name);
        bool too_big;
        int mfd = spool_member(zip, &m, member_path, &too_big, &zerr);
        if (mfd < 0) {
            md_inspected *it = add_item(out, member_path);
            if (!it) {
                st = md_fail(err, MD_ERR_NOMEM, "out of memory");
                goto end;
            }
            it->status = zerr.code;
            snprintf(it->message, sizeof it->message, "%s", zerr.message);
            st = MD_OK;
            /* The archive stream cannot be trusted past a corrupt member, and a temporary file
             * that cannot be created or written fails the same way for every member. */
            if ((zerr.code == MD_ERR_FORMAT && !too_big) || zerr.code == MD_ERR_IO)
                goto end;
            continue;
        }
        st = inspect_fd(mfd, member_path, SOURCE_WHEEL, out, err);
        close(mfd);
        if (st != MD_OK)
            goto end;
    }
    if (st == MD_ERR_NOMEM)
        st = md_fail(err, st, "%s", zerr.message);
    else if (st != MD_OK)
        st = wheel_failed(out, wheel_path, &zerr, err);
end:
    md_zip_close(zip);
    return st;
}

static int compare_fts(const FTSENT **a, const FTSENT **b)
{
    return strcmp((*a)->fts_name, (*b)->fts_name);
}

static md_status inspect_directory(const char *path, md_inspection *out, md_error *err)
{
    char *roots[] = { (char *)(uintptr_t)path, NULL };
    FTS *fts = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR, compare_fts);
    if (!fts)
        return md_fail(err, MD_ERR_IO, "cannot read directory '%s': %s", path, strerror(errno));
    md_status st = MD_OK;
    FTSENT *ent;
    while (st == MD_OK && (ent = fts_read(fts)) != NULL) {
        if (ent->fts_info == FTS_DNR || ent->fts_info == FTS_ERR) {
            md_inspected *it = add_item(out, ent->fts_path);
            if (!it) {
                st = md_fail(err, MD_ERR_NOMEM, "out of memory");
                break;
            }
            it->status = MD_ERR_IO;
            snprintf(it->message, sizeof it->message, "cannot read '%s': %s", ent->fts_path,
                     strerror(ent->fts_errno));
            continue;
        }
        if (ent->fts_info != FTS_F)
            continue;
        /* fts saw a regular file; O_NOFOLLOW and O_NONBLOCK keep a file swapped since for a link
         * or a FIFO from being followed or waited on (inspect_fd skips what is not regular). */
        int fd = open(ent->fts_accpath, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        if (fd < 0) {
            md_inspected *it = add_item(out, ent->fts_path);
            if (!it) {
                st = md_fail(err, MD_ERR_NOMEM, "out of memory");
                break;
            }
            it->status = MD_ERR_IO;
            snprintf(it->message, sizeof it->message, "cannot open '%s': %s", ent->fts_path,
                     strerror(errno));
            continue;
        }
        st = inspect_fd(fd, ent->fts_path, SOURCE_DIRECTORY, out, err);
        close(fd);
    }
    fts_close(fts);
    return st;
}

md_status md_inspect_path(const char *path, md_inspection *out, md_error *err)
{
    /* The table each entry's driver need comes from, loaded here where a failure is an error:
     * loaded lazily by the readers, a failed allocation would read as "need unknown". */
    md_status loaded = md_toolkit_table_load(err);
    if (loaded != MD_OK)
        return loaded;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return inspect_directory(path, out, err);
    /* Refused by type before opening: opening a FIFO waits for a writer (for ever), a device
     * may have side effects. stat follows links, so a link to a library still works. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        md_inspected *it = add_item(out, path);
        if (!it)
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        it->status = MD_ERR_UNKNOWN_TYPE;
        snprintf(it->message, sizeof it->message, "'%s': %s, not a regular file", path, file_kind(st.st_mode));
        return MD_OK;
    }
    /* O_NONBLOCK: should the file become a FIFO between stat and open, open does not wait;
     * inspect_fd checks the type of what was opened. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        md_inspected *it = add_item(out, path);
        if (!it)
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        it->status = MD_ERR_IO;
        snprintf(it->message, sizeof it->message, "cannot open '%s': %s", path, strerror(errno));
        return MD_OK;
    }
    md_status rc = inspect_fd(fd, path, SOURCE_ARGUMENT, out, err);
    close(fd);
    return rc;
}
