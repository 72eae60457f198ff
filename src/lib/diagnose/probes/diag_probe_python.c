/* Python and torch for diagnose: one subprocess (timed out, never through a shell) that prints
 * one JSON line after the marker "MSDA-PROBE ", so that warnings torch prints do not matter. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag.h"
#include "binary/elf_symbols.h"
#include "recipes/product.h"
#include "base/process.h"

#define PYTHON_TIMEOUT_S 30
#define MARKER "MSDA-PROBE "

/* Kept to Python 3.6 syntax: Jetson's JetPack 4 ships 3.6. It imports nothing heavier than
 * importlib.util: not torch (seconds, and a CUDA context), not json or glob (they pull in re).
 * torch is found with find_spec and its version.py read as text; its C++ ABI and MAGMA are
 * read from its files by the C side. The binaries it lists are the op's copies on sys.path, in
 * eggs on it, and the msda wheel's library. The frameworks are found the same way (regular
 * packages only: a folder of that name in the working directory is not one), their versions read
 * from a __version__ line that assigns a string, else from the name of their .dist-info. */
static const char probe_script[] =
    "import sys, os\n"
    "def q(s):\n"
    "    if s is None: return 'null'\n"
    "    o = []\n"
    "    for c in str(s):\n"
    "        if c in '\"\\\\': o.append('\\\\' + c)\n"
    "        elif ord(c) < 32: o.append('\\\\u%04x' % ord(c))\n"
    "        else: o.append(c)\n"
    "    return '\"' + ''.join(o) + '\"'\n"
    "found = False\n"
    "torch = 'null'\n"
    "try:\n"
    "    from importlib.util import find_spec\n"
    "    for n in ('MultiScaleDeformableAttention', 'msda'):\n"
    "        try:\n"
    "            if find_spec(n) is not None: found = True\n"
    "        except Exception: pass\n"
    "    s = find_spec('torch')\n"
    "    if s is not None and s.submodule_search_locations:\n"
    "        d = list(s.submodule_search_locations)[0]\n"
    "        v = {'__version__': None, 'cuda': None}\n"
    "        try:\n"
    "            for line in open(os.path.join(d, 'version.py')):\n"
    "                k = line.split('=')[0].split(':')[0].strip()\n"
    "                if k in v and '=' in line:\n"
    "                    x = line.split('=', 1)[1].strip().strip('\\'\"')\n"
    "                    v[k] = None if x == 'None' else x\n"
    "        except Exception: pass\n"
    "        torch = '{\"version\": %s, \"cuda\": %s, \"lib\": %s}' % (q(v['__version__']), q(v['cuda']),\n"
    "                                                            q(os.path.join(d, 'lib')))\n"
    "except Exception as e: torch = 'null'\n"
    "fw = []\n"
    "for n in ('transformers', 'kernels', 'mmcv', 'groundingdino', 'detrex', 'msda'):\n"
    "    try: s = find_spec(n)\n"
    "    except Exception: s = None\n"
    "    if s is None or not s.submodule_search_locations: continue\n"
    "    d, ver = list(s.submodule_search_locations)[0], None\n"
    "    if not os.path.isfile(os.path.join(d, '__init__.py')): continue\n"
    "    for f in ('__init__.py', 'version.py', '_version.py'):\n"
    "        try:\n"
    "            for line in open(os.path.join(d, f)):\n"
    "                x = line.split('=', 1)[1].split('#')[0].strip() if line.startswith('__version__') and '=' in line else ''\n"
    "                if x[:1] in ('\\'', '\"'):\n"
    "                    ver = x.strip('\\'\"')\n"
    "                    break\n"
    "        except Exception: pass\n"
    "        if ver: break\n"
    "    if not ver:\n"
    "        try:\n"
    "            for e in os.listdir(os.path.dirname(d)):\n"
    "                if e.startswith(n + '-') and e.endswith('.dist-info'): ver = e[len(n) + 1:-10]\n"
    "        except Exception: pass\n"
    "    fw.append('{\"name\": %s, \"version\": %s}' % (q(n), q(ver)))\n"
    "seen = []\n"
    "def add(f):\n"
    "    f = os.path.realpath(f)\n"
    "    if f not in seen: seen.append(f)\n"
    "def scan(d):\n"
    "    try: names = sorted(os.listdir(d))\n"
    "    except Exception: return\n"
    "    for n in names:\n"
    "        if n.startswith('MultiScaleDeformableAttention') and n.endswith('.so'): add(os.path.join(d, n))\n"
    "    if os.path.isfile(os.path.join(d, '" MD_LIBRARY_MEMBER "')): add(os.path.join(d, '" MD_LIBRARY_MEMBER "'))\n"
    "    for sub in ('mmcv', 'detrex', 'groundingdino'):\n"
    "        try: inner = sorted(os.listdir(os.path.join(d, sub)))\n"
    "        except Exception: continue\n"
    "        for n in inner:\n"
    "            if n.startswith('_ext' if sub == 'mmcv' else '_C') and n.endswith('.so'): add(os.path.join(d, sub, n))\n"
    "    return names\n"
    "for d in sys.path:\n"
    "    if not d or not os.path.isdir(d): continue\n"
    "    for n in scan(d) or []:\n"
    "        if n.endswith('.egg'): scan(os.path.join(d, n))\n"
    "print('" MARKER "{\"executable\": %s, \"version\": \"%d.%d.%d\", \"msda_importable\": %s, \"torch\": %s, '\n"
    "      '\"binaries\": [%s], \"frameworks\": [%s]}' % ((q(sys.executable),) + tuple(sys.version_info[:3]) +\n"
    "      ('true' if found else 'false', torch, ', '.join(q(f) for f in seen), ', '.join(fw))))\n";

