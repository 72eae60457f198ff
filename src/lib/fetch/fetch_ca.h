/* Which CA certificates an https transfer checks the server against. A libcurl linked into
 * msda-doctor statically (the portable release build) carries no path to any system's store, and
 * each distribution keeps its own in its own place: this finds it, the same way in every build.
 * Scope: private to src/lib/fetch. */
#ifndef MD_FETCH_CA_H
#define MD_FETCH_CA_H

#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

typedef struct {
    char file[4096];  /* a PEM bundle for CURLOPT_CAINFO, or "" */
    char dir[4096];   /* a hashed folder for CURLOPT_CAPATH, or "" */
    const char *from; /* what chose it: "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE" or "system" */
} md_ca_store;

/* Chooses the store: SSL_CERT_FILE and SSL_CERT_DIR (OpenSSL's variables) and CURL_CA_BUNDLE
 * (curl's) when set, else the first bundle and the first folder that exist under ROOT ("/" but
 * in tests) from the places Debian, Ubuntu and Jetson Linux, RHEL, Fedora and Amazon Linux,
 * SUSE, Alpine and Arch keep theirs. MD_ERR_NETWORK naming the variables when a variable names
 * nothing readable or no place holds a store. */
md_status md_ca_store_find(const char *root, md_ca_store *store, md_error *err);

#endif
