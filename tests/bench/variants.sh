#!/usr/bin/env bash
# Benchmarks libmsda built several ways for this GPU's architecture, one after the other:
#   tests/bench/variants.sh [--dtypes f32,f16,bf16] NAME='DEFS' [NAME='DEFS' ...]
# e.g. base='' nostage='-DMSDA_STAGING=0' t768='-DMSDA_STAGED_THREADS=768'. Each variant is built
# under build/variant-NAME with MSDA_DEFS=DEFS and timed by tests/bench/bench.py; the table rows
# of every variant are printed together at the end (and each full log kept beside the build).
set -euo pipefail
dtypes=f32,f16,bf16
if [ "${1:-}" = --dtypes ]; then dtypes=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [--dtypes LIST] NAME='DEFS' ..." >&2; exit 2; }
arch=${MSDA_GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)}
for v in "$@"; do
    name=${v%%=*} defs=${v#*=}
    make --no-print-directory -s BUILD="build/variant-$name" MSDA_ARCHS="$arch" MSDA_DEFS="$defs" \
        "build/variant-$name/kernels/libmsda.so"
done
for v in "$@"; do
    name=${v%%=*}
    log="build/variant-$name/bench.log"
    PYTHONUNBUFFERED=1 python3 tests/bench/bench.py --lib "build/variant-$name/kernels/libmsda.so" \
        --dtypes "$dtypes" > "$log" 2>&1 || { echo "variant $name: bench failed" >&2; tail -n 5 "$log" >&2; }
done
for v in "$@"; do
    name=${v%%=*}
    echo "== $name (${v#*=})"
    sed -n '/^case /,/^ms;/p' "build/variant-$name/bench.log" | grep -v '^ms;'
    grep '^disagreement' "build/variant-$name/bench.log" || true
done
