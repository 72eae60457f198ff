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

/* The toolkit roots named in fixes are this machine's, found by the probes: never a path made
 * up from a version, and none for a log judged without this machine. */
static bool v_toolkit(const md_view *v, char *out, size_t size)
{
    if (!v->m || !v->m->build_toolkit)
        return false;
    toolkit_root(v->m->build_toolkit, out, size);
    return true;
}

/* The folder of that toolkit's libraries, with their link stubs in stubs/: ROOT/lib64, or for
 * Debian's packaged toolkit (its headers in /usr/include), the multiarch folder
 * /usr/lib/CPU-linux-gnu, where Debian puts libcudart.so and stubs/libcuda.so. */
static bool v_toolkit_lib(const md_view *v, char *out, size_t size)
{
    if (!v->m || !v->m->build_toolkit)
        return false;
    const md_toolkit *tk = v->m->build_toolkit;
    struct utsname u;
    if (strcmp(tk->include_dir, "/usr/include") == 0)
        return uname(&u) == 0 && PUT("/usr/lib/%s-linux-gnu", u.machine);
    char root[PATH_MAX];
    toolkit_root(tk, root, sizeof root);
    return PUT("%s/lib64", root);
}

static bool torch_cuda_major(const md_view *v, unsigned *major)
{
    const char *tc = md_view_torch_cuda(v);
    return tc && sscanf(tc, "%u", major) == 1;
}

static bool v_toolkit_for_torch(const md_view *v, char *out, size_t size)
{
    unsigned tmaj = 0;
    if (!torch_cuda_major(v, &tmaj))
        return false;
    for (size_t i = 0; v->m && i < v->m->n_toolkits; i++)
        if (v->m->toolkits[i].major == tmaj) {
            toolkit_root(&v->m->toolkits[i], out, size);
            return true;
        }
    return false;
}

/* The newest toolkit here whose SASS the driver loads (md_sass_needs_cuda, the rule the plan
 * uses) and that targets the GPU when it is known; NULL without the machine. */
static const md_toolkit *toolkit_driver_loads(const md_view *v)
{
    int cuda = md_view_driver_cuda(v);
    unsigned sm = md_view_gpu_sm(v);
    for (size_t i = 0; v->m && cuda > 0 && i < v->m->n_toolkits; i++) { /* newest first */
        const md_toolkit *tk = &v->m->toolkits[i];
        int needs = md_sass_needs_cuda(tk->major, tk->minor);
        if (needs > 0 && needs <= cuda && (!sm || md_toolkit_supports(tk, sm)))
            return tk;
    }
    return NULL;
}

