/* `fetch`: a CUDA toolkit from NVIDIA's redistributable archives (or a mirror of them), or from
 * NVIDIA's compiler wheels on a package index, checksummed, unpacked into
 * DEST/cuda/MAJOR.MINOR/PLATFORM (fetch_cache.h) only when every component arrived whole. Either
 * way the folder has the same layout.
 * Scope: public: src/cli may include it. */
#ifndef MD_FETCH_H
#define MD_FETCH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fetch_http.h"
#include "recipes/redist_table.h"
#include "base/status.h"

typedef struct {
    const char *version;   /* the release as NVIDIA names its manifest: "11.8.0" (or "11.8") */
    const char *platform;  /* "linux-x86_64", "linux-sbsa", "linux-aarch64"; NULL: this machine's */
    const char *mirror;    /* replaces NVIDIA's redist URL; NULL for NVIDIA's */
    bool wheels;           /* from the compiler wheels on a package index, not the redist manifest */
    const char *index_url; /* with WHEELS: the index (PEP 503/691); NULL: recipes/redist.json's */
    const char *dest;      /* the folder that receives cuda/MAJOR.MINOR/PLATFORM; made when missing */
    md_http_options http;
} md_fetch_request;

/* Where a fetch goes, and how patiently, when the caller says nothing: `fetch` and `build`'s
 * fetches alike. The environment variable names a mirror of NVIDIA's redist archives. */
#define MD_FETCH_MIRROR_ENV "MSDA_CUDA_MIRROR"
#define MD_FETCH_DEFAULT_RETRIES 4
#define MD_FETCH_DEFAULT_TIMEOUT_S 30

/* A request with those defaults: the mirror $MSDA_CUDA_MIRROR names (NULL: NVIDIA's), the
 * default retries and timeouts, this machine's platform, no version and no DEST yet. */
md_fetch_request md_fetch_request_defaults(void);

/* The package index the user's pip is set to use into INDEX, and the file or variable that set
 * it into SOURCE; false when pip names none (then recipes/redist.json's index serves). */
bool md_fetch_pip_index(char *index, size_t index_size, char *source, size_t source_size);

typedef struct {
    char name[48];          /* "cuda_nvcc", or a wheel's project "nvidia-cuda-nvcc" */
    char version[32];       /* the manifest's "11.8.89" ("" when it gives none), or the wheel's */
    char url[1024];
    char file[256];         /* the archive's local name: the URL's last part, or the wheel's name */
    char top[128];          /* the archive's folder that becomes the toolkit folder */
    bool wheel;
    char sha256[65];
    uint64_t size;          /* 0 when the manifest gives none */
    bool downloaded;        /* false when a verified archive left by an earlier run served */
    uint64_t resumed_from;  /* the byte a resumed download went on from; 0 when it started anew */
} md_fetch_component;

typedef struct {
    char version[32];        /* as asked */
    char release_label[32];  /* the manifest's, "" when it has none */
    char platform[24];
    char manifest_url[1024]; /* "" for wheels */
    char index_url[1024];    /* the index the wheels came from; "" for the redist manifest */
    char toolkit_dir[PATH_MAX]; /* absolute: DEST/cuda/MAJOR.MINOR/PLATFORM */
    bool already_present;    /* it was there with a bin/nvcc; nothing was fetched */
    md_fetch_component components[MD_REDIST_MAX_COMPONENTS];
    size_t n_components;
} md_fetch_result;

/* Fetches the toolkit REQ names into *OUT (filled as far as it got, also on failure).
 * Downloads go to DEST/cuda/MAJOR.MINOR/.PLATFORM.download/, where an interrupted one resumes
 * on the next call; every archive's sha256 is checked before any is unpacked; they are
 * unpacked into a temporary folder beside the toolkit's place that is renamed into place only
 * when all succeeded, and removed otherwise, as the downloads are after success. A toolkit of
 * the same version for another platform is another toolkit.
 * With WHEELS, each package of recipes/redist.json's wheel recipe for the CUDA major is read
 * from the index: the newest release MAJOR.MINOR.N of each (or the pinned package's version
 * where the index has it), a manylinux wheel for the platform, its sha256 from the index.
 * MD_ERR_ARGUMENT: a bad version, platform or URL, or the platform lacks a required component;
 * with WHEELS also a major whose wheels hold no compiler (the message says so and points at the
 * redist manifests), a VERSION with a patch level, a package without a MAJOR.MINOR release or
 * without a wheel for the platform.
 * MD_ERR_NETWORK: a transfer failed. MD_ERR_CHECKSUM: an archive's sha256 differs (the file is
 * removed; the message names the component and both sums). MD_ERR_FORMAT: the manifest is not
 * JSON or lacks a field, an index page is unreadable or gives no sha256, an archive is unsafe or
 * holds no nvcc. MD_ERR_IO: DEST not writable. */
md_status md_fetch_toolkit(const md_fetch_request *req, md_fetch_result *out, md_error *err);

/* Reads the manifest BODY (LEN bytes; OUT's manifest_url and platform already set) into OUT's
 * release label and components, their URLs under BASE, as TABLE lists them. MD_ERR_FORMAT: not
 * a JSON object, or a component's path, sum or size is unusable; MD_ERR_ARGUMENT: a required
 * component is missing for the platform. Exposed for the fuzz target. */
md_status md_fetch_manifest_parse(const char *body, size_t len, const char *base, const md_redist_table *table,
                                  md_fetch_result *out, md_error *err);

#endif
