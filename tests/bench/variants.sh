#!/usr/bin/env bash
# Benchmarks libmsda built several ways for one GPU architecture:
#   tests/bench/variants.sh [--dtypes f32,f16,bf16] NAME='MACRO=VALUE ...' [NAME='...' ...]
# e.g. base='' novec='MSDA_VECTOR_ATOMICS=0' cas='MSDA_F16_ATOMIC=2 MSDA_BF16_ATOMIC=2'. Each
# variant is a wheel that `msda-doctor build --arch sm_$MSDA_GPU_ARCH --define ...` writes under
# build/variant-NAME/dist: where msda-doctor is at hand (./msda-doctor or $MSDA_DOCTOR) and the
# wheel is missing, it is built; on the GPU machine, build the wheels here first (same command,
# MSDA_GPU_ARCH=90) and carry build/variant-*. Each library is taken out of its wheel and timed
# by tests/bench/bench.py; the rows of every variant are printed together at the end.
set -euo pipefail
dtypes=f32,f16,bf16
if [ "${1:-}" = --dtypes ]; then dtypes=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [--dtypes LIST] NAME='MACRO=VALUE ...' ..." >&2; exit 2; }
arch=${MSDA_GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)}
doctor=${MSDA_DOCTOR:-./msda-doctor}
for v in "$@"; do
    name=${v%%=*} defs=${v#*=} dir=build/variant-$name
    if ! ls "$dir"/dist/*.whl >/dev/null 2>&1; then
        args=()
        for d in $defs; do args+=(--define "$d"); done
        "$doctor" build --arch "sm_$arch" --platform "$(uname -m)" "${args[@]}" --out "$dir/dist" \
            --cache build/msda-cache >/dev/null
    fi
    kernels/library-from-wheel "$(ls "$dir"/dist/*.whl | head -n 1)" "$dir/kernels/libmsda.so"
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
