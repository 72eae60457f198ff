/* The fact keys recipes/signatures.json may name (`confirm`, `rule_out`, `probe_when`, causes'
 * `when`, readings' `for` and `against`), each judged on the machine, on the log, or on both;
 * the table of keys and meanings is in recipes/README.md. A key the data names and
 * this table lacks fails the load (knowledge.c). */
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "diag_internal.h"
#include "binary/elf_symbols.h"
#include "machine/toolkit.h"

#define UNKNOWN MD_UNKNOWN

/* Whether any kept log line of F (hits and context) contains NEEDLE. */
static bool log_mentions(const md_finding *f, const char *needle)
{
    for (size_t i = 0; i < f->hits.n_context; i++)
        if (strstr(f->hits.context[i].text, needle))
            return true;
    for (size_t i = 0; i < f->hits.n_hits; i++)
        if (strstr(f->hits.hits[i].text, needle))
            return true;
    return false;
}

/* ---- binaries ------------------------------------------------------------------------------ */

typedef enum { B_CANNOT_RUN, B_PTX_ONLY, B_NOT_FITTING, B_FITS, B_PTX_NEWER } bin_question;

/* Over every readable binary with device code and every GPU: does any pair satisfy Q? */
static int binaries_answer(const md_machine *m, bin_question q)
{
    if (!m)
        return UNKNOWN;
    bool any = false, asked = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        if (!bf->readable || bf->n_sass + bf->n_ptx == 0)
            continue;
        for (size_t g = 0; g < m->n_gpus; g++) {
            const md_binary_on_gpu *o = &bf->on_gpu[g];
            asked = true;
            switch (q) {
            case B_CANNOT_RUN: any |= o->how == MD_RUNS_NOT; break;
            case B_PTX_ONLY: any |= o->how == MD_RUNS_PTX_JIT; break;
            case B_NOT_FITTING: any |= o->how != MD_RUNS_NOT && o->n_not_fitting > 0; break;
            case B_FITS: any |= o->how == MD_RUNS_SASS && o->n_not_fitting == 0; break;
            case B_PTX_NEWER:
                if (o->how == MD_RUNS_NOT && bf->n_ptx > 0) {
                    bool all_newer = true;
                    for (size_t k = 0; k < bf->n_ptx; k++)
                        all_newer &= bf->ptx_sms[k] > m->gpus[g].sm;
                    any |= all_newer;
                }
                break;
            }
        }
    }
    return asked ? any : UNKNOWN;
}

static int not(int v) { return v == UNKNOWN ? UNKNOWN : !v; }

static int f_gpu_arch_not_in_binary(const md_view *v) { return binaries_answer(v->m, B_CANNOT_RUN); }
static int f_gpu_arch_in_binary(const md_view *v) { return not(binaries_answer(v->m, B_CANNOT_RUN)); }
static int f_binary_ptx_newer(const md_view *v) { return binaries_answer(v->m, B_PTX_NEWER); }
static int f_binary_ptx_only(const md_view *v) { return binaries_answer(v->m, B_PTX_ONLY); }
static int f_regs_exceed(const md_view *v) { return binaries_answer(v->m, B_NOT_FITTING); }
static int f_kernels_fit(const md_view *v)
{
    int bad = binaries_answer(v->m, B_NOT_FITTING);
    return bad == 1 ? 0 : binaries_answer(v->m, B_FITS);
}

static int f_built_on_other_gpu(const md_view *v)
{
    const md_machine *m = v->m;
    if (!m)
        return UNKNOWN;
    bool asked = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        if (!bf->readable || bf->n_sass != 1 || m->n_gpus == 0)
            continue;
        asked = true;
        bool differs = true;
        for (size_t g = 0; g < m->n_gpus; g++)
            differs &= bf->sass_sms[0] != m->gpus[g].sm;
        if (differs)
            return 1;
    }
    return asked ? 0 : UNKNOWN;
}

/* Over the extensions (the original op's copies): any with cuda code (WANT true) / without. */
static int extension_cuda_code(const md_view *v, bool want)
{
    const md_machine *m = v->m;
    if (!m)
        return UNKNOWN;
    bool any = false, with = false, without = false;
    for (size_t b = 0; b < m->n_binaries; b++)
        if (m->binaries[b].readable && m->binaries[b].kind == MD_BIN_EXTENSION) {
            any = true;
            if (m->binaries[b].n_sass + m->binaries[b].n_ptx)
                with = true;
            else
                without = true;
        }
    return any ? (want ? with : without) : UNKNOWN;
}
static int f_has_cuda_code(const md_view *v) { return extension_cuda_code(v, true); }
static int f_has_no_cuda_code(const md_view *v) { return extension_cuda_code(v, false); }

