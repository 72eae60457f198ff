/* Finding the CA certificates (fetch_ca.h). */
#include "fetch_ca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bundles, most common first; the first that exists is used. */
static const char *const bundles[] = {
    "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu, Jetson Linux, Alpine, Arch */
    "/etc/pki/tls/certs/ca-bundle.crt",                  /* RHEL, CentOS, Fedora, Amazon Linux */
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* RHEL 7 and later, Fedora */
    "/etc/ssl/ca-bundle.pem",                            /* SUSE, openSUSE */
    "/var/lib/ca-certificates/ca-bundle.pem",            /* openSUSE */
    "/etc/ssl/cert.pem",                                 /* Alpine, Arch, OpenBSD's layout */
};
/* Hashed folders (c_rehash), for a system with certificates but no bundle. */
static const char *const folders[] = {
    "/etc/ssl/certs",       /* Debian, Ubuntu, SUSE, Alpine */
    "/etc/pki/tls/certs",   /* RHEL, Fedora */
};

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(path, R_OK | X_OK) == 0;
}

static md_status from_variable(const char *name, bool dir, md_ca_store *store, md_error *err)
{
    const char *value = getenv(name);
    if (!(dir ? is_dir(value) : is_file(value)))
        return md_fail(err, MD_ERR_NETWORK, "%s is '%s', which is not a readable %s of CA certificates", name, value,
                       dir ? "folder" : "file");
    snprintf(dir ? store->dir : store->file, sizeof store->file, "%s", value);
    store->from = name;
    return MD_OK;
}

static bool set(const char *name)
{
    const char *value = getenv(name);
    return value && *value;
}

md_status md_ca_store_find(const char *root, md_ca_store *store, md_error *err)
{
    memset(store, 0, sizeof *store);
    /* OpenSSL's own variables first, as every OpenSSL program reads them; both may be set. */
    if (set("SSL_CERT_FILE") || set("SSL_CERT_DIR")) {
        md_status st = MD_OK;
        if (set("SSL_CERT_FILE"))
            st = from_variable("SSL_CERT_FILE", false, store, err);
        if (st == MD_OK && set("SSL_CERT_DIR"))
            st = from_variable("SSL_CERT_DIR", true, store, err);
        return st;
    }
    if (set("CURL_CA_BUNDLE"))
        return from_variable("CURL_CA_BUNDLE", false, store, err);
    const char *prefix = root && strcmp(root, "/") != 0 ? root : "";
    char path[sizeof store->file];
    for (size_t i = 0; i < sizeof bundles / sizeof *bundles && !store->file[0]; i++)
        if (snprintf(path, sizeof path, "%s%s", prefix, bundles[i]) < (int)sizeof path && is_file(path))
            snprintf(store->file, sizeof store->file, "%s", path);
    for (size_t i = 0; i < sizeof folders / sizeof *folders && !store->dir[0]; i++)
        if (snprintf(path, sizeof path, "%s%s", prefix, folders[i]) < (int)sizeof path && is_dir(path))
            snprintf(store->dir, sizeof store->dir, "%s", path);
    store->from = "system";
    if (store->file[0] || store->dir[0])
        return MD_OK;
    return md_fail(err, MD_ERR_NETWORK,
                   "no CA certificates to check https servers against (none of %s, %s, ... and no %s): install "
                   "the system's ca-certificates package, or set SSL_CERT_FILE to a PEM bundle or SSL_CERT_DIR "
                   "to a folder of certificates",
                   bundles[0], bundles[1], folders[0]);
}
