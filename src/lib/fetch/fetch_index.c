#include "fetch_index.h"

#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_PAGE_BYTES (16u << 20)
#define MAX_RELEASE_PARTS 4
#define PEP691_JSON "application/vnd.pypi.simple.v1+json"

/* PEP 503 normalisation: lowercase, each run of '-', '_' and '.' one SEP. */
static void normalize(const char *name, char sep, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < size; p++) {
        if (strchr("-_.", *p)) {
            while (p[1] && strchr("-_.", p[1]))
                p++;
            out[n++] = sep;
        } else {
            out[n++] = (char)tolower((unsigned char)*p);
        }
    }
    out[n] = '\0';
}

/* A final release "13.0.88" into its numbers; false for pre-, post- and dev releases, which a
 * toolkit is never pinned to. */
static bool release_parts(const char *v, unsigned *nums, size_t *n)
{
    *n = 0;
    const char *p = v;
    while (*p) {
        if (!isdigit((unsigned char)*p) || *n == MAX_RELEASE_PARTS)
            return false;
        char *end;
        unsigned long x = strtoul(p, &end, 10);
        if (x > 1000000)
            return false;
        nums[(*n)++] = (unsigned)x;
        p = end;
        if (*p == '.' && isdigit((unsigned char)p[1]))
            p++;
        else if (*p)
            return false;
    }
    return *n >= 2;
}

/* FILENAME "{dist}-{version}(-{build})?-{python}-{abi}-{platform}.whl": the dist, the version
 * and the platform tags (dot-separated) into the outputs; false when it is no wheel name. */
static bool wheel_name_parts(const char *filename, char *dist, size_t dsize, char *version, size_t vsize,
                             char *platform, size_t psize)
{
    size_t len = strlen(filename);
    if (len < 5 || strcmp(filename + len - 4, ".whl") != 0 || strchr(filename, '/'))
        return false;
    const char *parts[7];
    size_t lens[7], n = 0;
    for (const char *p = filename; n < 7;) {
        const char *dash = strchr(p, '-');
        parts[n] = p;
        lens[n++] = dash ? (size_t)(dash - p) : strlen(p) - 4;
        if (!dash)
            break;
        p = dash + 1;
    }
    if ((n != 5 && n != 6) || lens[0] >= dsize || lens[1] >= vsize || lens[n - 1] >= psize)
        return false;
    snprintf(dist, dsize, "%.*s", (int)lens[0], parts[0]);
    snprintf(version, vsize, "%.*s", (int)lens[1], parts[1]);
    snprintf(platform, psize, "%.*s", (int)lens[n - 1], parts[n - 1]);
    return true;
}

/* True when one of the dot-separated TAGS is a manylinux tag for MACHINE. */
static bool for_machine(const char *tags, const char *machine)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "_%s", machine);
    size_t sl = strlen(suffix);
    for (const char *p = tags; *p;) {
        size_t len = strcspn(p, ".");
        if (len > 9 + sl && strncmp(p, "manylinux", 9) == 0 && strncmp(p + len - sl, suffix, sl) == 0)
            return true;
        p += len + (p[len] == '.');
    }
    return false;
}

bool md_is_sha256_hex(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (; *s; s++)
        if (!isxdigit((unsigned char)*s))
            return false;
    return true;
}

/* HREF resolved against the page's URL into F->url, less its fragment; a "sha256=" fragment
 * goes into F->sha256 unless the index gave one otherwise. */
static bool resolve(const char *page_url, const char *href, md_index_file *f)
{
    CURLU *u = curl_url();
    char *frag = NULL, *full = NULL;
    bool ok = u && curl_url_set(u, CURLUPART_URL, page_url, 0) == CURLUE_OK &&
              curl_url_set(u, CURLUPART_URL, href, 0) == CURLUE_OK;
    if (ok && curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK && strncmp(frag, "sha256=", 7) == 0 &&
        !f->sha256[0] && md_is_sha256_hex(frag + 7))
        for (size_t i = 0; i < 64; i++)
            f->sha256[i] = (char)tolower((unsigned char)frag[7 + i]);
    ok = ok && curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) == CURLUE_OK &&
         curl_url_get(u, CURLUPART_URL, &full, 0) == CURLUE_OK && strlen(full) < sizeof f->url;
    if (ok)
        snprintf(f->url, sizeof f->url, "%s", full);
    curl_free(frag);
    curl_free(full);
    curl_url_cleanup(u);
    return ok;
}

static md_status add_file(md_index_page *page, const md_index_file *f, md_error *err)
{
    md_index_file *grown = realloc(page->files, (page->n_files + 1) * sizeof *grown);
    if (!grown)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    page->files = grown;
    page->files[page->n_files++] = *f;
    return MD_OK;
}

/* FILENAME and HREF of one listed file into F; false when it is not a wheel we can name. */
static bool fill_file(const char *page_url, const char *filename, const char *href, md_index_file *f)
{
    char dist[128], platform[160];
    if (strlen(filename) >= sizeof f->filename ||
        !wheel_name_parts(filename, dist, sizeof dist, f->version, sizeof f->version, platform, sizeof platform))
        return false;
    snprintf(f->filename, sizeof f->filename, "%s", filename);
    return resolve(page_url, href, f);
}