/* Over the binaries where FIELD is known (>= 0): does any have it positive? */
static int any_binary(const md_machine *m, size_t field)
{
    if (!m)
        return UNKNOWN;
    bool known = false, any = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        int value = *(const int *)((const char *)&m->binaries[b] + field);
        if (value < 0)
            continue;
        known = true;
        any |= value > 0;
    }
    return known ? any : UNKNOWN;
}
static int f_undefined_torch(const md_view *v) { return any_binary(v->m, offsetof(md_binary_facts, torch_missing)); }
static int f_symbols_resolved(const md_view *v) { return not(f_undefined_torch(v)); }
static int f_links_torch_python(const md_view *v)
{
    return any_binary(v->m, offsetof(md_binary_facts, links_torch_python));
}
static int f_has_half(const md_view *v) { return any_binary(v->m, offsetof(md_binary_facts, half_kernels)); }
static int f_lacks_half(const md_view *v)
{
    /* the op lacks them when a copy whose kernels were read has none */
    const md_machine *m = v->m;
    if (!m)
        return UNKNOWN;
    bool known = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        if (m->binaries[b].half_kernels == 0)
            return 1;
        known |= m->binaries[b].half_kernels > 0;
    }
    return known ? 0 : UNKNOWN;
}

static int f_missing_torch_python(const md_view *v)
{
    const md_machine *m = v->m;
    if (!m)
        return UNKNOWN;
    bool known = false;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        if (bf->needs_torch_python < 0 || bf->links_torch_python < 0)
            continue;
        known = true;
        if (bf->needs_torch_python && !bf->links_torch_python)
            return 1;
    }
    return known ? 0 : UNKNOWN;
}

/* The original op and the other projects' copies index with 32-bit ints; our wheel with 64. */
static int f_int32_indices(const md_view *v)
{
    const md_machine *m = v->m;
    if (!m || m->n_binaries == 0)
        return UNKNOWN;
    for (size_t b = 0; b < m->n_binaries; b++)
        if (m->binaries[b].kind != MD_BIN_MSDA_WHEEL)
            return 1;
    return 0;
}

static int f_binary_installed(const md_view *v) { return v->m && v->m->py.ran ? v->m->py.msda_importable : UNKNOWN; }
static int f_binary_missing(const md_view *v) { return not(f_binary_installed(v)); }

/* ---- torch, toolkit, driver (the machine's where known, else the log's) ----------------------- */

static unsigned major_of(const char *version)
{
    unsigned major = 0;
    return version && sscanf(version, "%u", &major) == 1 ? major : 0;
}

static int cuda_majors_differ(const md_view *v)
{
    unsigned t = major_of(md_view_torch_cuda(v)), n = major_of(md_view_nvcc_version(v));
    return t && n ? t != n : UNKNOWN;
}
static int f_cuda_major_differs(const md_view *v) { return cuda_majors_differ(v); }
static int f_cuda_major_matches(const md_view *v) { return not(cuda_majors_differ(v)); }

static int f_without_magma(const md_view *v) { return v->m && v->m->py.has_magma >= 0 ? !v->m->py.has_magma : UNKNOWN; }
static int f_with_magma(const md_view *v) { return not(f_without_magma(v)); }

static int f_lacks_thc(const md_view *v)
{
    if (!v->m || !v->m->py.torch_lib_dir[0])
        return UNKNOWN;
    char path[PATH_MAX + 32];
    struct stat st;
    snprintf(path, sizeof path, "%s/../include/THC/THC.h", v->m->py.torch_lib_dir);
    return stat(path, &st) != 0;
}

static int driver_api(const md_view *v)
{
    return md_view_driver_cuda(v);
}
/* The machine's build toolkit; judged on a log alone, the nvcc the log names. */
static int f_driver_older_than_toolkit(const md_view *v)
{
    unsigned major = v->m ? (v->m->build_toolkit ? v->m->build_toolkit->major : 0) : major_of(md_view_nvcc_version(v));
    return major && driver_api(v) > 0 ? driver_api(v) < (int)major * 1000 : UNKNOWN;
}
static int f_driver_supports_toolkit(const md_view *v) { return not(f_driver_older_than_toolkit(v)); }
static int f_driver_older_than_torch(const md_view *v)
{
    unsigned t = major_of(v->m ? v->m->py.torch_cuda : v->lf ? v->lf->torch_cuda : NULL);
    return t && driver_api(v) > 0 ? driver_api(v) < (int)t * 1000 : UNKNOWN;
}

