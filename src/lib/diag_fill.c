/* Ties one finding to the machine: which GPU it is about, the probe facts that confirm or argue
 * against it, the evidence, the cause in one sentence, and the fixes and notes with their
 * {placeholders} filled from the probes and the log (tests/fixtures/logs/README.md). */
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "arch.h"
#include "diagnose.h"
#include "product.h"
#include "toolkit_table.h"

static bool is(const md_finding *f, const char *id)
{
    return strcmp(f->sig->id, id) == 0;
}

static void add_evidence(md_finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_evidence(md_finding *f, const char *fmt, ...)
{
    if (f->n_evidence == MD_FINDING_EVIDENCE)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence[f->n_evidence++], sizeof f->evidence[0], fmt, ap);
    va_end(ap);
}

/* Capture group GROUP of PATTERN in F's kept log lines into OUT: the matching lines first, then
 * the context from the line nearest the first hit backwards. */
static bool log_capture_group(const md_finding *f, const char *pattern, int group, char *out, size_t size)
{
    regex_t re;
    if (group > 3 || regcomp(&re, pattern, REG_EXTENDED) != 0)
        return false;
    bool found = false;
    size_t total = f->hits.n_hits + f->hits.n_context;
    for (size_t i = 0; i < total && !found; i++) {
        const char *text = i < f->hits.n_hits ? f->hits.hits[i].text
                                               : f->hits.context[f->hits.n_context - 1 - (i - f->hits.n_hits)].text;
        regmatch_t g[4];
        if (regexec(&re, text, 4, g, 0) == 0 && g[group].rm_so >= 0) {
            snprintf(out, size, "%.*s", (int)(g[group].rm_eo - g[group].rm_so), text + g[group].rm_so);
            found = true;
        }
    }
    regfree(&re);
    return found;
}

static bool log_capture(const md_finding *f, const char *pattern, char *out, size_t size)
{
    return log_capture_group(f, pattern, 1, out, size);
}

/* The architecture a log line names ('compute_86' quoted as nvcc does, sm_86, compute_86), as an
 * SM number; 0 when none. */
static unsigned log_arch(const md_finding *f)
{
    static const char *const patterns[] = { "_([0-9]+)[af]?'", "sm_([0-9]+)", "compute_([0-9]+)" };
    char num[16];
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        if (log_capture(f, patterns[i], num, sizeof num))
            return (unsigned)strtoul(num, NULL, 10);
    }
    return 0;
}

/* ---- which GPU ---------------------------------------------------------------------------- */

static int pick_gpu(const md_diagnosis *d, const md_finding *f)
{
    const md_machine *m = d->machine;
    if (m->n_gpus == 0)
        return -1;
    for (size_t g = 0; g < m->n_gpus; g++)
        for (size_t b = 0; b < m->n_binaries; b++) {
            const md_binary_on_gpu *o = &m->binaries[b].on_gpu[g];
            if (!m->binaries[b].readable || m->binaries[b].n_sass + m->binaries[b].n_ptx == 0)
                continue;
            if ((is(f, "no-kernel-image") && o->how == MD_RUNS_NOT) ||
                (is(f, "ptx-jit-failure") && o->how == MD_RUNS_PTX_JIT) ||
                (is(f, "launch-out-of-resources") && o->how != MD_RUNS_NOT && o->n_not_fitting))
                return (int)g;
        }
    if (is(f, "launch-out-of-resources"))
        for (size_t g = 0; g < m->n_gpus; g++)
            if (m->gpus[g].registers_per_block && m->gpus[g].registers_per_block < 65536)
                return (int)g;
    return 0;
}

/* ---- placeholders ------------------------------------------------------------------------- */

/* The newest CUDA version that targets SM (when non-zero) and that a driver of API version
 * MAX_API runs (when non-zero). */
