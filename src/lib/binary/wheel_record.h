/* A wheel's RECORD: the digest it writes for a file, and the check of a whole wheel against it
 * (verify's first step). The writer is build/wheel.c; this side only reads.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_WHEEL_RECORD_H
#define MD_WHEEL_RECORD_H

#include "base/status.h"

/* 32 bytes of sha256 in base64: 44 characters with padding, 43 without. */
#define MD_WHEEL_DIGEST_SIZE 48

/* DIGEST (sha256, 32 bytes) as RECORD writes it: urlsafe base64 without padding. */
void md_wheel_record_digest(const unsigned char digest[32], char out[MD_WHEEL_DIGEST_SIZE]);

/* Reads the wheel at PATH, recomputes every member's sha256 and size and compares them with
 * its .dist-info/RECORD: each file has exactly one row, with "sha256=<urlsafe base64, no
 * padding>" and its size; no row names a missing file; RECORD's own row has empty hash and
 * size. Returns MD_OK when all agree, MD_ERR_FORMAT naming the first disagreement (or a corrupt
 * archive), MD_ERR_IO when PATH cannot be opened. */
md_status md_wheel_verify_record(const char *path, md_error *err);

#endif
