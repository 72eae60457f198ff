#!/usr/bin/env bash
# On the H200 GPU machine: `msda-doctor diagnose --json` must name the H200 and sm_90 (driver API
# and nvidia-smi agreeing), the driver release (as /proc/driver/nvidia/version or nvidia-smi
# says it), CUDA 13.0 (driver and nvcc), torch 2.11 (CUDA 13.0 build, seeing the H200), and the
# msda wheel, installed into a temporary folder on PYTHONPATH, as runnable there (sm_90 SASS).
# Prints every fact checked and "N passed, M failed"; exit 1 on any failure.
#
#   tests/gpu/diagnose-check.sh [MSDA_DOCTOR] [WHEEL] [PYTHON]
# Defaults: ./msda-doctor, wheels/dist/msda-*-manylinux_2_17_x86_64*.whl, python3.
# Uses python3 for the JSON (jq may be missing there).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
doctor=${1:-$root/msda-doctor}
wheel=${2:-$(ls "$root"/wheels/dist/msda-*-manylinux_2_17_x86_64*.whl 2>/dev/null | head -n 1)}
python=${3:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [ -n "$wheel" ] && [ -f "$wheel" ]; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$out/site" "$wheel" ||
        { echo "diagnose-check: cannot install $wheel" >&2; exit 1; }
    export PYTHONPATH="$out/site${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "diagnose-check: no wheel (build one with 'msda-doctor build'); the wheel check will fail" >&2
fi

"$doctor" diagnose --json --python "$python" > "$out/report.json" 2> "$out/stderr.txt"
rc=$?
echo "msda-doctor diagnose --json: exit $rc"
cat "$out/stderr.txt"
"$doctor" diagnose --python "$python" -v || true

# The driver's release as the machine itself says it, to compare with the report's.
release=$(sed -n 's/.*Kernel Module *\([0-9][0-9.]*\).*/\1/p' /proc/driver/nvidia/version 2>/dev/null | head -n 1)
[ -n "$release" ] || release=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)

"$python" - "$out/report.json" "$release" "$rc" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
release, rc = sys.argv[2], int(sys.argv[3])
m = report["machine"]
checks = {c["id"]: c for c in report["checks"]}
results = []

def check(what, ok, got):
    results.append((what, bool(ok), got))

gpus = m["gpus"]
check("a GPU through the driver API", gpus and gpus[0]["source"] == "driver", [g["name"] for g in gpus])
h200 = [g for g in gpus if "H200" in g["name"]]
check("the H200 named", h200, [g["name"] for g in gpus])
check("sm_90, compute capability 9.0", h200 and all(g["arch"] == "sm_90" and g["compute_capability"] == "9.0" for g in h200),
      [(g["arch"], g["compute_capability"]) for g in gpus])
check("65536 registers per block, 132 SMs", h200 and h200[0]["registers_per_block"] == 65536 and h200[0]["multiprocessors"] == 132,
      h200 and (h200[0]["registers_per_block"], h200[0]["multiprocessors"]))
drv = m["driver"]
check("driver release as the machine says (%s)" % release, release and drv["release"] == release, drv["release"])
check("driver CUDA 13.0 (cuDriverGetVersion 13000)", drv["cuda"] == "13.0" and drv["api_version"] == 13000,
      (drv["cuda"], drv["api_version"]))
smi = m["nvidia_smi"]
check("nvidia-smi answered and agrees", smi["answered"] and checks["nvidia-smi"]["status"] == "ok",
      (smi["answered"], checks["nvidia-smi"]["status"], checks["nvidia-smi"]["problems"]))
tks = m["toolkits"]
check("nvcc CUDA 13.0 found", any(t["version"] == "13.0" for t in tks), [t["version"] for t in tks])
py = m["python"] or {}
check("torch 2.11", (py.get("torch") or "").startswith("2.11"), py.get("torch"))
check("torch built for CUDA 13.0", (py.get("torch_cuda") or "").startswith("13.0"), py.get("torch_cuda"))
check("torch sees the H200 as sm_90", any("H200" in g["name"] and g["arch"] == "sm_90" for g in py.get("gpus", [])),
      py.get("gpus"))
wheels = [b for b in m["binaries"] if b["kind"] == "msda-wheel"]
check("the msda wheel found", wheels, [b["path"] for b in m["binaries"]])
check("the msda wheel runs on the H200 as sm_90 SASS",
      wheels and any(o["runs"] == "sass" and o["code"] == "sm_90" and o["kernels_not_fitting"] == 0
                     for b in wheels for o in b["gpus"] if gpus[o["gpu"]]["arch"] == "sm_90"),
      [b["gpus"] for b in wheels])
check("no finding on this healthy machine", not report["findings"], [f["id"] for f in report["findings"]])
check("exit status 0", rc == 0, rc)

width = max(len(w) for w, _, _ in results)
for what, ok, got in results:
    print("%-*s  %s  %s" % (width, what, "PASS" if ok else "FAIL", json.dumps(got)[:160]))
passed = sum(ok for _, ok, _ in results)
print("%d passed, %d failed" % (passed, len(results) - passed))
sys.exit(0 if passed == len(results) else 1)
PY
