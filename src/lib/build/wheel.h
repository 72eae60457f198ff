/* Python wheels (docs/FACTS.md, "Wheels"): the manylinux platform tag, the file name and a
 * reproducible writer (the RECORD checker is binary/wheel_record.h). The zip itself is
 * libarchive's; hashes and base64 are OpenSSL's.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_WHEEL_H
#define MD_WHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "base/status.h"

/* Room for any tag md_wheel_platform_tag writes. */
#define MD_WHEEL_TAG_MAX 128

/* The timestamp used when the caller gives none: 2024-01-01T00:00:00Z. */
#define MD_WHEEL_DEFAULT_EPOCH ((time_t)1704067200)
/* Zip (DOS) timestamps cannot say anything earlier than 1980-01-01T00:00:00Z. */
#define MD_WHEEL_MIN_EPOCH ((time_t)315532800)

/* Writes into TAG (SIZE bytes) the platform tag for a wheel whose code needs glibc
 * GLIBC_MAJOR.GLIBC_MINOR at most, on CPU ARCH ("x86_64" or "aarch64"):
 * "manylinux_2_17_x86_64.manylinux2014_x86_64" for any floor up to 2.17 (PEP 600 with its
 * PEP 599 alias), else "manylinux_2_<minor>_<arch>". A floor of 0.0 means "no glibc version
 * needed" (what md_elf_glibc_read reports then) and gives the 2.17 tag.
 * MD_ERR_ARGUMENT for another arch, a major other than 2, or a TAG too small. */
md_status md_wheel_platform_tag(const char *arch, unsigned glibc_major, unsigned glibc_minor,
                                char *tag, size_t size, md_error *err);

/* One member of the wheel. Exactly one of source_path and data is used: with source_path
 * non-NULL the bytes are read from that file at write time, else the SIZE bytes at DATA. */
typedef struct {
    const char *path;        /* inside the wheel, '/'-separated: "msda/libmsda.so" */
    const char *source_path; /* a file on disk, or NULL */
    const void *data;        /* in-memory bytes when source_path is NULL (NULL allowed if size is 0) */
    size_t size;
    bool executable;         /* 0755 rather than 0644 */
} md_wheel_file;

typedef struct {
    const char *dist;            /* distribution name as published: "msda" */
    const char *version;         /* PEP 440, e.g. "0.1.0" */
    const char *python_tag;      /* "py3" (may be a '.'-joined set) */
    const char *abi_tag;         /* "none" */
    const char *platform_tag;    /* from md_wheel_platform_tag; a '.'-joined set gives one Tag
                                  * line per member */
    const char *output_dir;      /* where the .whl is created; must exist */
    const char *summary;         /* METADATA Summary, or NULL */
    const char *requires_python; /* METADATA Requires-Python (">=3.8"), or NULL */
    const char *const *requires_dist; /* METADATA Requires-Dist lines, or NULL */
    size_t n_requires_dist;
    const char *description;     /* METADATA body (after a blank line), or NULL */
    const char *description_content_type; /* "text/markdown", or NULL */
    const md_wheel_file *files;  /* the payload; .dist-info METADATA, WHEEL and RECORD are
                                  * generated and may not be given */
    size_t n_files;
    time_t source_date_epoch;    /* every member's mtime; 0 means MD_WHEEL_DEFAULT_EPOCH, and
                                  * anything before MD_WHEEL_MIN_EPOCH is raised to it */
} md_wheel_spec;

/* Writes OUTPUT_DIR/{dist}-{version}-{python}-{abi}-{platform}.whl, with the dist name's runs
 * of "-_." replaced by "_". Members are sorted by path with the .dist-info files after the
 * rest and RECORD last; all have the same mtime, uid/gid 0, mode 0644 (0755 for executables)
 * and are deflated, so the same inputs give the same bytes in any time zone (zip's DOS
 * timestamps are local time: the writer runs libarchive in UTC and puts TZ back after).
 * The archive is written to a hidden temporary file in OUTPUT_DIR and renamed into place only
 * when complete; on any failure nothing is left behind (an older wheel of the same name is
 * kept). On success, when WRITTEN is not NULL, *WRITTEN receives the path written, which the
 * caller frees with free().
 * MD_ERR_ARGUMENT for invalid names, tags or member paths (absolute, "..", empty components,
 * characters outside printable ASCII or any of ',"\\', duplicates, generated names);
 * MD_ERR_IO when a source cannot be read or the output cannot be written. */
md_status md_wheel_write(const md_wheel_spec *spec, char **written, md_error *err);

/* Writes the dist name normalised for file names (runs of "-_." become one "_") into OUT.
 * MD_ERR_ARGUMENT when OUT (SIZE bytes) is too small or NAME is empty. */
md_status md_wheel_normalize_dist(const char *name, char *out, size_t size, md_error *err);

/* The wheel's file name (PEP 427) into OUT: DIST normalised, then VERSION, PYTHON_TAG, ABI_TAG and
 * PLATFORM_TAG joined by '-', with ".whl". The one place a wheel's name is formatted.
 * MD_ERR_ARGUMENT for a DIST that does not normalise or an OUT too small. */
md_status md_wheel_file_name(const char *dist, const char *version, const char *python_tag, const char *abi_tag,
                             const char *platform_tag, char *out, size_t size, md_error *err);

#endif
