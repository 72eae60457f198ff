/* A Python package index's project page (PEP 691 JSON, else PEP 503 HTML): the wheels it
 * offers, and the one `fetch --wheels` takes for a CUDA MAJOR.MINOR and a machine.
 * Scope: private to src/lib/fetch. */
#ifndef MD_FETCH_INDEX_H
#define MD_FETCH_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fetch_http.h"
#include "base/status.h"

typedef struct {
    char filename[256];   /* "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl" */
    char url[1024];       /* absolute, without its "#sha256=" fragment */
    char sha256[65];      /* lowercase; "" when the index gives none */
    char version[32];     /* from the file name: "13.0.88" */
    uint64_t size;        /* 0 when the index gives none */
} md_index_file;

typedef struct {
    char page_url[1024];  /* INDEX/NAME/ as read */
    md_index_file *files; /* the wheels that are not yanked, in the page's order */
    size_t n_files;
} md_index_page;

/* Reads the project page of NAME on the index at INDEX_URL (no trailing '/'), asking for PEP 691
 * JSON and reading PEP 503 HTML when that is what comes back. Only wheel files whose name
 * parses are kept. MD_ERR_NETWORK as md_http_get (HTTP 404: the index has no such project),
 * MD_ERR_FORMAT when the page is neither. Free *PAGE with md_index_page_free in every case. */
md_status md_index_read(const char *index_url, const char *name, const md_http_options *http, md_index_page *page,
                        md_error *err);

/* The wheel of project NAME for MACHINE ("x86_64": a manylinux*_x86_64 tag) with the newest
 * release MAJOR.MINOR.N, or with exactly VERSION when VERSION is not NULL and the page has it;
 * pre-releases and other versions are passed over. NULL when none fits. */
const md_index_file *md_index_pick(const md_index_page *page, const char *name, const char *machine,
                                   unsigned major, unsigned minor, const char *version);

/* True when the page has a wheel of NAME for some machine with a release MAJOR.MINOR.N. */
bool md_index_has_release(const md_index_page *page, const char *name, unsigned major, unsigned minor);

void md_index_page_free(md_index_page *page);

/* True for 64 hexadecimal digits: a sha256 as manifests and indexes write it. */
bool md_is_sha256_hex(const char *s);

#endif
