#include "pip_config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    for (size_t n = strlen(s); n > 0 && isspace((unsigned char)s[n - 1]); n--)
        s[n - 1] = '\0';
    return s;
}

/* pip reads its files with Python's configparser: [section], then "key = value" or "key: value",
 * with '#' and ';' comment lines; pip takes index_url for index-url too. A value is taken whole or
 * not at all: the values are as long as the lines they come from, and a line longer than LINE is
 * skipped to its end (its tail is no line of its own) and its value counts as too long, as one
 * longer than USIZE does: no URL from this file rather than a cut one. */
static bool read_file(const char *path, char *url, size_t usize)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096], section[64] = "", global[sizeof line] = "", download[sizeof line] = "";
    bool global_cut = false, download_cut = false;
    while (fgets(line, sizeof line, f)) {
        const bool whole = strchr(line, '\n') || feof(f);
        if (!whole)
            for (int c = getc(f); c != EOF && c != '\n'; c = getc(f))
                ;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *end = strchr(s, ']');
            snprintf(section, sizeof section, "%.*s", end ? (int)(end - s - 1) : 0, s + 1);
            continue;
        }
        size_t k = strcspn(s, "=:");
        if (!s[k])
            continue;
        s[k] = '\0';
        char *key = trim(s), *value = trim(s + k + 1);
        if (strcmp(key, "index-url") != 0 && strcmp(key, "index_url") != 0)
            continue;
        if (strcmp(section, "global") == 0) {
            snprintf(global, sizeof global, "%s", value);
            global_cut = !whole;
        } else if (strcmp(section, "download") == 0) {
            snprintf(download, sizeof download, "%s", value);
            download_cut = !whole;
        }
    }
    fclose(f);
    const char *v = download[0] ? download : global;
    if (!v[0] || (download[0] ? download_cut : global_cut) || strlen(v) >= usize)
        return false;
    snprintf(url, usize, "%s", v);
    return true;
}

bool md_pip_index_url(char *url, size_t usize, char *source, size_t ssize)
{
    const char *env = getenv("PIP_INDEX_URL");
    if (env && *env && strlen(env) < usize) {
        snprintf(url, usize, "%s", env);
        snprintf(source, ssize, "PIP_INDEX_URL");
        return true;
    }
    char files[7][4096];
    size_t n = 0;
    const char *cfg = getenv("PIP_CONFIG_FILE"), *venv = getenv("VIRTUAL_ENV");
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (cfg && *cfg)
        snprintf(files[n++], sizeof files[0], "%s", cfg);
    if (venv && *venv)
        snprintf(files[n++], sizeof files[0], "%s/pip.conf", venv);
    if (xdg && xdg[0] == '/')
        snprintf(files[n++], sizeof files[0], "%s/pip/pip.conf", xdg);
    else if (home && *home)
        snprintf(files[n++], sizeof files[0], "%s/.config/pip/pip.conf", home);
    if (home && *home)
        snprintf(files[n++], sizeof files[0], "%s/.pip/pip.conf", home);
    snprintf(files[n++], sizeof files[0], "/etc/xdg/pip/pip.conf");
    snprintf(files[n++], sizeof files[0], "/etc/pip.conf");
    for (size_t i = 0; i < n; i++) {
        if (read_file(files[i], url, usize)) {
            snprintf(source, ssize, "%s", files[i]);
            return true;
        }
    }
    return false;
}
