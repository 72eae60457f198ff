/* The placeholders recipes/signatures.json may name in causes and fixes, each evaluated in a
 * finding's view (recipes/README.md lists them); captures named in the data come first. */
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "recipes/arch.h"
#include "diag_internal.h"
#include "build/build.h"
#include "build/package.h"
#include "recipes/product.h"
#include "recipes/toolkit_table.h"

/* The binary the finding is about on its GPU: one that cannot run there or does not fit. */
static const md_binary_facts *focus_binary(const md_view *v, const md_binary_on_gpu **on)
{
    if (!md_view_machine_gpu(v))
        return NULL;
    for (size_t b = 0; b < v->m->n_binaries; b++) {
        const md_binary_facts *bf = &v->m->binaries[b];
        const md_binary_on_gpu *o = &bf->on_gpu[v->f->gpu];
        if (bf->readable && bf->n_sass + bf->n_ptx && (o->how == MD_RUNS_NOT || o->n_not_fitting)) {
            if (on)
                *on = o;
            return bf;
        }
    }
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- placeholders --------------------------------------------------------------------------- */

#define PUT(...) (snprintf(out, size, __VA_ARGS__), true)

static bool table_toolkit(unsigned sm, int max_api, char *out, size_t size)
{
    const md_toolkit_row *row = md_toolkit_row_newest_for(sm, max_api);
    return row ? PUT("%s", row->version) : false;
}

static void toolkit_root(const md_toolkit *tk, char *out, size_t size)
{
    snprintf(out, size, "%s", tk->bin_dir);
    char *slash = strrchr(out, '/');
    if (slash && slash != out && strcmp(slash, "/bin") == 0)
        *slash = '\0';
}

static bool v_gpu_arch(const md_view *v, char *out, size_t size)
{
    unsigned sm = md_view_gpu_sm(v);
    return sm ? PUT("sm_%u", sm) : false;
}

static bool v_gpu_cc(const md_view *v, char *out, size_t size)
{
    unsigned sm = md_view_gpu_sm(v);
    return sm ? PUT("%u.%u", sm / 10, sm % 10) : false;
}

static bool v_gpu_name(const md_view *v, char *out, size_t size)
{
    const char *name = md_view_gpu_name(v);
    if (name)
        return PUT("%s", name);
    unsigned sm = md_view_gpu_sm(v);
    return sm ? PUT("GPU of compute capability %u.%u", sm / 10, sm % 10) : false;
}

/* The machine's distinct GPU architectures, as an --arch list (LIST false) or as
 * TORCH_CUDA_ARCH_LIST; else the GPU the log names. */
static bool gpu_archs(const md_view *v, bool list, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    const md_machine *m = v->m;
    for (size_t g = 0; m && g < m->n_gpus && at + 16 < size; g++) {
        bool dup = false;
        for (size_t k = 0; k < g; k++)
            dup |= m->gpus[k].sm == m->gpus[g].sm;
        if (dup)
            continue;
        if (list)
            at += (size_t)snprintf(out + at, size - at, "%s%u.%u", at ? ";" : "", m->gpus[g].sm / 10, m->gpus[g].sm % 10);
        else
            at += (size_t)snprintf(out + at, size - at, "%ssm_%u", at ? "," : "", m->gpus[g].sm);
    }
    if (!at && v->lf && v->lf->sm)
        at += (size_t)(list ? snprintf(out, size, "%u.%u", v->lf->sm / 10, v->lf->sm % 10)
                            : snprintf(out, size, "sm_%u", v->lf->sm));
    if (list && at)
        snprintf(out + at, size - at, "+PTX");
    if (!at && !list)
        snprintf(out, size, MD_BUILD_DEFAULT_ARCH);
    return out[0] != '\0';
}
static bool v_arch(const md_view *v, char *out, size_t size) { return gpu_archs(v, false, out, size); }
static bool v_arch_list(const md_view *v, char *out, size_t size) { return gpu_archs(v, true, out, size); }

static unsigned registers_per_block(const md_view *v)
{
    const md_machine_gpu *g = md_view_machine_gpu(v);
    if (g && g->registers_per_block)
        return g->registers_per_block;
    const md_arch *a = md_arch_by_sm(md_view_gpu_sm(v));
    return a ? a->registers_per_block : 0;
}

static bool v_threads(const md_view *v, char *out, size_t size)
{
    const md_binary_on_gpu *o = NULL;
    if (focus_binary(v, &o) && o->n_not_fitting)
        return PUT("%u", o->max_threads_that_fit);
    /* without the kernel's register count: the block that fits even at the most registers */
    unsigned regs = registers_per_block(v);
    return regs ? PUT("%u", md_arch_threads_at_max_registers(regs)) : false;
}

static bool v_gpu_registers(const md_view *v, char *out, size_t size)
{
    unsigned regs = registers_per_block(v);
    return regs ? PUT("%u", regs) : false;
}

static bool v_regs_at_1024(const md_view *v, char *out, size_t size)
{
    unsigned regs = registers_per_block(v);
    return regs ? PUT("%u", regs / 1024) : false;
}

static bool v_binary(const md_view *v, char *out, size_t size)
{
    const md_binary_facts *b = focus_binary(v, NULL);
    return b ? PUT("%s", base_name(b->path)) : false;
}

static bool v_binary_sass(const md_view *v, char *out, size_t size)
{
    const md_binary_facts *b = focus_binary(v, NULL);
    return b ? PUT("%s", b->n_sass ? b->sass : "nothing") : false;
}

static bool kernel_value(const md_view *v, int what, char *out, size_t size)
{
    const md_binary_on_gpu *o = NULL;
    if (!focus_binary(v, &o) || !o->n_not_fitting)
        return false;
    switch (what) {
    case 0: return PUT("%s", o->worst_kernel);
    case 1: return PUT("%u", o->worst_registers);
    case 2: return PUT("%u", o->worst_threads);
    default: return PUT("%lu", o->worst_needed);
    }
}
static bool v_kernel(const md_view *v, char *out, size_t size) { return kernel_value(v, 0, out, size); }
static bool v_kernel_regs(const md_view *v, char *out, size_t size) { return kernel_value(v, 1, out, size); }
static bool v_kernel_threads(const md_view *v, char *out, size_t size) { return kernel_value(v, 2, out, size); }
static bool v_kernel_needed(const md_view *v, char *out, size_t size) { return kernel_value(v, 3, out, size); }

static bool v_python(const md_view *v, char *out, size_t size)
{
    if (v->m && v->m->py.executable[0])
        return PUT("%s", v->m->py.executable);
    if (v->m && v->m->py.python[0])
        return PUT("%s", v->m->py.python);
    return PUT("python3");
}

static bool v_wheel(const md_view *v, char *out, size_t size)
{
    struct utsname u;
    /* a Jetson is aarch64 whatever machine reads its files (tests, --root); so is a log's Jetson GPU */
    unsigned sm = md_view_gpu_sm(v);
    const md_arch *arch = sm ? md_arch_by_sm(sm) : NULL;
    bool jetson = v->m ? v->m->jetson.present : arch && arch->jetson;
    const char *mach = jetson ? "aarch64" : uname(&u) == 0 ? u.machine : "x86_64";
    char wheel_name[256];
    md_error err;
    if (md_package_wheel_name(mach, wheel_name, sizeof wheel_name, &err) != MD_OK)
        return false;
    return PUT(MD_BUILD_DEFAULT_OUT "/%s", wheel_name);
}

static bool v_toolkit(const md_view *v, char *out, size_t size)
{
    if (v->m && v->m->build_toolkit) {
        toolkit_root(v->m->build_toolkit, out, size);
        return true;
    }
    const char *tc = md_view_torch_cuda(v);
    return tc ? PUT("/usr/local/cuda-%s", tc) : false;
}

static bool v_toolkit_for_torch(const md_view *v, char *out, size_t size)
{
    const char *tc = md_view_torch_cuda(v);
    unsigned tmaj = 0;
    if (!tc || sscanf(tc, "%u", &tmaj) != 1)
        return false;
    for (size_t i = 0; v->m && i < v->m->n_toolkits; i++)
        if (v->m->toolkits[i].major == tmaj) {
            toolkit_root(&v->m->toolkits[i], out, size);
            return true;
        }
    return PUT("/usr/local/cuda-%s", tc);
}

static bool v_toolkit_for_driver(const md_view *v, char *out, size_t size)
{
    int cuda = md_view_driver_cuda(v);
    return cuda > 0 && table_toolkit(md_view_gpu_sm(v), cuda, out, size);
}

static bool v_toolkit_for_gpu(const md_view *v, char *out, size_t size)
{
    unsigned sm = md_view_gpu_sm(v);
    return sm && table_toolkit(sm, 0, out, size);
}

static bool requested_sm(const md_view *v, unsigned *sm)
{
    char text[32];
    *sm = md_view_capture(v, "requested_sm", text, sizeof text) ? md_sm_of_text(text) : 0;
    return *sm != 0;
}

static bool v_requested_arch(const md_view *v, char *out, size_t size)
{
    unsigned sm;
    return requested_sm(v, &sm) ? PUT("sm_%u", sm) : false;
}

static bool v_requested_arch_list(const md_view *v, char *out, size_t size)
{
    unsigned sm;
    return requested_sm(v, &sm) ? PUT("%u.%u+PTX", sm / 10, sm % 10) : false;
}

static bool v_toolkit_for_requested(const md_view *v, char *out, size_t size)
{
    unsigned sm;
    return requested_sm(v, &sm) && table_toolkit(sm, 0, out, size);
}

static bool v_torch_cuda(const md_view *v, char *out, size_t size)
{
    const char *tc = md_view_torch_cuda(v);
    return tc ? PUT("%s", tc) : false;
}

static bool v_torch_version(const md_view *v, char *out, size_t size)
{
    if (v->m && v->m->py.has_torch)
        return PUT("%s", v->m->py.torch_version);
    return v->lf && v->lf->torch_version[0] ? PUT("%s", v->lf->torch_version) : false;
}

static bool v_nvcc_version(const md_view *v, char *out, size_t size)
{
    const char *n = md_view_nvcc_version(v);
    return n ? PUT("%s", n) : false;
}

static bool v_driver(const md_view *v, char *out, size_t size)
{
    if (v->m && v->m->driver_release[0])
        return PUT("driver %s", v->m->driver_release);
    if (!v->m && v->lf && v->lf->driver[0])
        return PUT("driver %s", v->lf->driver);
    return PUT("driver");
}

static bool v_driver_cuda(const md_view *v, char *out, size_t size)
{
    int cuda = md_view_driver_cuda(v);
    if (cuda <= 0)
        return false;
    md_cuda_version_text(cuda, out, size);
    return true;
}

static bool v_driver_min(const md_view *v, char *out, size_t size)
{
    if (v->m && v->m->build_toolkit) {
        md_toolkit_min_driver(v->m->build_toolkit, out, size);
        return out[0] != '\0';
    }
    unsigned ma, mi;
    const char *n = md_view_nvcc_version(v);
    const md_toolkit_row *row = n && sscanf(n, "%u.%u", &ma, &mi) == 2 ? md_toolkit_row_for(ma, mi) : NULL;
    return row ? PUT("%s", row->min_driver) : false;
}

static bool v_gcc_max(const md_view *v, char *out, size_t size)
{
    unsigned ma, mi;
    const char *n = md_view_nvcc_version(v);
    const md_toolkit_row *row = n && sscanf(n, "%u.%u", &ma, &mi) == 2 ? md_toolkit_row_for(ma, mi) : NULL;
    return row && row->max_gcc ? PUT("%u", row->max_gcc) : false;
}

static bool v_gcc_major(const md_view *v, char *out, size_t size)
{
    unsigned g = md_view_gcc_major(v);
    return g ? PUT("%u", g) : false;
}

static bool v_log_build_archs(const md_view *v, char *out, size_t size)
{
    if (!v->lf || v->lf->n_build == 0)
        return false;
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < v->lf->n_build && at + 16 < size; i++)
        at += (size_t)snprintf(out + at, size - at, "%s%s_%u", i ? ", " : "", v->lf->build_ptx[i] ? "compute" : "sm",
                               v->lf->build_sms[i]);
    return true;
}