static bool table_toolkit(unsigned sm, int max_api, char *out, size_t size)
{
    const md_toolkit_row *row = md_toolkit_row_newest_for(sm, max_api);
    if (row)
        snprintf(out, size, "%s", row->version);
    return row != NULL;
}

static void toolkit_root(const md_toolkit *tk, char *out, size_t size)
{
    snprintf(out, size, "%s", tk->bin_dir);
    char *slash = strrchr(out, '/');
    if (slash && slash != out && strcmp(slash, "/bin") == 0)
        *slash = '\0';
}

/* batch(%d) must divide im2col_step(%d)9664: the numbers are run together. torch's default step
 * is 64 and steps are powers of two, so the split that leaves a power of two is taken. */
static bool im2col_step(const md_finding *f, char *out, size_t size)
{
    char digits[32];
    if (!log_capture(f, "im2col_step\\( ?%d\\)([0-9]+)", digits, sizeof digits))
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
        snprintf(out, size, "%lu", best);
        return true;
    }
    return false;
}

static bool placeholder(const md_diagnosis *d, const md_finding *f, const char *name, char *out, size_t size)
{
    const md_machine *m = d->machine;
    const md_machine_gpu *gpu = f->gpu >= 0 ? &m->gpus[f->gpu] : NULL;
    const md_toolkit *tk = m->build_toolkit;
    unsigned sm = gpu ? gpu->sm : log_arch(f);
    if (!strcmp(name, "gpu_arch") || !strcmp(name, "gpu_cc")) {
        if (!sm)
            return false;
        if (!strcmp(name, "gpu_arch"))
            snprintf(out, size, "sm_%u", sm);
        else
            snprintf(out, size, "%u.%u", sm / 10, sm % 10);
        return true;
    }
    if (!strcmp(name, "arch") || !strcmp(name, "arch_list")) {
        bool list = !strcmp(name, "arch_list");
        size_t at = 0;
        out[0] = '\0';
        unsigned logged = is(f, "unsupported-gpu-arch") ? log_arch(f) : 0;
        if (logged)
            at += (size_t)snprintf(out, size, list ? "%u.%u+PTX" : "sm_%u", list ? logged / 10 : logged, logged % 10);
        for (size_t g = 0; g < m->n_gpus && !logged && at + 16 < size; g++) {
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
        if (list && at && !logged)
            snprintf(out + at, size - at, "+PTX");
        if (!at && !list)
            snprintf(out, size, "all"); /* msda-doctor build's own default */
        return out[0] != '\0';
    }
    if (!strcmp(name, "threads")) {
        if (f->gpu < 0)
            return false;
        for (size_t b = 0; b < m->n_binaries; b++)
            if (m->binaries[b].on_gpu[f->gpu].n_not_fitting) {
                snprintf(out, size, "%u", m->binaries[b].on_gpu[f->gpu].max_threads_that_fit);
                return true;
            }
        /* without the kernel's register count: the block that fits even at 255 registers (8192
         * per warp after rounding), 128 threads on 32K registers, 256 on 64K */
        snprintf(out, size, "%u", (gpu->registers_per_block ? gpu->registers_per_block : 65536) / 256);
        return true;
    }
    if (!strcmp(name, "python")) {
        snprintf(out, size, "%s", m->py.executable[0] ? m->py.executable : m->py.python[0] ? m->py.python : "python3");
        return true;
    }
    if (!strcmp(name, "wheel")) {
        struct utsname u;
        /* a Jetson is aarch64 whatever machine reads its files (tests, --root) */
        const char *mach = m->jetson.present ? "aarch64" : uname(&u) == 0 ? u.machine : "x86_64";
        char wheel_name[256];
        md_error err;
        if (md_product_wheel_name(mach, wheel_name, sizeof wheel_name, &err) != MD_OK)
            return false;
        snprintf(out, size, "wheels/dist/%s", wheel_name);
        return true;
    }
    if (!strcmp(name, "toolkit")) {
        unsigned tmaj = 0;
        sscanf(m->py.torch_cuda, "%u", &tmaj);
        if (is(f, "cuda-version-mismatch") && tmaj) {
            for (size_t i = 0; i < m->n_toolkits; i++)
                if (m->toolkits[i].major == tmaj) {
                    toolkit_root(&m->toolkits[i], out, size);
                    return true;
                }
            snprintf(out, size, "/usr/local/cuda-%s", m->py.torch_cuda);
            return true;
        }
        if (tk) {
            toolkit_root(tk, out, size);
            return true;
        }
        if (m->py.torch_cuda[0]) {
            snprintf(out, size, "/usr/local/cuda-%s", m->py.torch_cuda);
            return true;
        }
        return false;
    }
    if (!strcmp(name, "toolkit_version")) {
        if (is(f, "unsupported-gpu-arch") && log_arch(f))
            return table_toolkit(log_arch(f), 0, out, size);
        if (is(f, "driver-too-old") && m->driver_loaded && m->driver.driver_version > 0)
            return table_toolkit(sm, m->driver.driver_version, out, size);
        if (m->py.torch_cuda[0]) {
            snprintf(out, size, "%s", m->py.torch_cuda);
            return true;
        }
        return sm && table_toolkit(sm, 0, out, size);
    }
    if (!strcmp(name, "torch_cuda")) {
        snprintf(out, size, "%s", m->py.torch_cuda);
        return m->py.torch_cuda[0] != '\0';
    }
    if (!strcmp(name, "driver_min")) {
        if (!tk)
            return false;
        md_toolkit_min_driver(tk, out, size);
        return out[0] != '\0';
    }
    if (!strcmp(name, "gcc_max")) {
        if (log_capture(f, "gcc versions later than ([0-9]+)", out, size))
            return true;
        if (!tk || !tk->max_gcc)
            return false;
        snprintf(out, size, "%u", tk->max_gcc);
        return true;
    }
    if (!strcmp(name, "file"))
        /* a local path (after a space, quote or '='), not the path part of a URL */
        return log_capture_group(f, "(^|[ '\"=])(/[^ '\"]+\\.(zip|tar\\.gz|tgz|tar\\.xz|tar\\.bz2|whl|tar|gz|xz|bz2))",
                                 2, out, size);
    if (!strcmp(name, "script"))
        return log_capture(f, "python[0-9.]* +([^ ]+\\.py)", out, size) ||
               log_capture(f, "File \"([^\"]+\\.py)\"", out, size);
    if (!strcmp(name, "libstdcxx"))
        return log_capture(f, "(/[^ :`']+libstdc\\+\\+\\.so\\.6)", out, size);
    if (!strcmp(name, "glibcxx_version"))
        return log_capture(f, "(GLIBCXX_3\\.4\\.[0-9]+|CXXABI_1\\.3\\.[0-9]+)", out, size);
    if (!strcmp(name, "cudnn_dir") || !strcmp(name, "cudnn_soname") || !strcmp(name, "cudnn_major")) {
        const md_cudnn_dir *c = NULL;
        for (size_t i = 0; i < m->n_cudnn && !c; i++)
            if (!m->cudnn[i].unversioned_link)
                c = &m->cudnn[i];
        if (!strcmp(name, "cudnn_dir")) {
            if (log_capture(f, "'(/[^']*)/libcudnn\\.so'", out, size) ||
                log_capture(f, "(/[^ ']*)/libcudnn\\.so", out, size))
                return true;
            if (!c)
                return false;
            snprintf(out, size, "%s", c->dir);
            return true;
        }
        if (!c)
            return false;
        if (!strcmp(name, "cudnn_soname"))
            snprintf(out, size, "%s", c->soname);
        else
            snprintf(out, size, "%u", c->major);
        return true;
    }
    if (!strcmp(name, "source_cu") || !strcmp(name, "source_cu_renamed")) {
        /* ninja's object path mirrors the source's absolute path under build/temp.<platform>/ */
        char obj[400];
        if (!log_capture(f, "multiple rules generate [^ ]*/temp\\.[^/]*(/[^ ]+)\\.o", obj, sizeof obj) &&
            !log_capture(f, "multiple rules generate ([^ ]+)\\.o", obj, sizeof obj))
            return false;
        snprintf(out, size, "%s%s.cu", obj, !strcmp(name, "source_cu") ? "" : "_cuda");
        return true;
    }
    if (!strcmp(name, "im2col_step"))
        return im2col_step(f, out, size);
    return false;
}

/* Copies TEMPLATE into OUT with every known {name} replaced; an unknown value is written as
 * <name> so that the command visibly needs it. ${NAME} (shell, CMake) is left alone. */
static void fill(const md_diagnosis *d, const md_finding *f, const char *template, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    for (const char *p = template; *p && at + 1 < size;) {
        size_t len = 0;
        if (*p == '{' && (p == template || p[-1] != '$')) {
            while (p[1 + len] && ((p[1 + len] >= 'a' && p[1 + len] <= 'z') || (p[1 + len] >= '0' && p[1 + len] <= '9') ||
                                p[1 + len] == '_'))
                len++;
            if (len == 0 || p[1 + len] != '}')
                len = 0;
        }
        if (len == 0) {
            out[at++] = *p++;
            out[at] = '\0';
            continue;
        }
        char name[64], value[512];
        snprintf(name, sizeof name, "%.*s", (int)len, p + 1);
        if (placeholder(d, f, name, value, sizeof value))
            at += (size_t)snprintf(out + at, size - at, "%s", value);
        else
            at += (size_t)snprintf(out + at, size - at, "<%s>", name);
        if (at >= size)
            at = size - 1;
        p += len + 2;
    }
}

/* ---- evidence and cause ------------------------------------------------------------------- */

static bool about_gpu(const md_finding *f)
{
    static const char *const ids[] = { "no-kernel-image", "launch-out-of-resources", "ptx-jit-failure",
                                       "dtype-half-unsupported", "illegal-memory-access", "invalid-configuration",
                                       "unsupported-gpu-arch" };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (is(f, ids[i]))
            return true;
    return false;
}

static const char *binary_label(const md_binary_facts *b)
{
    const char *slash = strrchr(b->path, '/');
    return slash ? slash + 1 : b->path;
}

static void binary_evidence(const md_diagnosis *d, md_finding *f)
{
    const md_machine *m = d->machine;
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        if (!bf->readable)
            continue;
        char on[300] = "";
        if (f->gpu >= 0 && bf->n_sass + bf->n_ptx) {
            const md_binary_on_gpu *o = &bf->on_gpu[f->gpu];
            const md_machine_gpu *g = &m->gpus[f->gpu];
            if (o->how == MD_RUNS_NOT)
                snprintf(on, sizeof on, ": cannot run on %s (sm_%u)", g->name, g->sm);
            else if (o->n_not_fitting)
                snprintf(on, sizeof on, ": on %s, %s takes %u registers x %u threads = %lu of %u registers per block",
                         g->name, o->worst_kernel, o->worst_registers, o->worst_threads, o->worst_needed,
                         g->registers_per_block);
            else if (o->how == MD_RUNS_PTX_JIT)
                snprintf(on, sizeof on, ": runs on %s only through PTX JIT", g->name);
            else
                snprintf(on, sizeof on, ": runs on %s", g->name);
        }
        add_evidence(f, "%s: SASS %s; PTX %s%s", bf->path, bf->n_sass ? bf->sass : "none", bf->n_ptx ? bf->ptx : "none", on);
    }
}

