#!/usr/bin/env bash
# On a GPU machine: the wheel installed with pip, its GPU tests (msda.ms_deform_attn and
# MultiScaleDeformableAttention against a plain PyTorch reference, gradients in f64), then
# `msda-doctor verify` and `inspect` on it. Prints a table last; exits 1 when a check fails or
# when a CUDA test skipped for any reason but a missing second GPU (a skip there is not a pass).
# Usage: tests/gpu/wheel-check.sh WHEEL MSDA_DOCTOR [OUTDIR]
set -uo pipefail
wheel=$1 doctor=$2 out=${3:-/tmp}
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheel" || exit 1
export PYTHONPATH="$site" MSDA_LIBRARY="$site/msda/libmsda.so" PYTHONUNBUFFERED=1
export MSDA_EXPECT_VERSION="$(cat VERSION)" MSDA_HEADER="$PWD/kernels/msda.h" MSDA_SIGNATURES="$PWD/recipes/signatures.json"
rows=() failed=0
# A copy of the tests outside wheels/, whose pytest.ini would import the sources instead.
tests=$(mktemp -d)
cp -r wheels/tests "$tests/"
printf '[pytest]\nmarkers =\n    cuda: needs a CUDA GPU\n    compile: runs torch.compile\n' > "$tests/pytest.ini"
(cd "$tests" && MSDA_EXPECT_INSTALLED="$site" python3 -m pytest -q -rs -p no:cacheprovider tests) > "$out/pytest.log" 2>&1
rc=$?; rows+=("pytest wheels/tests (installed wheel)|$rc|$(grep -E '^[0-9]+ passed' "$out/pytest.log" | tail -n 1)")
[ "$rc" -eq 0 ] || failed=1
bad_skips=$(grep -E '^SKIPPED .*test_cuda\.py' "$out/pytest.log" | grep -v 'needs two GPUs' || true)
if [ -n "$bad_skips" ]; then
    rows+=("CUDA tests skipped on a GPU machine|1|$(wc -l <<<"$bad_skips") (see pytest.log)")
    failed=1
fi
"$doctor" verify --json "$wheel" > "$out/verify.json" 2> "$out/verify.err"
rc=$?; rows+=("msda-doctor verify|$rc|$(python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
print("; ".join(d["device"]+": "+d["code"]+" "+("passed" if d["passed"] else "FAILED") for d in r["devices"]))' "$out/verify.json")")
[ "$rc" -eq 0 ] || failed=1
"$doctor" inspect --gpu h200 "$wheel" > "$out/inspect.txt" 2>&1
rc=$?; rows+=("msda-doctor inspect --gpu h200|$rc|$(tail -n 1 "$out/inspect.txt")")
[ "$rc" -eq 0 ] || failed=1
tail -n 30 "$out/pytest.log"
cat "$out/verify.err"
printf '\n%-40s %-4s %s\n' check exit result
for r in "${rows[@]}"; do IFS='|' read -r a b c <<<"$r"; printf '%-40s %-4s %s\n' "$a" "$b" "$c"; done
exit $failed
