#include "arch.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes.h"

typedef struct {
    char key[32];
    char name[48];
    unsigned sm;
} gpu_name;

static md_arch *arch_table;
static unsigned arch_count;
static gpu_name *gpu_names;
static unsigned gpu_name_count;

static unsigned json_uint(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (unsigned)json_integer_value(v) : 0;
}

static bool json_flag(json_t *obj, const char *key)
{
    return json_is_true(json_object_get(obj, key));
}

static md_status load_arch(json_t *item, md_arch *a, md_error *err)
{
    a->sm = json_uint(item, "sm");
    a->major = a->sm / 10;
    a->minor = a->sm % 10;
    const char *fam = json_string_value(json_object_get(item, "family"));
    snprintf(a->family, sizeof a->family, "%s", fam ? fam : "");
    a->registers_per_block = json_uint(item, "registers_per_block");
    a->registers_per_sm = json_uint(item, "registers_per_sm");
    a->max_threads_per_block = json_uint(item, "max_threads_per_block");
    a->max_threads_per_sm = json_uint(item, "max_threads_per_sm");
    a->shared_kb_per_sm = json_uint(item, "shared_kb_per_sm");
    a->shared_kb_per_block_optin = json_uint(item, "shared_kb_per_block_optin");
    a->fp16 = json_flag(item, "fp16");
    a->fp16_fast = json_flag(item, "fp16_fast");
    a->half2_atomic_add = json_flag(item, "half2_atomic_add");
    a->half_atomic_add = json_flag(item, "half_atomic_add");
    a->bf16 = json_flag(item, "bf16");
    a->bf16_atomic_native = json_flag(item, "bf16_atomic_native");
    a->jetson = json_flag(item, "jetson");
    if (a->sm == 0 || a->registers_per_block == 0 || a->max_threads_per_block == 0)
        return md_fail(err, MD_ERR_INTERNAL, "architectures.json: incomplete entry for sm %u", a->sm);
    return MD_OK;
}

md_status md_arch_table_load_json(json_t *doc, md_error *err)
{
    md_arch_table_free();
    md_status st = MD_OK;
    json_t *archs = json_object_get(doc, "architectures");
    json_t *gpus = json_object_get(doc, "gpus");
    if (!json_is_array(archs) || !json_is_array(gpus) || json_array_size(archs) == 0) {
        st = md_fail(err, MD_ERR_INTERNAL, "architectures.json: missing 'architectures' or 'gpus'");
        goto end;
    }
    md_arch *table = calloc(json_array_size(archs), sizeof *table);
    gpu_name *names = calloc(json_array_size(gpus) + 1, sizeof *names);
    if (!table || !names) {
        free(table);
        free(names);
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    size_t i;
    json_t *item;
    json_array_foreach(archs, i, item) {
        st = load_arch(item, &table[i], err);
        if (st != MD_OK || (i > 0 && table[i].sm <= table[i - 1].sm)) {
            free(table);
            free(names);
            if (st == MD_OK)
                st = md_fail(err, MD_ERR_INTERNAL, "architectures.json: entries not ascending");
            goto end;
        }
    }
    json_array_foreach(gpus, i, item) {
        const char *key = json_string_value(json_object_get(item, "key"));
        const char *name = json_string_value(json_object_get(item, "name"));
        snprintf(names[i].key, sizeof names[i].key, "%s", key ? key : "");
        snprintf(names[i].name, sizeof names[i].name, "%s", name ? name : "");
        names[i].sm = json_uint(item, "sm");
    }
    arch_table = table;
    arch_count = (unsigned)json_array_size(archs);
    gpu_names = names;
    gpu_name_count = (unsigned)json_array_size(gpus);
end:
    return st;
}

md_status md_arch_table_load(md_error *err)
{
    return arch_table ? MD_OK : md_recipe_parse("architectures.json", md_arch_table_load_json, err);
}

void md_arch_table_free(void)
{
    free(arch_table);
    free(gpu_names);
    arch_table = NULL;
    gpu_names = NULL;
    arch_count = gpu_name_count = 0;
}

const md_arch *md_arch_by_sm(unsigned sm)
{
    for (unsigned i = 0; i < arch_count; i++)
        if (arch_table[i].sm == sm)
            return &arch_table[i];
    return NULL;
}

const md_arch *md_arch_all(unsigned *count)
{
    *count = arch_count;
    return arch_table;
}

void md_arch_format(char *buf, unsigned size, bool ptx, unsigned sm, char variant)
{
    if (variant)
        snprintf(buf, size, "%s_%u%c", ptx ? "compute" : "sm", sm, variant);
    else
        snprintf(buf, size, "%s_%u", ptx ? "compute" : "sm", sm);
}

/* Lowercase alphanumerics only, so that "Tesla P40", "tesla-p40" and "teslap40" compare equal. */
static void squash(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; *in && n + 1 < size; in++)
        if (isalnum((unsigned char)*in))
            out[n++] = (char)tolower((unsigned char)*in);
    out[n] = '\0';
}