static void machine_evidence(const md_diagnosis *d, md_finding *f)
{
    const md_machine *m = d->machine;
    const md_toolkit *tk = m->build_toolkit;
    char cuda[16];
    md_cuda_version_text(m->driver.driver_version, cuda, sizeof cuda);
    if (about_gpu(f) && f->gpu >= 0) {
        const md_machine_gpu *g = &m->gpus[f->gpu];
        add_evidence(f, "GPU %d: %s, sm_%u (compute capability %u.%u), %u registers per block (from the %s)", f->gpu,
                     g->name, g->sm, g->sm / 10, g->sm % 10, g->registers_per_block, g->source);
    }
    if (about_gpu(f) || is(f, "cpu-only-build") || is(f, "dtype-mismatch"))
        binary_evidence(d, f);
    if ((is(f, "driver-too-old") || is(f, "cuda-home-missing") || is(f, "unsupported-gpu-arch")) && tk)
        add_evidence(f, "nvcc %s: %s", tk->version, tk->nvcc);
    if (is(f, "driver-too-old") && m->driver_loaded)
        add_evidence(f, "driver %s: CUDA %s", m->driver_release[0] ? m->driver_release : "(release unknown)", cuda);
    if (is(f, "host-compiler-unsupported") && tk && m->default_compiler)
        add_evidence(f, "nvcc %s accepts gcc up to %u; the default g++ is %s (gcc %u)", tk->version, tk->max_gcc,
                     m->default_compiler->path, m->default_compiler->major);
    if (is(f, "cuda-version-mismatch") && m->py.has_torch)
        add_evidence(f, "torch %s built with CUDA %s; nvcc %s", m->py.torch_version,
                     m->py.torch_cuda[0] ? m->py.torch_cuda : "none", tk ? tk->version : "not found");
    if ((is(f, "nccl-link-error") || is(f, "magma-missing") || is(f, "cudnn-not-found")) && m->jetson.present)
        add_evidence(f, "Jetson: %s, L4T %s, JetPack %s", m->jetson.module[0] ? m->jetson.module : "unknown module",
                     m->jetson.l4t, m->jetson.jetpack);
    if (is(f, "magma-missing") && m->py.has_magma >= 0)
        add_evidence(f, "torch %s: torch.cuda.has_magma is %s", m->py.torch_version, m->py.has_magma ? "True" : "False");
    if (is(f, "cudnn-not-found"))
        for (size_t i = 0; i < m->n_cudnn; i++)
            add_evidence(f, "%s/%s%s", m->cudnn[i].dir, m->cudnn[i].soname,
                         m->cudnn[i].unversioned_link ? ", with libcudnn.so" : ", without libcudnn.so");
}