static const md_cudnn_dir *cudnn_without_link(const md_view *v)
{
    for (size_t i = 0; v->m && i < v->m->n_cudnn; i++)
        if (!v->m->cudnn[i].unversioned_link)
            return &v->m->cudnn[i];
    return NULL;
}
static bool v_cudnn_dir(const md_view *v, char *out, size_t size)
{
    const md_cudnn_dir *c = cudnn_without_link(v);
    return c ? PUT("%s", c->dir) : false;
}
static bool v_cudnn_soname(const md_view *v, char *out, size_t size)
{
    const md_cudnn_dir *c = cudnn_without_link(v);
    return c ? PUT("%s", c->soname) : false;
}
static bool v_cudnn_major(const md_view *v, char *out, size_t size)
{
    const md_cudnn_dir *c = cudnn_without_link(v);
    return c ? PUT("%u", c->major) : false;
}

/* batch(%d) must divide im2col_step(%d)9664: the numbers are run together. torch's default step
 * is 64 and steps are powers of two, so the split that leaves a power of two is taken. */
static bool v_im2col_step(const md_view *v, char *out, size_t size)
{
    char digits[32];
    if (!md_view_capture(v, "im2col_numbers", digits, sizeof digits))
        return false;
    size_t n = strlen(digits);
    for (size_t cut = 1; cut < n; cut++) {
        unsigned long step = strtoul(digits + cut, NULL, 10);
        char head[32];
        snprintf(head, sizeof head, "%.*s", (int)cut, digits);
        unsigned long batch = strtoul(head, NULL, 10);
        if (digits[cut] == '0' || step == 0 || (step & (step - 1)) != 0 || batch == 0)
            continue;
        unsigned long best = 1;
        for (unsigned long k = 1; k <= step && k <= batch; k++)
            if (batch % k == 0)
                best = k;
        return PUT("%lu", best);
    }
    return false;
}