static int f_gpu_count_zero(const md_view *v) { return v->m ? v->m->n_gpus == 0 : UNKNOWN; }
static int f_gpu_visible(const md_view *v) { return not(f_gpu_count_zero(v)); }
static int f_multiple_gpus(const md_view *v) { return v->m ? v->m->n_gpus > 1 : UNKNOWN; }
static int f_regs_32k(const md_view *v)
{
    if (!v->m || v->m->n_gpus == 0)
        return UNKNOWN;
    for (size_t g = 0; g < v->m->n_gpus; g++)
        if (v->m->gpus[g].registers_per_block == 32768)
            return 1;
    return 0;
}
static int f_nvcc_found(const md_view *v) { return v->m ? v->m->n_toolkits > 0 : UNKNOWN; }
static int f_nvcc_not_found(const md_view *v) { return not(f_nvcc_found(v)); }

static int gcc_too_new(const md_view *v)
{
    unsigned major = 0, minor = 0, gcc = md_view_gcc_major(v);
    const char *nvcc = md_view_nvcc_version(v);
    if (!gcc || !nvcc || sscanf(nvcc, "%u.%u", &major, &minor) != 2)
        return UNKNOWN;
    unsigned max = md_toolkit_max_gcc(major, minor);
    return max ? gcc > max : UNKNOWN;
}
static int f_gcc_too_new(const md_view *v) { return gcc_too_new(v); }
static int f_gcc_supported(const md_view *v) { return not(gcc_too_new(v)); }

/* The architecture the log asked for (capture requested_sm), else the machine's GPUs, against
 * the build's nvcc. */
static int toolkit_lacks_arch(const md_view *v)
{
    const md_toolkit *tk = v->m ? v->m->build_toolkit : NULL;
    if (!tk)
        return UNKNOWN;
    char text[32];
    unsigned sm = 0, ma, mi;
    if (md_view_capture(v, "requested_sm", text, sizeof text))
        sm = sscanf(text, "%u.%u", &ma, &mi) == 2 ? ma * 10 + mi : (unsigned)strtoul(text, NULL, 10);
    if (sm)
        return !md_toolkit_supports(tk, sm);
    for (size_t g = 0; g < v->m->n_gpus; g++)
        if (!md_toolkit_supports(tk, v->m->gpus[g].sm))
            return 1;
    return v->m->n_gpus ? 0 : UNKNOWN;
}
static int f_nvcc_lacks_arch(const md_view *v) { return toolkit_lacks_arch(v); }
static int f_nvcc_supports_arch(const md_view *v) { return not(toolkit_lacks_arch(v)); }

static int f_is_jetson(const md_view *v) { return v->m ? v->m->jetson.present : UNKNOWN; }
static int f_nccl_absent(const md_view *v) { return v->m ? !v->m->nccl_found : UNKNOWN; }
static int f_nccl_present(const md_view *v) { return not(f_nccl_absent(v)); }

static int cudnn_link_missing(const md_view *v)
{
    if (!v->m || v->m->n_cudnn == 0)
        return UNKNOWN;
    bool missing = false;
    for (size_t i = 0; i < v->m->n_cudnn; i++)
        missing |= !v->m->cudnn[i].unversioned_link;
    return missing;
}
static int f_cudnn_missing(const md_view *v) { return cudnn_link_missing(v); }
static int f_cudnn_present(const md_view *v) { return not(cudnn_link_missing(v)); }

/* ---- what the log names, looked up on this machine ------------------------------------------ */

static int f_lib_in_torch_dir(const md_view *v)
{
    char lib[128], path[PATH_MAX + 160];
    struct stat st;
    if (!v->m || !v->m->py.torch_lib_dir[0] || !md_view_capture(v, "missing_lib", lib, sizeof lib))
        return UNKNOWN;
    snprintf(path, sizeof path, "%s/%s", v->m->py.torch_lib_dir, lib);
    return stat(path, &st) == 0;
}

/* The loader's own search without torch: LD_LIBRARY_PATH, then the system folders (under
 * --root). ld.so.cache is not read: the folders it lists by default are these. */