static bool v_toolkit_for_driver(const md_view *v, char *out, size_t size)
{
    const md_toolkit *tk = toolkit_driver_loads(v);
    if (tk)
        toolkit_root(tk, out, size);
    return tk != NULL;
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

/* nvidia-smi where the probes found it (by name: it is on PATH); on a log's machine, its name. */
static bool v_nvidia_smi(const md_view *v, char *out, size_t size)
{
    if (v->m && !v->m->smi.found)
        return false;
    return PUT("nvidia-smi");
}

static void why_no_nvidia_smi(const md_view *v, char *out, size_t size)
{
    (void)v;
    snprintf(out, size, "nvidia-smi is not installed here (a loaded driver's version is in /proc/driver/nvidia/version)");
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

/* ---- the words for a value nothing gives ----------------------------------------------------- */

/* "neither this machine nor the log gives it" and its kin. */
static void why_default(const md_view *v, char *out, size_t size)
{
    snprintf(out, size, "%s", v->m && v->lf ? "neither this machine nor the log gives it"
                              : v->m       ? "this machine does not give it"
                                           : "the log does not give it (it is judged without this machine)");
}

/* Which CUDA release to install for the finding's GPU and driver, and how: " install CUDA 12.9
 * (msda-doctor fetch --cuda 12.9.1)". Empty when the table knows none. */
static void release_words(const md_view *v, const char *where, char *out, size_t size)
{
    int cuda = md_view_driver_cuda(v);
    unsigned sm = md_view_gpu_sm(v);
    const md_toolkit_row *row = cuda > 0 ? md_toolkit_row_newest_loading(sm, cuda, false)
                                         : md_toolkit_row_newest_for(sm, 0);
    const md_toolkit_row *fetchable = cuda > 0 ? md_toolkit_row_newest_loading(sm, cuda, true) : NULL;
    if (!fetchable && row && row->redist_release[0])
        fetchable = row;
    out[0] = '\0';
    if (fetchable)
        snprintf(out, size, "; install CUDA %s%s (msda-doctor fetch --cuda %s)", fetchable->version, where,
                 fetchable->redist_release);
    else if (row)
        snprintf(out, size, "; install CUDA %s%s (NVIDIA publishes no archive of it that fetch takes)", row->version,
                 where);
}

static void why_toolkit(const md_view *v, char *out, size_t size)
{
    char install[160];
    if (!v->m) {
        snprintf(out, size, "the log does not say where its machine's toolkit is");
        return;
    }
    release_words(v, "", install, sizeof install);
    snprintf(out, size, "no CUDA toolkit was found here%s", install);
}

static void why_toolkit_for_driver(const md_view *v, char *out, size_t size)
{
    char cuda[16], install[160];
    int api = md_view_driver_cuda(v);
    if (api <= 0) {
        snprintf(out, size, "the driver's CUDA version is not known");
        return;
    }
    md_cuda_version_text(api, cuda, sizeof cuda);
    release_words(v, v->m ? "" : " on that machine", install, sizeof install);
    if (!install[0])
        snprintf(out, size, "no toolkit msda-doctor knows writes SASS that a driver of CUDA %s loads; update the driver", cuda);
    else if (v->m)
        snprintf(out, size, "no toolkit installed here is one (the driver runs CUDA %s)%s, then build again", cuda,
                 install);
    else
        snprintf(out, size, "the toolkits of the log's machine are not known (its driver runs CUDA %s)%s, then "
                 "build with it", cuda, install);
}

static void why_toolkit_for_torch(const md_view *v, char *out, size_t size)
{
    unsigned tmaj;
    if (!torch_cuda_major(v, &tmaj)) {
        why_default(v, out, size);
        return;
    }
    unsigned n;
    const md_toolkit_row *rows = md_toolkit_rows(&n), *row = NULL;
    for (unsigned i = 0; i < n; i++)
        if (rows[i].major == tmaj && rows[i].redist_release[0])
            row = &rows[i];
    char install[96] = "";
    if (row)
        snprintf(install, sizeof install, " (msda-doctor fetch --cuda %s)", row->redist_release);
    if (v->m)
        snprintf(out, size, "no CUDA %u toolkit is installed here; install one%s", tmaj, install);
    else
        snprintf(out, size, "the toolkits of the log's machine are not known: use its CUDA %u toolkit", tmaj);
}

typedef struct {
    const char *name;
    const char *needs;
    bool (*fn)(const md_view *v, char *out, size_t size);
    const char *what;       /* what a command that needs it needs, for the words when nothing gives it */
    void (*why)(const md_view *v, char *out, size_t size); /* why nothing does; NULL: why_default */
} value_entry;

static const value_entry values[] = {
    { "arch", NULL, v_arch, "an --arch list", NULL },
    { "arch_list", NULL, v_arch_list, "a TORCH_CUDA_ARCH_LIST", NULL },
    { "binary", NULL, v_binary, "the installed op that cannot run", NULL },
    { "binary_sass", NULL, v_binary_sass, "the installed op's SASS", NULL },
    { "cudnn_dir", NULL, v_cudnn_dir, "cuDNN's folder", NULL },
    { "cudnn_major", NULL, v_cudnn_major, "cuDNN's major version", NULL },
    { "cudnn_soname", NULL, v_cudnn_soname, "cuDNN's library name", NULL },
    { "driver", NULL, v_driver, "the driver", NULL },
    { "nvidia_smi", NULL, v_nvidia_smi, "nvidia-smi", why_no_nvidia_smi },
    { "driver_cuda", NULL, v_driver_cuda, "the driver's CUDA version", NULL },
    { "driver_min", NULL, v_driver_min, "the oldest driver the toolkit needs", NULL },
    { "gcc_major", NULL, v_gcc_major, "the host gcc's version", NULL },
    { "gcc_max", NULL, v_gcc_max, "the newest gcc that nvcc accepts", NULL },
    { "gpu_arch", NULL, v_gpu_arch, "the GPU's architecture", NULL },
    { "gpu_cc", NULL, v_gpu_cc, "the GPU's compute capability", NULL },
    { "gpu_name", NULL, v_gpu_name, "the GPU's name", NULL },
    { "gpu_registers_per_block", NULL, v_gpu_registers, "the GPU's registers per block", NULL },
    { "im2col_step", "im2col_numbers", v_im2col_step, "an im2col_step that divides the batch", NULL },
    { "kernel", NULL, v_kernel, "the kernel that does not fit", NULL },
    { "kernel_registers", NULL, v_kernel_regs, "that kernel's registers", NULL },
    { "kernel_registers_needed", NULL, v_kernel_needed, "that kernel's registers per block", NULL },
    { "kernel_threads", NULL, v_kernel_threads, "that kernel's threads", NULL },
    { "log_build_archs", NULL, v_log_build_archs, "the log's build targets", NULL },
    { "nvcc_version", NULL, v_nvcc_version, "nvcc's version", NULL },
    { "python", NULL, v_python, "the Python", NULL },
    { "registers_per_thread_at_1024", NULL, v_regs_at_1024, "the GPU's registers per thread at 1024 threads", NULL },
    { "requested_arch", "requested_sm", v_requested_arch, "the architecture the log asked for", NULL },
    { "requested_arch_list", "requested_sm", v_requested_arch_list, "the architecture the log asked for", NULL },
    { "threads", NULL, v_threads, "a block size that fits the GPU's registers", NULL },
    { "toolkit", NULL, v_toolkit, "a CUDA toolkit's folder", why_toolkit },
    { "toolkit_lib", NULL, v_toolkit_lib, "a CUDA toolkit's library folder", why_toolkit },
    { "toolkit_for_driver", NULL, v_toolkit_for_driver, "a CUDA toolkit whose SASS the driver loads",
      why_toolkit_for_driver },
    { "toolkit_for_gpu", NULL, v_toolkit_for_gpu, "the newest toolkit that targets the GPU", NULL },
    { "toolkit_for_requested_arch", "requested_sm", v_toolkit_for_requested,
      "the newest toolkit that targets the architecture the log asked for", NULL },
    { "toolkit_for_torch", NULL, v_toolkit_for_torch, "a CUDA toolkit of torch's CUDA major version",
      why_toolkit_for_torch },
    { "torch_cuda", NULL, v_torch_cuda, "torch's CUDA version", NULL },
    { "torch_version", NULL, v_torch_version, "torch's version", NULL },
    { "wheel", NULL, v_wheel, "the wheel's name", NULL },
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

void md_view_missing(const md_view *v, const char *name, char *out, size_t size)
{
    const value_entry *e = find_value(name);
    char why[384], what[96];
    if (e) {
        (e->why ? e->why : why_default)(v, why, sizeof why);
        snprintf(what, sizeof what, "%s", e->what);
    } else { /* a capture of the signature: "the log's killed program" */
        snprintf(why, sizeof why, "the log's lines do not give it");
        snprintf(what, sizeof what, "the log's %s", name);
        for (char *c = what; *c; c++)
            if (*c == '_')
                *c = ' ';
    }
    snprintf(out, size, "Left out: a command that needs %s: %s.", what, why);
}
