/* Which code images the embedded fatbins carry, read from their headers (layout: docs/FACTS.md,
 * "Fatbin and cubin format"): containers of magic 0xBA55ED50, each a run of entries. */
#include <stdio.h>
#include <string.h>

#include "msda_internal.h"
#include "msda_module.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define ENTRY_PTX 1
#define ENTRY_ELF 2

static uint64_t rd(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* One image per architecture and kind within a fatbin (nvcc's own libraries repeat each in a
 * device-link container); the same architecture from two toolkits is two fatbins, two images. */
static int add_arch(msda_arch *out, int cap, int count, msda_arch a) {
    for (int i = 0; i < count && i < cap; i++)
        if (out[i].arch == a.arch && out[i].is_ptx == a.is_ptx && out[i].fatbin == a.fatbin) return count;
    if (count < cap) out[count] = a;
    return count + 1;
}

/* Entries of one fatbin; returns the new count or -1 if the headers are inconsistent. */
static int scan_fatbin(const unsigned char *p, uint64_t size, int index, msda_arch *out, int cap,
                       int count) {
    uint64_t at = 0;
    while (at + 16 <= size) {
        if (rd(p + at, 4) != FATBIN_MAGIC) break; /* zero padding after the last container */
        const uint64_t header = rd(p + at + 6, 2), body = rd(p + at + 8, 8);
        if (header < 16 || body > size - at - header) return -1;
        uint64_t e = at + header;
        const uint64_t end = e + body;
        while (e + 32 <= end) {
            const uint64_t kind = rd(p + e, 2), eh = rd(p + e + 4, 4), payload = rd(p + e + 8, 8);
            if (eh < 32 || eh > end - e || payload > end - e - eh) return -1;
            if (kind == ENTRY_PTX || kind == ENTRY_ELF) {
                const msda_arch a = {(int)rd(p + e + 28, 4), kind == ENTRY_PTX, index};
                count = add_arch(out, cap, count, a);
            }
            e += eh + payload;
        }
        at = end;
    }
    return count;
}

int msda_fatbin_count(void) { return (int)msda_fatbin_table_count; }

int msda_fatbin_runs_on(uint32_t index, int cc) {
    msda_arch images[64];
    if (index >= msda_fatbin_table_count) return 0;
    /* Every part holds the same architectures (msda_parts.h): the first says. */
    const msda_fatbin_blob *blob = &msda_fatbin_table[index].blobs[0];
    const int n = msda_fatbin_table[index].parts ? scan_fatbin(blob->data, blob->size, (int)index, images, 64, 0) : -1;
    if (n < 0 || n > 64) return -1;
    for (int i = 0; i < n; i++) {
        const int a = images[i].arch;
        if (images[i].is_ptx ? a <= cc : a / 10 == cc / 10 && a <= cc) return 1;
    }
    return 0;
}

/* More distinct images than this are not expected (CUDA 13 has 12 SASS targets). */
#define MAX_IMAGES 256

int msda_embedded_archs(msda_arch *out, int cap) {
    msda_arch all[MAX_IMAGES];
    int count = 0;
    for (uint32_t i = 0; i < msda_fatbin_table_count; i++) {
        for (uint32_t p = 0; p < msda_fatbin_table[i].parts && count >= 0; p++)
            count = scan_fatbin(msda_fatbin_table[i].blobs[p].data, msda_fatbin_table[i].blobs[p].size, (int)i, all,
                                MAX_IMAGES, count);
        if (count < 0) return -1;
    }
    const int kept = count < MAX_IMAGES ? count : MAX_IMAGES;
    if (out && cap > 0) memcpy(out, all, sizeof(msda_arch) * (size_t)(kept < cap ? kept : cap));
    return count;
}

int msda_embedded_archs_string(char *buf, size_t size) {
    msda_arch archs[MAX_IMAGES];
    char text[MAX_IMAGES * 16];
    const int n = msda_embedded_archs(archs, MAX_IMAGES);
    if (n < 0) return -1;
    size_t len = 0;
    text[0] = '\0';
    for (int i = 0; i < n && i < MAX_IMAGES; i++) {
        int seen = 0; /* an architecture two toolkits wrote is named once */
        for (int k = 0; k < i && !seen; k++) seen = archs[k].arch == archs[i].arch && archs[k].is_ptx == archs[i].is_ptx;
        if (!seen)
            len += (size_t)snprintf(text + len, sizeof text - len, "%s%s_%d", len ? " " : "",
                                    archs[i].is_ptx ? "compute" : "sm", archs[i].arch);
    }
    return snprintf(buf, size, "%s", text);
}
