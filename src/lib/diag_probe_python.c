/* Python and torch for diagnose: one subprocess (timed out, never through a shell) that prints
 * one JSON line after the marker "MSDA-PROBE ", so that warnings torch prints do not matter. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag.h"
#include "product.h"
#include "process.h"

#define PYTHON_TIMEOUT_S 30
#define MARKER "MSDA-PROBE "

/* Kept to Python 3.6 syntax: Jetson's JetPack 4 ships 3.6. The binaries it lists are the op's
 * copies on sys.path, in eggs on it, and the msda wheel's library. */
static const char probe_script[] =
    "import json, sys, os, glob\n"
    "r = {'executable': sys.executable, 'version': '%d.%d.%d' % tuple(sys.version_info[:3]),\n"
    "     'torch': None, 'binaries': [], 'msda_importable': False}\n"
    "try:\n"
    "    import importlib.util as u\n"
    "    for n in ('MultiScaleDeformableAttention', 'msda'):\n"
    "        try:\n"
    "            if u.find_spec(n) is not None: r['msda_importable'] = True\n"
    "        except Exception: pass\n"
    "except Exception: pass\n"
    "try:\n"
    "    import torch\n"
    "    t = {'version': str(torch.__version__), 'cuda': torch.version.cuda, 'cxx11_abi': None,\n"
    "         'has_magma': None, 'arch_list': [], 'gpus': [],\n"
    "         'lib': os.path.join(os.path.dirname(torch.__file__), 'lib')}\n"
    "    try: t['cxx11_abi'] = bool(torch._C._GLIBCXX_USE_CXX11_ABI)\n"
    "    except Exception: pass\n"
    "    try: t['has_magma'] = bool(torch.cuda.has_magma)\n"
    "    except Exception: pass\n"
    "    try:\n"
    "        t['arch_list'] = list(torch.cuda.get_arch_list())\n"
    "        if torch.cuda.is_available():\n"
    "            for i in range(torch.cuda.device_count()):\n"
    "                t['gpus'].append({'name': torch.cuda.get_device_name(i),\n"
    "                                  'cc': '%d.%d' % torch.cuda.get_device_capability(i)})\n"
    "    except Exception as e: t['cuda_error'] = str(e)[:200]\n"
    "    r['torch'] = t\n"
    "except Exception as e: r['torch_error'] = str(e)[:200]\n"
    "pats = ('MultiScaleDeformableAttention*.so', '" MD_LIBRARY_MEMBER "', 'mmcv/_ext*.so',\n"
    "        'detrex/_C*.so', 'groundingdino/_C*.so')\n"
    "seen = set()\n"
    "for d in sys.path:\n"
    "    if not d or not os.path.isdir(d): continue\n"
    "    for p in pats:\n"
    "        for f in sorted(glob.glob(os.path.join(d, p)) + glob.glob(os.path.join(d, '*.egg', p))):\n"
    "            f = os.path.realpath(f)\n"
    "            if f not in seen: seen.add(f); r['binaries'].append(f)\n"
    "print('" MARKER "' + json.dumps(r))\n";

static void copy_str(char *out, size_t size, json_t *v)
{
    snprintf(out, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static int tri(json_t *v)
{
    return json_is_boolean(v) ? json_is_true(v) : -1;
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
        p->cxx11_abi = tri(json_object_get(t, "cxx11_abi"));
        p->has_magma = tri(json_object_get(t, "has_magma"));
        size_t i, at = 0;
        json_t *v;
        json_array_foreach(json_object_get(t, "arch_list"), i, v) {
            if (json_is_string(v) && at + strlen(json_string_value(v)) + 2 < sizeof p->arch_list)
                at += (size_t)snprintf(p->arch_list + at, sizeof p->arch_list - at, "%s%s", at ? " " : "",
                                       json_string_value(v));
        }
        json_array_foreach(json_object_get(t, "gpus"), i, v) {
            if (p->n_gpus == MD_DIAG_MAX_GPUS)
                break;
            unsigned ma = 0, mi = 0;
            md_torch_gpu *g = &p->gpus[p->n_gpus];
            copy_str(g->name, sizeof g->name, json_object_get(v, "name"));
            if (sscanf(json_string_value(json_object_get(v, "cc")) ? json_string_value(json_object_get(v, "cc")) : "",
                       "%u.%u", &ma, &mi) == 2) {
                g->sm = ma * 10 + mi;
                p->n_gpus++;
            }
        }
        copy_str(p->error, sizeof p->error, json_object_get(t, "cuda_error"));
    } else {
        copy_str(p->error, sizeof p->error, json_object_get(doc, "torch_error"));
    }
    json_t *bins = json_object_get(doc, "binaries");
    size_t n = json_array_size(bins);
    p->binary_paths = calloc(n ? n : 1, sizeof *p->binary_paths);
    for (size_t i = 0; p->binary_paths && i < n && i < MD_DIAG_MAX_BINARIES; i++) {
        const char *path = json_string_value(json_array_get(bins, i));
        if (path && (p->binary_paths[p->n_binary_paths] = strdup(path)) != NULL)
            p->n_binary_paths++;
    }
}

void md_probe_python(md_machine *m, md_check *c)
{
    c->id = "python";
    c->name = "Python and torch";
    c->status = MD_CHECK_OK;
    md_python_facts *p = &m->py;
    const char *python = m->python ? m->python : "python3";
    snprintf(p->python, sizeof p->python, "%s", python);
    if (!strchr(python, '/') && md_which(python, p->python, sizeof p->python) != 0) {
        c->status = MD_CHECK_SKIPPED;
        snprintf(c->summary, sizeof c->summary, "no %s on PATH (use --python PATH)", python);
        return;
    }
    char *argv[] = { p->python, (char *)(uintptr_t)"-c", (char *)(uintptr_t)probe_script, NULL };
    md_run_result res;
    md_error err;
    if (md_run_capture(argv, NULL, PYTHON_TIMEOUT_S, 1 << 20, &res, &err) != MD_OK) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "cannot run it: %s", err.message);
        return;
    }
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
        md_check_add(c, MD_LINE_DETAIL, "%s: %s", p->executable, p->error[0] ? p->error : "torch not importable");
        return;
    }
    snprintf(c->summary, sizeof c->summary, "Python %s, torch %s, CUDA %s", p->version, p->torch_version,
             p->torch_cuda[0] ? p->torch_cuda : "none (CPU build)");
    md_check_add(c, MD_LINE_DETAIL, "executable: %s", p->executable);
    md_check_add(c, MD_LINE_DETAIL, "torch arch list: %s", p->arch_list[0] ? p->arch_list : "(empty)");
    md_check_add(c, MD_LINE_DETAIL, "C++11 ABI: %s; MAGMA: %s", p->cxx11_abi < 0 ? "unknown" : p->cxx11_abi ? "yes" : "no",
                 p->has_magma < 0 ? "unknown" : p->has_magma ? "yes" : "no");
    for (size_t i = 0; i < p->n_gpus; i++)
        md_check_add(c, MD_LINE_DETAIL, "torch sees GPU %zu: %s (sm_%u)", i, p->gpus[i].name, p->gpus[i].sm);
    if (p->error[0])
        md_check_add(c, MD_LINE_DETAIL, "torch.cuda: %s", p->error);
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
}