static void cause(const md_diagnosis *d, md_finding *f)
{
    const md_machine *m = d->machine;
    const md_machine_gpu *g = f->gpu >= 0 ? &m->gpus[f->gpu] : NULL;
    const md_toolkit *tk = m->build_toolkit;
    snprintf(f->cause, sizeof f->cause, "%s", f->sig->meaning);
    if (is(f, "no-kernel-image") && g) {
        for (size_t b = 0; b < m->n_binaries; b++) {
            const md_binary_facts *bf = &m->binaries[b];
            if (!bf->readable || bf->n_sass + bf->n_ptx == 0 || bf->on_gpu[f->gpu].how != MD_RUNS_NOT)
                continue;
            snprintf(f->cause, sizeof f->cause, "%s carries SASS for %s and %s, so the %s (sm_%u) has nothing it can "
                     "run: SASS runs only on its own major version at an equal or higher minor, and PTX only on "
                     "GPUs at or above its own architecture.", binary_label(bf), bf->n_sass ? bf->sass : "nothing",
                     bf->n_ptx ? "only PTX newer than the GPU" : "no PTX", g->name, g->sm);
            return;
        }
    }
    if (is(f, "launch-out-of-resources") && g && g->registers_per_block) {
        for (size_t b = 0; b < m->n_binaries; b++) {
            const md_binary_on_gpu *o = &m->binaries[b].on_gpu[f->gpu];
            if (!m->binaries[b].readable || o->how == MD_RUNS_NOT || !o->n_not_fitting)
                continue;
            snprintf(f->cause, sizeof f->cause, "The %s gives one block %u registers; %s in %s uses %u registers per "
                     "thread, so a %u-thread block needs %lu and the launch is refused; at most %u threads fit.",
                     g->name, g->registers_per_block, o->worst_kernel, binary_label(&m->binaries[b]),
                     o->worst_registers, o->worst_threads, o->worst_needed, o->max_threads_that_fit);
            return;
        }
        if (g->registers_per_block < 65536)
            snprintf(f->cause, sizeof f->cause, "The %s gives one block %u registers, not 65536: the op's 1024-thread "
                     "blocks fit only if its kernels use at most %u registers per thread, and they use more; "
                     "%u threads fit at any register count.", g->name, g->registers_per_block,
                     g->registers_per_block / 1024, g->registers_per_block / 256);
        return;
    }
    if (is(f, "driver-too-old") && tk && m->driver_loaded && m->driver.driver_version < (int)tk->major * 1000) {
        char have[16], min[32];
        md_cuda_version_text(m->driver.driver_version, have, sizeof have);
        md_toolkit_min_driver(tk, min, sizeof min);
        snprintf(f->cause, sizeof f->cause, "The driver%s%s supports CUDA %s, older than the CUDA %s toolkit here, which "
                 "needs driver %s or newer.", m->driver_release[0] ? " " : "", m->driver_release, have, tk->version,
                 min[0] ? min : "of its release");
        return;
    }
    if (is(f, "host-compiler-unsupported") && tk && m->default_compiler && tk->max_gcc &&
        m->default_compiler->major > tk->max_gcc) {
        snprintf(f->cause, sizeof f->cause, "nvcc %s accepts host gcc up to %u, and the default g++ here is gcc %u, so "
                 "nvcc stops with 'unsupported GNU version'.", tk->version, tk->max_gcc, m->default_compiler->major);
        return;
    }
    if (is(f, "cuda-version-mismatch") && tk && m->py.torch_cuda[0]) {
        snprintf(f->cause, sizeof f->cause, "torch %s was built with CUDA %s but the nvcc a build would use is CUDA %s; "
                 "torch's extension builder refuses a different CUDA major.", m->py.torch_version, m->py.torch_cuda,
                 tk->version);
        return;
    }
}