typedef struct {
    const char *name;
    const char *needs;
    bool (*fn)(const md_view *v, char *out, size_t size);
} value_entry;

static const value_entry values[] = {
    { "arch", NULL, v_arch },
    { "arch_list", NULL, v_arch_list },
    { "binary", NULL, v_binary },
    { "binary_sass", NULL, v_binary_sass },
    { "cudnn_dir", NULL, v_cudnn_dir },
    { "cudnn_major", NULL, v_cudnn_major },
    { "cudnn_soname", NULL, v_cudnn_soname },
    { "driver", NULL, v_driver },
    { "driver_cuda", NULL, v_driver_cuda },
    { "driver_min", NULL, v_driver_min },
    { "gcc_major", NULL, v_gcc_major },
    { "gcc_max", NULL, v_gcc_max },
    { "gpu_arch", NULL, v_gpu_arch },
    { "gpu_cc", NULL, v_gpu_cc },
    { "gpu_name", NULL, v_gpu_name },
    { "gpu_registers_per_block", NULL, v_gpu_registers },
    { "im2col_step", "im2col_numbers", v_im2col_step },
    { "kernel", NULL, v_kernel },
    { "kernel_registers", NULL, v_kernel_regs },
    { "kernel_registers_needed", NULL, v_kernel_needed },
    { "kernel_threads", NULL, v_kernel_threads },
    { "log_build_archs", NULL, v_log_build_archs },
    { "nvcc_version", NULL, v_nvcc_version },
    { "python", NULL, v_python },
    { "registers_per_thread_at_1024", NULL, v_regs_at_1024 },
    { "requested_arch", "requested_sm", v_requested_arch },
    { "requested_arch_list", "requested_sm", v_requested_arch_list },
    { "threads", NULL, v_threads },
    { "toolkit", NULL, v_toolkit },
    { "toolkit_for_driver", NULL, v_toolkit_for_driver },
    { "toolkit_for_gpu", NULL, v_toolkit_for_gpu },
    { "toolkit_for_requested_arch", "requested_sm", v_toolkit_for_requested },
    { "toolkit_for_torch", NULL, v_toolkit_for_torch },
    { "torch_cuda", NULL, v_torch_cuda },
    { "torch_version", NULL, v_torch_version },
    { "wheel", NULL, v_wheel },
};

static const value_entry *find_value(const char *name)
{
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (strcmp(values[i].name, name) == 0)
            return &values[i];
    return NULL;
}

bool md_vocab_placeholder(const char *name, const char **needs)
{
    const value_entry *e = find_value(name);
    if (e && needs)
        *needs = e->needs;
    return e != NULL;
}

bool md_view_value(const md_view *v, const char *name, char *out, size_t size)
{
    if (md_view_capture(v, name, out, size))
        return true;
    const value_entry *e = find_value(name);
    return e && e->fn(v, out, size);
}