/* PEP 691: {"files": [{"filename", "url", "hashes": {"sha256"}, "yanked", "size"?}, ...]}. */
static md_status read_json(json_t *doc, md_index_page *page, md_error *err)
{
    json_t *files = json_object_get(doc, "files"), *item;
    if (!json_is_array(files))
        return md_fail(err, MD_ERR_FORMAT, "index page '%s' has no 'files' list", page->page_url);
    size_t i;
    json_array_foreach(files, i, item) {
        const char *name = json_string_value(json_object_get(item, "filename"));
        const char *url = json_string_value(json_object_get(item, "url"));
        json_t *yanked = json_object_get(item, "yanked"), *size = json_object_get(item, "size");
        const char *sha = json_string_value(json_object_get(json_object_get(item, "hashes"), "sha256"));
        if (!name || !url || (yanked && !json_is_false(yanked)))
            continue;
        md_index_file f = { 0 };
        if (sha && md_is_sha256_hex(sha))
            for (size_t k = 0; k < 64; k++)
                f.sha256[k] = (char)tolower((unsigned char)sha[k]);
        if (!fill_file(page->page_url, name, url, &f))
            continue;
        if (json_is_integer(size) && json_integer_value(size) > 0)
            f.size = (uint64_t)json_integer_value(size);
        md_status st = add_file(page, &f, err);
        if (st != MD_OK)
            return st;
    }
    return MD_OK;
}

/* Decodes the character references HTML allows in an attribute or a link's text, in place;
 * an unknown one stays as it is. */
static void decode_entities(char *s)
{
    static const struct { const char *name; char c; } named[] = {
        { "amp;", '&' }, { "lt;", '<' }, { "gt;", '>' }, { "quot;", '"' }, { "apos;", '\'' },
    };
    char *out = s;
    for (const char *p = s; *p;) {
        if (*p != '&') {
            *out++ = *p++;
            continue;
        }
        bool done = false;
        for (size_t i = 0; i < sizeof named / sizeof named[0] && !done; i++) {
            size_t n = strlen(named[i].name);
            if (strncmp(p + 1, named[i].name, n) == 0) {
                *out++ = named[i].c;
                p += 1 + n;
                done = true;
            }
        }
        if (!done && p[1] == '#') {
            char *end;
            bool hex = p[2] == 'x' || p[2] == 'X';
            unsigned long c = strtoul(p + (hex ? 3 : 2), &end, hex ? 16 : 10);
            /* Only ASCII: a URL or a wheel name holds nothing else. */
            if (*end == ';' && end > p + (hex ? 3 : 2) && c > 0 && c < 128) {
                *out++ = (char)c;
                p = end + 1;
                done = true;
            }
        }
        if (!done)
            *out++ = *p++;
    }
    *out = '\0';
}

/* One attribute of a tag at *P: its name and value (empty without one) into the buffers,
 * *P moved past it. False at the tag's end. */
static bool next_attribute(const char **p, char *name, size_t nsize, char *value, size_t vsize)
{
    const char *s = *p;
    while (isspace((unsigned char)*s) || *s == '/')
        s++;
    if (!*s || *s == '>') {
        *p = s;
        return false;
    }
    const char *start = s;
    size_t n = strcspn(s, " \t\r\n=>/");
    snprintf(name, nsize, "%.*s", (int)(n < nsize ? n : nsize - 1), s);
    s += n;
    while (isspace((unsigned char)*s))
        s++;
    value[0] = '\0';
    if (*s == '=') {
        s++;
        while (isspace((unsigned char)*s))
            s++;
        size_t len;
        if (*s == '"' || *s == '\'') {
            char q = *s++;
            const char *end = strchr(s, q);
            len = end ? (size_t)(end - s) : strlen(s);
            snprintf(value, vsize, "%.*s", (int)(len < vsize ? len : vsize - 1), s);
            s += len + (end ? 1 : 0);
        } else {
            len = strcspn(s, " \t\r\n>");
            snprintf(value, vsize, "%.*s", (int)(len < vsize ? len : vsize - 1), s);
            s += len;
        }
    }
    if (s == start) /* a stray character: step over it */
        s++;
    *p = s;
    return true;
}

/* PEP 503: each file is <a href="URL#sha256=HEX" [data-yanked]>FILENAME</a>. Only anchors are
 * read; everything else on the page is passed over. */