void md_finding_fill(const md_diagnosis *d, md_finding *f)
{
    f->gpu = d->probed ? pick_gpu(d, f) : -1;
    f->n_confirmed = f->n_ruled_out = f->n_evidence = 0;
    for (size_t i = 0; i < f->sig->n_confirm; i++)
        if (md_fact(d, f, f->sig->confirm[i]) == 1)
            f->confirmed[f->n_confirmed++] = f->sig->confirm[i];
    for (size_t i = 0; i < f->sig->n_rule_out; i++)
        if (md_fact(d, f, f->sig->rule_out[i]) == 1)
            f->ruled_out[f->n_ruled_out++] = f->sig->rule_out[i];
    if (f->from_log) {
        const md_log_line *h = &f->hits.hits[0];
        add_evidence(f, "%s:%llu: %s", d->logs[f->log_index].name, h->line, h->text);
        if (f->count > 1)
            add_evidence(f, "%llu lines in all match", f->count);
    }
    if (d->probed)
        machine_evidence(d, f);
    cause(d, f);
    f->n_fix = f->sig->n_fix;
    for (size_t i = 0; i < f->n_fix; i++)
        fill(d, f, f->sig->fix[i], f->fix[i], sizeof f->fix[i]);
    f->n_notes = f->sig->n_notes;
    for (size_t i = 0; i < f->n_notes; i++)
        fill(d, f, f->sig->notes[i], f->notes[i], sizeof f->notes[i]);
}
