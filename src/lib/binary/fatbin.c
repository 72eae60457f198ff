/* Fatbin containers: header 0xBA55ED50, then entries each with its own header (docs/FACTS.md). */
#include "devcode.h"

#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>
#include "bytes.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define CONTAINER_HEADER_MIN 16u
#define ENTRY_HEADER_MIN 64u
#define ENTRY_KIND_PTX 1u
#define ENTRY_KIND_ELF 2u
#define FLAG_COMPRESSED_LZ4 0x3000u
#define FLAG_COMPRESSED_ZSTD 0x8000u
#define FLAG_ARCH_SPECIFIC 0x100000u
#define FLAG_FAMILY 0x200000u
/* A decompressed cubin larger than this is taken for corruption, not allocated. */
#define MAX_DECOMPRESSED ((uint64_t)1 << 30)

bool md_is_fatbin(const uint8_t *data, size_t size)
{
    return size >= 4 && md_rd32(data) == FATBIN_MAGIC;
}

/* Opens a compressed payload into a new buffer. Returns MD_OK with *out NULL when the
 * compression is one we do not open (the entry is reported without kernels). */
static md_status decompress(const uint8_t *src, size_t src_size, md_code_entry *e,
                            uint8_t **out, size_t *out_size, md_error *err)
{
    *out = NULL;
    uint64_t want = e->uncompressed_size;
    if (e->compression == MD_COMPRESS_ZSTD) {
        if (want == 0) {
            unsigned long long fs = ZSTD_getFrameContentSize(src, src_size);
            if (fs == ZSTD_CONTENTSIZE_ERROR)
                return md_fail(err, MD_ERR_FORMAT, "sm_%u entry: zstd payload is not a zstd frame", e->sm);
            if (fs == ZSTD_CONTENTSIZE_UNKNOWN) {
                snprintf(e->note, sizeof e->note, "zstd frame of unknown size not opened");
                return MD_OK;
            }
            want = fs;
        }
    } else if (want == 0) {
        snprintf(e->note, sizeof e->note, "compressed size unknown, not opened");
        return MD_OK;
    }
    if (want > MAX_DECOMPRESSED)
        return md_fail(err, MD_ERR_FORMAT, "sm_%u entry: implausible uncompressed size %llu",
                       e->sm, (unsigned long long)want);
    uint8_t *buf = malloc(want ? want : 1);
    if (!buf)
        return md_fail(err, MD_ERR_NOMEM, "out of memory for a %llu-byte cubin", (unsigned long long)want);
    if (e->compression == MD_COMPRESS_ZSTD) {
        size_t got = ZSTD_decompress(buf, want, src, src_size);
        if (ZSTD_isError(got) && ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation) {
            free(buf); /* zstd's own context could not be made: no fault of the file */
            return md_fail(err, MD_ERR_NOMEM, "out of memory opening the sm_%u zstd payload", e->sm);
        }
        if (ZSTD_isError(got) || got != want) {
            free(buf);
            return md_fail(err, MD_ERR_FORMAT, "sm_%u entry: corrupt zstd payload (%s)", e->sm,
                           ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size differs from header");
        }
    } else {
        /* The 0x2000 format is LZ4-like; where a payload does not decode as an LZ4 block we
         * report the entry without kernels rather than call a valid file corrupt. */
        if (src_size > INT32_MAX || want > INT32_MAX ||
            LZ4_decompress_safe((const char *)src, (char *)buf, (int)src_size, (int)want) != (int)want) {
            free(buf);
            snprintf(e->note, sizeof e->note, "LZ4-style payload not opened");
            return MD_OK;
        }
    }
    *out = buf;
    *out_size = want;
    return MD_OK;
}

static md_status read_entry(const uint8_t *h, size_t avail, uint64_t offset, unsigned container,
                            md_binary *bin, size_t *consumed, md_error *err)
{
    if (avail < ENTRY_HEADER_MIN)
        return md_fail(err, MD_ERR_FORMAT, "truncated fatbin entry header at offset %llu",
                       (unsigned long long)offset);
    unsigned kind = md_rd16(h);
    uint32_t header_size = md_rd32(h + 4);
    uint64_t payload_size = md_rd64(h + 8);
    uint32_t compressed_size = md_rd32(h + 16);
    unsigned minor = md_rd16(h + 24), major = md_rd16(h + 26);
    uint32_t arch = md_rd32(h + 28);
    uint64_t flags = md_rd64(h + 40);
    uint64_t uncompressed_size = md_rd64(h + 56);
    if (header_size < ENTRY_HEADER_MIN || header_size > avail)
        return md_fail(err, MD_ERR_FORMAT, "fatbin entry at offset %llu: header size %u out of range",
                       (unsigned long long)offset, header_size);
    if (payload_size > avail - header_size)
        return md_fail(err, MD_ERR_FORMAT,
                       "fatbin entry at offset %llu: payload of %llu bytes runs past its container",
                       (unsigned long long)offset, (unsigned long long)payload_size);
    *consumed = header_size + payload_size;
    if (kind != ENTRY_KIND_PTX && kind != ENTRY_KIND_ELF)
        return MD_OK; /* a kind this reader does not know: step over it */
    if (arch < 10 || arch > 999)
        return md_fail(err, MD_ERR_FORMAT, "fatbin entry at offset %llu: implausible architecture %u",
                       (unsigned long long)offset, arch);

    if (bin->n_entries >= MD_MAX_CODE_ENTRIES)
        return md_fail(err, MD_ERR_FORMAT, "fatbin entry at offset %llu: more than %u code entries in one file",
                       (unsigned long long)offset, MD_MAX_CODE_ENTRIES);
    md_code_entry *e = md_binary_add_entry(bin);
    if (!e)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    e->kind = kind == ENTRY_KIND_PTX ? MD_CODE_PTX : MD_CODE_SASS;
    e->sm = arch;
    e->variant = (flags & FLAG_ARCH_SPECIFIC) ? 'a' : (flags & FLAG_FAMILY) ? 'f' : 0;
    e->container = container;
    e->size = payload_size;
    e->compression = (flags & FLAG_COMPRESSED_ZSTD) ? MD_COMPRESS_ZSTD
                     : (flags & FLAG_COMPRESSED_LZ4) ? MD_COMPRESS_LZ4 : MD_COMPRESS_NONE;
    e->uncompressed_size = e->compression ? uncompressed_size : payload_size;
    /* Believed only when a real entry could be that big, PTX as much as SASS (a PTX entry is
     * never opened, but its size is reported): cuobjdump calls such a header invalid too. */
    if (e->compression && uncompressed_size > MAX_DECOMPRESSED)
        return md_fail(err, MD_ERR_FORMAT, "fatbin entry at offset %llu: implausible uncompressed size %llu",
                       (unsigned long long)offset, (unsigned long long)uncompressed_size);
    /* The header's version: a PTX entry's ISA (9.0, 7.8, 6.5), an ELF entry's 1.ABI (1.7, 1.8).
     * An opened cubin's own ELF header overrides the ABI; the rest stays for code left closed. */
    if (e->kind == MD_CODE_PTX && minor < 10 && major > 0 && major < 100)
        e->ptx_isa = major * 10 + minor;
    else if (e->kind == MD_CODE_SASS && major == 1 && minor < 256)
        e->cubin_abi = minor;
    md_code_entry_settle_needs(e);
    if (e->kind == MD_CODE_PTX)
        return MD_OK;

    const uint8_t *payload = h + header_size;
    if (e->compression == MD_COMPRESS_NONE)
        return md_cubin_read(payload, payload_size, e, err);
    size_t stored = compressed_size && compressed_size <= payload_size ? compressed_size : payload_size;
    uint8_t *cubin = NULL;
    size_t cubin_size = 0;
    md_status st = decompress(payload, stored, e, &cubin, &cubin_size, err);
    if (st == MD_OK && cubin)
        st = md_cubin_read(cubin, cubin_size, e, err);
    free(cubin);
    return st;
}

md_status md_fatbin_read(const uint8_t *data, size_t size, md_binary *bin, md_error *err)
{
    size_t off = 0;
    unsigned container = 0;
    while (off < size) {
        /* Containers may be padded apart with a few zeros; anything else is corruption. */
        if (data[off] == 0 && (size - off < 4 || md_rd32(data + off) != FATBIN_MAGIC)) {
            size_t run = 0;
            while (off + run < size && data[off + run] == 0 && run <= MD_FATBIN_MAX_PADDING)
                run++;
            if (off + run == size && run <= MD_FATBIN_MAX_PADDING)
                break;
            if (run > MD_FATBIN_MAX_PADDING)
                return md_fail(err, MD_ERR_FORMAT,
                               "more than %u zero bytes at offset %zu where a fatbin container should start "
                               "(%zu bytes declared)",
                               MD_FATBIN_MAX_PADDING, off, size);
            off += run;
            continue;
        }
        if (size - off < CONTAINER_HEADER_MIN || md_rd32(data + off) != FATBIN_MAGIC)
            return md_fail(err, MD_ERR_FORMAT, "%s at offset %zu",
                           size - off < CONTAINER_HEADER_MIN ? "truncated fatbin header" : "bad fatbin magic",
                           off);
        unsigned header_size = md_rd16(data + off + 6);
        uint64_t fat_size = md_rd64(data + off + 8);
        if (header_size < CONTAINER_HEADER_MIN || header_size > size - off)
            return md_fail(err, MD_ERR_FORMAT, "fatbin container at offset %zu: header size %u out of range",
                           off, header_size);
        if (fat_size > size - off - header_size)
            return md_fail(err, MD_ERR_FORMAT,
                           "truncated fatbin container at offset %zu: %llu bytes announced, %zu present",
                           off, (unsigned long long)fat_size, size - off - header_size);
        size_t pos = off + header_size, end = pos + (size_t)fat_size;
        while (pos < end) {
            size_t consumed = 0;
            md_status st = read_entry(data + pos, end - pos, pos, container, bin, &consumed, err);
            if (st != MD_OK)
                return st;
            pos += consumed;
        }
        off = end;
        container++;
    }
    bin->containers += container;
    return MD_OK;
}