/* "sm_61", "sm_90a", "compute_86", "sm61", "61": the SM number and an optional a/f suffix. */
static bool parse_sm_number(const char *text, unsigned *sm, char *variant)
{
    const char *p = text;
    if (strncmp(p, "sm_", 3) == 0)
        p += 3;
    else if (strncmp(p, "compute_", 8) == 0)
        p += 8;
    else if (strncmp(p, "sm", 2) == 0)
        p += 2;
    if (!isdigit((unsigned char)*p))
        return false;
    errno = 0;
    char *end;
    unsigned long v = strtoul(p, &end, 10);
    if (errno || v < 10 || v > 999)
        return false;
    *variant = 0;
    if (*end == 'a' || *end == 'f')
        *variant = *end++;
    if (*end)
        return false;
    *sm = (unsigned)v;
    return true;
}

/* "6.1", "12.0": a compute capability. */
static bool parse_cc(const char *text, unsigned *sm)
{
    unsigned major, minor;
    int used = 0;
    if (sscanf(text, "%2u.%1u%n", &major, &minor, &used) != 2 || text[used] != '\0')
        return false;
    *sm = major * 10 + minor;
    return true;
}

bool md_arch_parse_number(const char *text, unsigned *sm)
{
    char variant;
    return parse_sm_number(text, sm, &variant) || parse_cc(text, sm);
}

md_status md_gpu_target_parse(const char *text, md_gpu_target *out, md_error *err)
{
    md_status st = md_arch_table_load(err);
    if (st != MD_OK)
        return st;
    memset(out, 0, sizeof *out);
    unsigned sm = 0;
    char variant = 0;
    const char *gpu_label = NULL;
    if (!parse_sm_number(text, &sm, &variant) && !parse_cc(text, &sm)) {
        char want[64], have[64];
        squash(text, want, sizeof want);
        for (unsigned i = 0; i < gpu_name_count && want[0]; i++) {
            squash(gpu_names[i].key, have, sizeof have);
            if (strcmp(want, have) == 0) {
                sm = gpu_names[i].sm;
                gpu_label = gpu_names[i].name;
                break;
            }
            squash(gpu_names[i].name, have, sizeof have);
            if (strcmp(want, have) == 0) {
                sm = gpu_names[i].sm;
                gpu_label = gpu_names[i].name;
                break;
            }
        }
        if (!gpu_label)
            return md_fail(err, MD_ERR_ARGUMENT,
                           "unknown GPU or architecture '%s' (try sm_86, 8.6 or a name such as p40)",
                           text);
    }
    out->arch = md_arch_by_sm(sm);
    if (!out->arch)
        return md_fail(err, MD_ERR_ARGUMENT, "unknown architecture '%s': no GPU has compute capability %u.%u",
                       text, sm / 10, sm % 10);
    /* A device is a compute capability: "sm_90a" names the same GPU as "sm_90". */
    char arch_name[24];
    md_arch_format(arch_name, sizeof arch_name, false, sm, 0);
    if (gpu_label)
        snprintf(out->label, sizeof out->label, "%s (%s)", gpu_label, arch_name);
    else
        snprintf(out->label, sizeof out->label, "%s", arch_name);
    return MD_OK;
}

unsigned md_arch_threads_at_max_registers(unsigned registers_per_block)
{
    enum { REGISTERS_PER_THREAD_AT_MOST = 256, WARP = 32 };
    return registers_per_block / REGISTERS_PER_THREAD_AT_MOST / WARP * WARP;
}