static void copy_str(char *out, size_t size, json_t *v)
{
    snprintf(out, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* torch's C++ ABI and MAGMA from its files, as torch itself was built: libc10.so exports
 * std::__cxx11 symbols only when built with the C++11 ABI; ATen/cuda/CUDAConfig.h records
 * AT_MAGMA_ENABLED(), which torch.cuda.has_magma reports. */
static void torch_files(md_python_facts *p)
{
    char path[PATH_MAX + 64];
    md_error err;
    snprintf(path, sizeof path, "%s/libc10.so", p->torch_lib_dir);
    p->cxx11_abi = md_elf_exports_containing(path, "__cxx11", &err);
    snprintf(path, sizeof path, "%s/../include/ATen/cuda/CUDAConfig.h", p->torch_lib_dir);
    FILE *in = fopen(path, "r");
    char line[256];
    while (in && fgets(line, sizeof line, in)) {
        int enabled;
        if (sscanf(line, "#define AT_MAGMA_ENABLED() %d", &enabled) == 1)
            p->has_magma = enabled != 0;
    }
    if (in)
        fclose(in);
}

static void parse(md_machine *m, json_t *doc)
{
    md_python_facts *p = &m->py;
    copy_str(p->executable, sizeof p->executable, json_object_get(doc, "executable"));
    copy_str(p->version, sizeof p->version, json_object_get(doc, "version"));
    p->msda_importable = json_is_true(json_object_get(doc, "msda_importable"));
    json_t *t = json_object_get(doc, "torch");
    p->cxx11_abi = p->has_magma = -1;
    if (json_is_object(t)) {
        p->has_torch = true;
        copy_str(p->torch_version, sizeof p->torch_version, json_object_get(t, "version"));
        copy_str(p->torch_cuda, sizeof p->torch_cuda, json_object_get(t, "cuda"));
        copy_str(p->torch_lib_dir, sizeof p->torch_lib_dir, json_object_get(t, "lib"));
        if (p->torch_lib_dir[0])
            torch_files(p);
    }
    json_t *bins = json_object_get(doc, "binaries");
    size_t n = json_array_size(bins);
    p->binary_paths = calloc(n ? n : 1, sizeof *p->binary_paths);
    for (size_t i = 0; p->binary_paths && i < n && i < MD_DIAG_MAX_BINARIES; i++) {
        const char *path = json_string_value(json_array_get(bins, i));
        if (path && (p->binary_paths[p->n_binary_paths] = strdup(path)) != NULL)
            p->n_binary_paths++;
    }
    json_t *fws = json_object_get(doc, "frameworks");
    for (size_t i = 0; i < json_array_size(fws) && p->n_frameworks < MD_DIAG_MAX_FRAMEWORKS; i++) {
        json_t *fw = json_array_get(fws, i);
        if (!json_is_string(json_object_get(fw, "name")))
            continue;
        copy_str(p->frameworks[p->n_frameworks].name, sizeof p->frameworks[0].name, json_object_get(fw, "name"));
        copy_str(p->frameworks[p->n_frameworks].version, sizeof p->frameworks[0].version,
                 json_object_get(fw, "version"));
        p->n_frameworks++;
    }
}

void md_probe_python_start(md_machine *m)
{
    md_python_facts *p = &m->py;
    const char *python = m->python ? m->python : "python3";
    snprintf(p->python, sizeof p->python, "%s", python);
    m->py_state = MD_PY_NOT_FOUND;
    if (!strchr(python, '/') && md_which(python, p->python, sizeof p->python) != 0)
        return;
    char *argv[] = { p->python, (char *)(uintptr_t)"-c", (char *)(uintptr_t)probe_script, NULL };
    md_error err;
    if (md_run_start(argv, NULL, PYTHON_TIMEOUT_S, &m->py_child, &err) != MD_OK) {
        m->py_state = MD_PY_FAILED;
        snprintf(p->error, sizeof p->error, "%s", err.message);
        return;
    }
    m->py_state = MD_PY_RUNNING;
}

void md_probe_python(md_machine *m, md_check *c)
{
    c->id = "python";
    c->name = "Python and torch";
    c->status = MD_CHECK_OK;
    md_python_facts *p = &m->py;
    if (m->py_state == MD_PY_NOT_FOUND) {
        c->status = MD_CHECK_SKIPPED;
        snprintf(c->summary, sizeof c->summary, "no %s on PATH", m->python ? m->python : "python3");
        c->hint = MD_HINT_PYTHON;
        return;
    }
    md_run_result res;
    md_error err;
    if (m->py_state == MD_PY_FAILED || md_run_finish(&m->py_child, 1 << 20, &res, &err) != MD_OK) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "cannot run it: %s", m->py_state == MD_PY_FAILED ? p->error : err.message);
        m->py_state = MD_PY_DONE;
        return;
    }
    m->py_state = MD_PY_DONE;
    const char *line = strstr(res.output, MARKER);
    json_t *doc = line ? json_loadb(line + strlen(MARKER), strcspn(line + strlen(MARKER), "\n"), 0, NULL) : NULL;
    if (!json_is_object(doc)) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "%s %s", p->python,
                 res.timed_out ? "timed out (30 s)" : "did not answer the probe");
        const char *tail = res.length > 300 ? res.output + res.length - 300 : res.output;
        md_check_add(c, MD_LINE_PROBLEM, "exit %d; output ends: %.300s", res.exit_code, tail);
        json_decref(doc);
        md_run_result_free(&res);
        return;
    }
    md_run_result_free(&res);
    p->ran = true;
    parse(m, doc);
    json_decref(doc);
    if (!p->has_torch) {
        snprintf(c->summary, sizeof c->summary, "Python %s, no torch", p->version);
        md_check_add(c, MD_LINE_DETAIL, "%s: %s", p->executable, "no torch package on its sys.path");
        return;
    }
    snprintf(c->summary, sizeof c->summary, "Python %s, torch %s, CUDA %s", p->version, p->torch_version,
             p->torch_cuda[0] ? p->torch_cuda : "none (CPU build)");
    md_check_add(c, MD_LINE_DETAIL, "executable: %s", p->executable);
    md_check_add(c, MD_LINE_DETAIL, "torch: %s", p->torch_lib_dir);
    md_check_add(c, MD_LINE_DETAIL, "C++11 ABI: %s; MAGMA: %s", p->cxx11_abi < 0 ? "unknown" : p->cxx11_abi ? "yes" : "no",
                 p->has_magma < 0 ? "unknown" : p->has_magma ? "yes" : "no");
    /* torch's own CUDA against the driver: a CUDA 13 torch on a CUDA 12 driver sees no GPU */
    unsigned tmaj = 0, tmin = 0;
    if (p->torch_cuda[0] && sscanf(p->torch_cuda, "%u.%u", &tmaj, &tmin) == 2 && m->driver_loaded &&
        m->driver.driver_version > 0 && m->driver.driver_version < (int)tmaj * 1000) {
        char have[16];
        md_cuda_version_text(m->driver.driver_version, have, sizeof have);
        md_check_add(c, MD_LINE_PROBLEM, "torch is built for CUDA %s but the driver supports CUDA %s", p->torch_cuda, have);
        md_check_raise(c, MD_CHECK_FAIL);
    }
    if (m->build_toolkit && tmaj && m->build_toolkit->major != tmaj) {
        md_check_add(c, MD_LINE_PROBLEM, "torch is built with CUDA %s but nvcc is %s: torch refuses to build "
                     "extensions with another CUDA major", p->torch_cuda, m->build_toolkit->version);
        md_check_raise(c, MD_CHECK_FAIL);
    }
    md_python_framework_lines(p, c);
}