static int f_lib_on_search_path(const md_view *v)
{
    static const char *const system_dirs[] = { "/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib",
                                               "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                               "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu" };
    char lib[128], path[PATH_MAX + 160];
    struct stat st;
    if (!v->m || !md_view_capture(v, "missing_lib", lib, sizeof lib))
        return UNKNOWN;
    const char *ld = getenv("LD_LIBRARY_PATH");
    for (const char *p = ld ? ld : ""; *p;) {
        size_t len = strcspn(p, ":");
        snprintf(path, sizeof path, "%.*s/%s", (int)len, p, lib);
        if (len && stat(path, &st) == 0)
            return 1;
        p += len + (p[len] == ':');
    }
    for (size_t i = 0; i < sizeof system_dirs / sizeof system_dirs[0]; i++) {
        char dir[PATH_MAX];
        md_rooted(v->m, system_dirs[i], dir, sizeof dir);
        snprintf(path, sizeof path, "%s/%s", dir, lib);
        if (stat(path, &st) == 0)
            return 1;
    }
    return 0;
}

/* Does the libstdc++ the log names define the symbol version the log says is missing? */
static int libstdcxx_has_version(const md_view *v)
{
    char lib[PATH_MAX], version[64];
    if (!v->m || !md_view_capture(v, "libstdcxx", lib, sizeof lib) ||
        !md_view_capture(v, "glibcxx_version", version, sizeof version))
        return UNKNOWN;
    md_error err;
    int has = md_elf_defines_version(lib, version, &err);
    return has < 0 ? UNKNOWN : has;
}
static int f_libstdcxx_older(const md_view *v) { return not(libstdcxx_has_version(v)); }
static int f_libstdcxx_provides(const md_view *v) { return libstdcxx_has_version(v); }

/* ninja's object path names the source without its extension: are both a .cpp and a .cu there? */
static int f_basename_collision(const md_view *v)
{
    char obj[PATH_MAX - 8], path[PATH_MAX];
    struct stat st;
    if (!v->m || !md_view_capture(v, "source_obj", obj, sizeof obj) || obj[0] != '/')
        return UNKNOWN;
    snprintf(path, sizeof path, "%s.cu", obj);
    if (stat(path, &st) != 0)
        return UNKNOWN; /* the source tree is not on this machine */
    snprintf(path, sizeof path, "%s.cpp", obj);
    return stat(path, &st) == 0;
}

/* The source file the compiler complained about: does it call .type() or include THC? */
static int f_source_uses_tensor_type(const md_view *v)
{
    char path[PATH_MAX];
    if (!v->m || !md_view_capture(v, "source_file", path, sizeof path))
        return UNKNOWN;
    FILE *in = fopen(path, "r");
    if (!in)
        return UNKNOWN;
    char line[1024];
    bool uses = false;
    while (!uses && fgets(line, sizeof line, in))
        uses = strstr(line, ".type()") || strstr(line, "THC/");
    fclose(in);
    return uses;
}

static int f_imported_before_torch(const md_view *v)
{
    if (!v->f || !v->f->from_log || !log_mentions(v->f, "import MultiScaleDeformableAttention"))
        return UNKNOWN;
    return !log_mentions(v->f, "import torch");
}

/* ---- the build targets the log shows, against the GPU ---------------------------------------- */

static int build_archs_lack_gpu(const md_view *v)
{
    unsigned sm = md_view_gpu_sm(v);
    if (!v->lf || v->lf->n_build == 0 || !sm)
        return UNKNOWN;
    for (size_t i = 0; i < v->lf->n_build; i++) {
        unsigned b = v->lf->build_sms[i];
        if (v->lf->build_ptx[i] ? b <= sm : (b / 10 == sm / 10 && b <= sm))
            return 0;
    }
    return 1;
}
static int f_build_lacks_gpu(const md_view *v) { return build_archs_lack_gpu(v); }
static int f_build_covers_gpu(const md_view *v) { return not(build_archs_lack_gpu(v)); }

typedef struct {
    const char *name;
    const char *needs;      /* a capture it reads, or NULL */
    int (*fn)(const md_view *v);
} fact_entry;

static const fact_entry facts[] = {
    { "binary_built_on_other_gpu", NULL, f_built_on_other_gpu },
    { "binary_has_cuda_code", NULL, f_has_cuda_code },
    { "binary_has_half_kernels", NULL, f_has_half },
    { "binary_has_no_cuda_code", NULL, f_has_no_cuda_code },
    { "binary_installed", NULL, f_binary_installed },
    { "binary_kernels_fit_regs_per_block", NULL, f_kernels_fit },
    { "binary_lacks_half_kernels", NULL, f_lacks_half },
    { "binary_links_torch_python", NULL, f_links_torch_python },
    { "binary_missing", NULL, f_binary_missing },
    { "binary_missing_torch_python", NULL, f_missing_torch_python },
    { "binary_ptx_jit_possible", NULL, f_binary_ptx_only },
    { "binary_ptx_newer_than_gpu_arch", NULL, f_binary_ptx_newer },
    { "binary_ptx_only_for_gpu", NULL, f_binary_ptx_only },
    { "binary_regs_times_threads_exceed_block", NULL, f_regs_exceed },
    { "binary_symbols_resolved", NULL, f_symbols_resolved },
    { "binary_undefined_torch_symbols", NULL, f_undefined_torch },
    { "binary_uses_int32_indices", NULL, f_int32_indices },
    { "cudnn_unversioned_link_missing", NULL, f_cudnn_missing },
    { "cudnn_unversioned_link_present", NULL, f_cudnn_present },
    { "driver_older_than_toolkit", NULL, f_driver_older_than_toolkit },
    { "driver_older_than_torch_cuda", NULL, f_driver_older_than_torch },
    { "driver_supports_toolkit", NULL, f_driver_supports_toolkit },
    { "extension_imported_before_torch", NULL, f_imported_before_torch },
    { "gpu_arch_in_binary", NULL, f_gpu_arch_in_binary },
    { "gpu_arch_not_in_binary", NULL, f_gpu_arch_not_in_binary },
    { "gpu_count_zero", NULL, f_gpu_count_zero },
    { "gpu_regs_per_block_32k", NULL, f_regs_32k },
    { "gpu_visible", NULL, f_gpu_visible },
    { "is_jetson", NULL, f_is_jetson },
    { "libstdcxx_older_than_required", "libstdcxx", f_libstdcxx_older },
    { "libstdcxx_provides_required", "libstdcxx", f_libstdcxx_provides },
    { "log_build_archs_cover_gpu_arch", NULL, f_build_covers_gpu },
    { "log_build_archs_lack_gpu_arch", NULL, f_build_lacks_gpu },
    { "missing_lib_in_torch_lib_dir", "missing_lib", f_lib_in_torch_dir },
    { "missing_lib_on_search_path", "missing_lib", f_lib_on_search_path },
    { "multiple_gpus", NULL, f_multiple_gpus },
    { "nccl_absent", NULL, f_nccl_absent },
    { "nccl_present", NULL, f_nccl_present },
    { "nvcc_found", NULL, f_nvcc_found },
    { "nvcc_gcc_supported", NULL, f_gcc_supported },
    { "nvcc_gcc_too_new", NULL, f_gcc_too_new },
    { "nvcc_lacks_gpu_arch", NULL, f_nvcc_lacks_arch },
    { "nvcc_not_found", NULL, f_nvcc_not_found },
    { "nvcc_supports_gpu_arch", NULL, f_nvcc_supports_arch },
    { "source_basename_collision", "source_obj", f_basename_collision },
    { "source_uses_tensor_type", "source_file", f_source_uses_tensor_type },
    { "torch_cuda_major_differs", NULL, f_cuda_major_differs },
    { "torch_cuda_major_matches", NULL, f_cuda_major_matches },
    { "torch_lacks_thc_headers", NULL, f_lacks_thc },
    { "torch_with_magma", NULL, f_with_magma },
    { "torch_without_magma", NULL, f_without_magma },
};

static const fact_entry *find_fact(const char *name)
{
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++)
        if (strcmp(facts[i].name, name) == 0)
            return &facts[i];
    return NULL;
}

bool md_vocab_fact(const char *name, const char **needs)
{
    const fact_entry *e = find_fact(name);
    if (e && needs)
        *needs = e->needs;
    return e != NULL;
}

int md_view_fact(const md_view *v, const char *key)
{
    bool negate = key[0] == '!';
    const char *name = negate ? key + 1 : key;
    int value = UNKNOWN;
    if (strncmp(name, "hint:", 5) == 0) {
        const md_named_patterns *h = md_knowledge_hint(&v->d->kb, name + 5);
        value = h && v->lf ? v->lf->hints[h - v->d->kb.hints] : UNKNOWN;
    } else {
        const fact_entry *e = find_fact(name);
        value = e ? e->fn(v) : UNKNOWN;
    }
    return negate ? not(value) : value;
}
