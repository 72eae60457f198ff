/* Little-endian reads from byte buffers whose bounds the caller has checked.
 * Scope: private to src/lib/binary. */
#ifndef MD_BYTES_H
#define MD_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint16_t md_rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t md_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t md_rd64(const uint8_t *p)
{
    return (uint64_t)md_rd32(p) | ((uint64_t)md_rd32(p + 4) << 32);
}

#endif