static md_status read_html(const char *body, md_index_page *page, md_error *err)
{
    for (const char *p = body; (p = strchr(p, '<')) != NULL;) {
        p++;
        if (tolower((unsigned char)p[0]) != 'a' || !isspace((unsigned char)p[1]))
            continue;
        p++;
        char name[32], value[2048], href[2048] = "";
        bool yanked = false;
        while (next_attribute(&p, name, sizeof name, value, sizeof value)) {
            if (strcasecmp(name, "href") == 0)
                snprintf(href, sizeof href, "%s", value);
            else if (strcasecmp(name, "data-yanked") == 0)
                yanked = true;
        }
        if (*p != '>')
            break; /* the page ends inside the tag */
        p++;
        const char *end = strstr(p, "</");
        if (!end)
            break;
        char text[512];
        size_t len = (size_t)(end - p);
        if (len >= sizeof text)
            continue;
        snprintf(text, sizeof text, "%.*s", (int)len, p);
        p = end;
        decode_entities(href);
        decode_entities(text);
        char *t = text;
        while (isspace((unsigned char)*t))
            t++;
        for (size_t k = strlen(t); k > 0 && isspace((unsigned char)t[k - 1]); k--)
            t[k - 1] = '\0';
        md_index_file f = { 0 };
        if (yanked || !href[0] || !fill_file(page->page_url, t, href, &f))
            continue;
        md_status st = add_file(page, &f, err);
        if (st != MD_OK)
            return st;
    }
    return MD_OK;
}

md_status md_index_read(const char *index_url, const char *name, const md_http_options *http, md_index_page *page,
                        md_error *err)
{
    memset(page, 0, sizeof *page);
    char project[128];
    normalize(name, '-', project, sizeof project);
    if (snprintf(page->page_url, sizeof page->page_url, "%s/%s/", index_url, project) >= (int)sizeof page->page_url)
        return md_fail(err, MD_ERR_ARGUMENT, "index URL '%s' is too long", index_url);
    md_http_options o = *http;
    o.accept = PEP691_JSON ", text/html;q=0.1";
    char *body = NULL;
    size_t len = 0;
    md_status st = md_http_get(page->page_url, &o, MAX_PAGE_BYTES, &body, &len, err);
    if (st != MD_OK)
        return st;
    const char *start = body;
    while (isspace((unsigned char)*start))
        start++;
    if (*start == '{') {
        json_error_t jerr;
        json_t *doc = json_loadb(body, len, 0, &jerr);
        st = json_is_object(doc) ? read_json(doc, page, err)
                                 : md_fail(err, MD_ERR_FORMAT, "index page '%s' is not JSON: line %d: %s",
                                           page->page_url, jerr.line, jerr.text);
        json_decref(doc);
    } else if (*start == '<') {
        st = read_html(body, page, err);
    } else {
        st = md_fail(err, MD_ERR_FORMAT, "index page '%s' is neither PEP 691 JSON nor PEP 503 HTML", page->page_url);
    }
    free(body);
    return st;
}

static int compare_release(const unsigned *a, size_t na, const unsigned *b, size_t nb)
{
    for (size_t i = 0; i < na || i < nb; i++) {
        unsigned x = i < na ? a[i] : 0, y = i < nb ? b[i] : 0;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

/* True when F is a final release MAJOR.MINOR.N of project NAME (normalised); its numbers out. */
static bool of_release(const md_index_file *f, const char *norm_name, unsigned major, unsigned minor, unsigned *nums,
                       size_t *n)
{
    char dist[128], version[32], platform[160], norm_dist[128];
    if (!wheel_name_parts(f->filename, dist, sizeof dist, version, sizeof version, platform, sizeof platform))
        return false;
    normalize(dist, '_', norm_dist, sizeof norm_dist);
    return strcmp(norm_dist, norm_name) == 0 && release_parts(f->version, nums, n) && nums[0] == major &&
           nums[1] == minor;
}

bool md_index_has_release(const md_index_page *page, const char *name, unsigned major, unsigned minor)
{
    char norm[128];
    unsigned nums[MAX_RELEASE_PARTS];
    size_t n;
    normalize(name, '_', norm, sizeof norm);
    for (size_t i = 0; i < page->n_files; i++)
        if (of_release(&page->files[i], norm, major, minor, nums, &n))
            return true;
    return false;
}

const md_index_file *md_index_pick(const md_index_page *page, const char *name, const char *machine,
                                   unsigned major, unsigned minor, const char *version)
{
    char norm[128];
    normalize(name, '_', norm, sizeof norm);
    const md_index_file *best = NULL, *exact = NULL;
    unsigned best_nums[MAX_RELEASE_PARTS] = { 0 }, nums[MAX_RELEASE_PARTS];
    size_t best_n = 0, n;
    for (size_t i = 0; i < page->n_files; i++) {
        const md_index_file *f = &page->files[i];
        char dist[128], v[32], platform[160];
        if (!of_release(f, norm, major, minor, nums, &n) ||
            !wheel_name_parts(f->filename, dist, sizeof dist, v, sizeof v, platform, sizeof platform) ||
            !for_machine(platform, machine))
            continue;
        if (version && strcmp(f->version, version) == 0 && !exact)
            exact = f;
        if (!best || compare_release(nums, n, best_nums, best_n) > 0) {
            best = f;
            memcpy(best_nums, nums, sizeof nums);
            best_n = n;
        }
    }
    return exact ? exact : best;
}

void md_index_page_free(md_index_page *page)
{
    free(page->files);
    memset(page, 0, sizeof *page);
}
