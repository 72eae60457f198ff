/* Reading the members of a zip archive (a wheel), one after another, with libarchive: the one
 * reader behind the RECORD checker, inspect and verify. Every error message names the archive
 * (and the member, where there is one). Members are streamed, never held whole, so memory stays
 * bounded whatever their size.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_ZIP_MEMBERS_H
#define MD_ZIP_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

typedef struct md_zip md_zip;

typedef enum { MD_ZIP_FILE, MD_ZIP_DIRECTORY, MD_ZIP_OTHER } md_zip_type;

typedef struct {
    const char *name;   /* '/'-separated, as stored; valid until the next md_zip_next or close */
    md_zip_type type;
    uint64_t size;      /* as the member's header says (0 when it does not say) */
} md_zip_member;

/* Opens the archive at PATH. MD_ERR_IO when PATH cannot be opened, MD_ERR_FORMAT when it is not
 * a zip archive, MD_ERR_NOMEM. On success *OUT is the reader, to be freed with md_zip_close. */
md_status md_zip_open(const char *path, md_zip **out, md_error *err);

/* The same for an open file FD, read from its start through a duplicate: FD stays the caller's.
 * PATH only names the archive in messages. */
md_status md_zip_open_fd(int fd, const char *path, md_zip **out, md_error *err);

/* Moves to the next member and describes it in *MEMBER; *END is true (and MEMBER unset) after
 * the last. MD_ERR_FORMAT when the archive is corrupt or truncated, or a member has no readable
 * name; the reader cannot go on after an error. */
md_status md_zip_next(md_zip *zip, md_zip_member *member, bool *end, md_error *err);

/* Called with each block of the current member in order; any status but MD_OK stops the read
 * and is returned (the sink fills ERR). */
typedef md_status (*md_zip_sink)(const void *data, size_t len, void *ctx, md_error *err);

/* Streams the current member's bytes to SINK; *SIZE (when not NULL) gets the number read.
 * A member can be read once; md_zip_next skips one not read. MD_ERR_FORMAT when its data is
 * corrupt (a bad checksum, a truncated archive). */
md_status md_zip_read(md_zip *zip, md_zip_sink sink, void *ctx, uint64_t *size, md_error *err);

/* Streams the current member into FD at its current offset. MD_ERR_IO when writing fails. */
md_status md_zip_read_to_fd(md_zip *zip, int fd, md_error *err);

/* Finds the member NAME in the archive at PATH and streams it into FD. MD_ERR_FORMAT naming
 * both when the archive has no such member, else as md_zip_open, md_zip_next, md_zip_read_to_fd. */
md_status md_zip_extract(const char *path, const char *name, int fd, md_error *err);

/* Frees ZIP (NULL allowed) and closes what it opened. */
void md_zip_close(md_zip *zip);

#endif
