#!/usr/bin/env bash
# On a GPU newer than every SASS in the wheels given (the H200 for wheels built with
# `msda-doctor build --arch sm_52+PTX` and the like): each library runs only through the
# driver's PTX JIT, so the code paths of those old architectures (their launch bounds, the f32
# buffer for 16-bit value gradients) run here, and are checked:
#   - msda-doctor verify: every GPU loaded compute_XX PTX (JIT), and passed;
#   - gpu-check (f32, f16, bf16) on that library against the CPU path;
#   - the CUDA pytest files (test_cuda.py, test_cuda_adversarial.py, test_cuda_table.py) on it;
#   - tests/bench/accuracy.py: f16 and bf16 against f64 on the encoder (enc_b2), grad_value
#     within issue 11's bound on every architecture.
# Prints a table last; exits 1 when a check fails.
# Usage: tests/gpu/ptx-jit-check.sh GPU_CHECK MSDA_DOCTOR OUTDIR WHEEL...
# Each WHEEL lies in a folder named for its architecture: .../sm52/dist/msda-*.whl.
set -uo pipefail
cd "$(dirname "$0")/../.."
check=$1 doctor=$2 out=$3
shift 3
# Checked first: each verify would otherwise end in "exit 127" with no word of why.
[ -x "$doctor" ] || { echo "ptx-jit-check: no msda-doctor at $doctor (gpu-machine prepare makes build/gpu-carry)" >&2; exit 2; }
mkdir -p "$out"
rows=() failed=0
row() { rows+=("$1|$2|$3"); [ "$2" -eq 0 ] || failed=1; }
counts() { grep -E '^[0-9]+ passed' "$1" | tail -n 1; }

for wheel in "$@"; do
    dir=$(cd "$(dirname "$wheel")/.." && pwd)
    sm=$(basename "$dir")
    sm=${sm#sm}
    lib=$dir/kernels/libmsda.so
    kernels/library-from-wheel "$wheel" "$lib" || { row "sm_$sm+PTX: library out of the wheel" 1 "$wheel"; continue; }

    timeout 300 "$doctor" verify --json "$wheel" > "$out/verify-$sm.json" 2> "$out/verify-$sm.err"
    rc=$?
    summary=$(python3 - "$out/verify-$sm.json" "$sm" <<'PY'
import json, sys
sm = sys.argv[2]
try:
    devs = [d for d in json.load(open(sys.argv[1]))["devices"] if d["gpu"]]
except Exception as exc:
    print(f"1|unreadable: {exc}")
    sys.exit()
# "compute_62 PTX (JIT): PTX ISA 7.8, driver CUDA >= 11.8": each entry (one per kind of image
# this driver loads) is PTX of the wheel's architecture.
ok = devs and all(d["code"].startswith(f"compute_{sm} PTX (JIT)") and d["passed"] for d in devs)
print(("0" if ok else "1") + "|" + "; ".join(f"{d['device']}: {d['code']} {'passed' if d['passed'] else 'FAILED'}"
                                            for d in devs))
PY
)
    [ "$rc" -eq 0 ] || summary="1|exit $rc; ${summary#*|}"
    row "sm_$sm+PTX: msda-doctor verify (JIT)" "${summary%%|*}" "${summary#*|}"

    LD_LIBRARY_PATH=$dir/kernels timeout 400 "$check" --dtypes f32,f16,bf16 --label "ptx$sm" > "$out/gpu-check-$sm.log" 2>&1
    rc=$?
    row "sm_$sm+PTX: gpu-check f32 f16 bf16" $rc "$(counts "$out/gpu-check-$sm.log")"

    (cd wheels && MSDA_LIBRARY=$lib timeout 400 python3 -m pytest -q -rs -p no:cacheprovider -m "not compile" \
        tests/test_cuda.py tests/test_cuda_adversarial.py tests/test_cuda_table.py) > "$out/pytest-$sm.log" 2>&1
    rc=$?
    # All skipped (no GPU seen) is no pass.
    grep -qE '^[1-9][0-9]* passed' "$out/pytest-$sm.log" || rc=1
    row "sm_$sm+PTX: pytest CUDA files" $rc "$(counts "$out/pytest-$sm.log")"

    timeout 300 python3 tests/bench/accuracy.py --cases enc_b2 "sm_$sm=$lib" > "$out/accuracy-$sm.log" 2>&1
    rc=$?
    # The worst grad_value error of the table's rows (column 7), with its dtype.
    worst=$(awk '$2 == "enc_b2" && $7 + 0 >= w + 0 { w = $7; d = $3 } END { if (w != "") print "worst grad_value " w " (" d ")" }' \
        "$out/accuracy-$sm.log")
    row "sm_$sm+PTX: accuracy against f64" $rc "${worst:-no table}"
done

for f in "$out"/gpu-check-*.log; do grep -E 'FAIL|libmsda' "$f"; done
grep -hE '^(OVER|FAILED:)' "$out"/accuracy-*.log
grep -hE '^(FAILED|ERROR)' "$out"/pytest-*.log
printf '\n%-40s %-4s %s\n' check exit result
for r in "${rows[@]}"; do IFS='|' read -r a b c <<<"$r"; printf '%-40s %-4s %s\n' "$a" "$b" "$c"; done
exit $failed
