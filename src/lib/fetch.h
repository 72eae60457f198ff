/* `fetch`: an older CUDA toolkit from NVIDIA's redistributable archives (or a mirror of them),
 * checksummed, unpacked into DEST/cuda-MAJOR.MINOR only when every component arrived whole. */
#ifndef MD_FETCH_H
#define MD_FETCH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fetch_http.h"
#include "redist_table.h"
#include "status.h"

typedef struct {
    const char *version;   /* the release as NVIDIA names its manifest: "11.8.0" (or "11.8") */
    const char *platform;  /* "linux-x86_64", "linux-sbsa", "linux-aarch64"; NULL: this machine's */
    const char *mirror;    /* replaces NVIDIA's redist URL; NULL for NVIDIA's */
    const char *dest;      /* the folder that receives cuda-MAJOR.MINOR; made when missing */
    md_http_options http;
} md_fetch_request;

typedef struct {
    char name[48];          /* "cuda_nvcc" */
    char version[32];       /* the manifest's "11.8.89", "" when it gives none */
    char url[1024];
    char sha256[65];
    uint64_t size;          /* 0 when the manifest gives none */
    bool downloaded;        /* false when a verified archive left by an earlier run served */
    uint64_t resumed_from;  /* the byte a resumed download went on from; 0 when it started anew */
} md_fetch_component;

typedef struct {
    char version[32];        /* as asked */
    char release_label[32];  /* the manifest's, "" when it has none */
    char platform[24];
    char manifest_url[1024];
    char toolkit_dir[PATH_MAX]; /* absolute: DEST/cuda-MAJOR.MINOR */
    bool already_present;    /* it was there with a bin/nvcc; nothing was fetched */
    md_fetch_component components[MD_REDIST_MAX_COMPONENTS];
    size_t n_components;
} md_fetch_result;

/* Fetches the toolkit REQ names into *OUT (filled as far as it got, also on failure).
 * Downloads go to DEST/.cuda-MAJOR.MINOR-PLATFORM.download/, where an interrupted one resumes
 * on the next call; every archive's sha256 is checked before any is unpacked; they are
 * unpacked into a temporary folder in DEST that is renamed into place only when all succeeded,
 * and removed otherwise, as the downloads are after success.
 * MD_ERR_ARGUMENT: a bad version, platform or URL, or the platform lacks a required component.
 * MD_ERR_NETWORK: a transfer failed. MD_ERR_CHECKSUM: an archive's sha256 differs (the file is
 * removed; the message names the component and both sums). MD_ERR_FORMAT: the manifest is not
 * JSON or lacks a field, an archive is unsafe or holds no nvcc. MD_ERR_IO: DEST not writable. */
md_status md_fetch_toolkit(const md_fetch_request *req, md_fetch_result *out, md_error *err);

/* Reads the manifest BODY (LEN bytes; OUT's manifest_url and platform already set) into OUT's
 * release label and components, their URLs under BASE, as TABLE lists them. MD_ERR_FORMAT: not
 * a JSON object, or a component's path, sum or size is unusable; MD_ERR_ARGUMENT: a required
 * component is missing for the platform. Exposed for the fuzz target. */
md_status md_fetch_manifest_parse(const char *body, size_t len, const char *base, const md_redist_table *table,
                                  md_fetch_result *out, md_error *err);

#endif
