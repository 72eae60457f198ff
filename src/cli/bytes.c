/* Bytes taken from files (file names, log lines, kernel and section names) in the output, which
 * need not be UTF-8: in JSON, each string valid UTF-8 with the raw bytes kept beside it in
 * base64 (man page, DESCRIPTION); in text, escaped so that no byte reaches a terminal raw. */
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* The length of the UTF-8 sequence at S (at most N bytes), or 0 when it is not one: no overlong
 * form, no surrogate, nothing above U+10FFFF (RFC 3629). */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

static bool is_utf8(const char *text, size_t n)
{
    for (size_t at = 0, len; at < n; at += len)
        if ((len = utf8_sequence((const unsigned char *)text + at, n - at)) == 0)
            return false;
    return true;
}

json_t *md_cli_json_bytes(const char *text)
{
    return text ? json_stringn_nocheck(text, strlen(text)) : json_null();
}

/* TEXT with each byte outside a UTF-8 sequence replaced by U+FFFD. */
static json_t *replaced(const char *text, size_t n)
{
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t at = 0, len; at < n; at += len ? len : 1) {
        len = utf8_sequence((const unsigned char *)text + at, n - at);
        if (len) {
            memcpy(out + o, text + at, len);
            o += len;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
        }
    }
    json_t *s = json_stringn(out, o);
    free(out);
    return s;
}

/* The bytes of TEXT in base64, by libcrypto (which the tool links for its hashes already). */
static json_t *base64(const char *text, size_t n)
{
    if (n > INT_MAX / 2)
        return NULL;
    unsigned char *out = malloc(4 * (n / 3 + 1) + 1);
    if (!out)
        return NULL;
    int o = EVP_EncodeBlock(out, (const unsigned char *)text, (int)n);
    json_t *b = o >= 0 ? json_stringn((const char *)out, (size_t)o) : NULL;
    free(out);
    return b;
}

/* Whether V is a string that is not UTF-8. */
static bool not_utf8(json_t *v)
{
    return json_is_string(v) && !is_utf8(json_string_value(v), json_string_length(v));
}

static void valid_value(json_t *v);

/* The strings of array A made valid; the base64 of each string that was not, null for the
 * others, returned as a parallel array (NULL when every string was UTF-8). */
static json_t *valid_array(json_t *a)
{
    json_t *raw = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!not_utf8(v)) {
            valid_value(v);
            continue;
        }
        if (!raw) {
            raw = json_array();
            for (size_t k = 0; k < i; k++)
                json_array_append_new(raw, json_null());
        }
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        json_array_append_new(raw, base64(s, n));
        json_array_set_new(a, i, replaced(s, n));
    }
    for (size_t k = raw ? json_array_size(raw) : 0; raw && k < json_array_size(a); k++)
        json_array_append_new(raw, json_null());
    return raw;
}

static void valid_object(json_t *obj)
{
    json_t *siblings = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        char name[128];
        snprintf(name, sizeof name, "%s_base64", key);
        if (not_utf8(v)) {
            const char *s = json_string_value(v);
            size_t n = json_string_length(v);
            json_object_set_new(siblings, name, base64(s, n));
            json_object_set_new(obj, key, replaced(s, n)); /* replacing a key's value keeps the walk */
        } else if (json_is_array(v)) {
            json_t *raw = valid_array(v);
            if (raw)
                json_object_set_new(siblings, name, raw);
        } else {
            valid_value(v);
        }
    }
    json_object_update(obj, siblings);
    json_decref(siblings);
}

static void valid_value(json_t *v)
{
    if (json_is_object(v))
        valid_object(v);
    else if (json_is_array(v))
        json_decref(valid_array(v)); /* an array in an array: no key to put the bytes beside */
}

void md_cli_json_utf8(json_t *doc)
{
    valid_value(doc);
}

const char *md_cli_shown(const char *text, char *out, size_t size)
{
    size_t o = 0, n = strlen(text);
    for (size_t at = 0, len; at < n && o + 5 < size; at += len) {
        const unsigned char *s = (const unsigned char *)text + at;
        len = utf8_sequence(s, n - at);
        /* C0 controls but the tab, DEL, and C1 controls (U+0080 to U+009F) move a terminal too */
        bool control = len == 1 ? (s[0] < 0x20 && s[0] != '\t') || s[0] == 0x7f : len == 2 && s[0] == 0xc2 && s[1] < 0xa0;
        if (len && !control) {
            if (o + len >= size)
                break;
            memcpy(out + o, s, len);
            o += len;
            continue;
        }
        if (!len)
            len = 1;
        for (size_t i = 0; i < len && o + 5 < size; i++)
            o += (size_t)snprintf(out + o, size - o, "\\x%02X", s[i]);
    }
    out[o] = '\0';
    return out;
}
