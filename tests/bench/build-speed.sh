#!/usr/bin/env bash
# Build speed against the build it replaces (issue 41), on a machine with a GPU, torch and nvcc:
# in one run and on the same CORES cores (taskset), cold each time,
#   - the original Deformable-DETR op compiled as its users compile it (a torch extension with
#     its setup.py's flags, TORCH_CUDA_ARCH_LIST = this GPU's), through tests/bench/peers;
#   - `msda-doctor build --arch native` of each MSDA_DOCTOR given (the old one and the new one);
# then prints wall and CPU seconds (user + system, children included) per build, each as a
# share of the original's, and the doctor builds' per-step times from their progress lines.
#
# Usage: tests/bench/build-speed.sh PEERS_DEST [NAME=]MSDA_DOCTOR [[NAME=]MSDA_DOCTOR...]
#   PEERS_DEST: a folder holding src/deformable-detr (tests/bench/peers/build-peers.sh extract)
#   NAME: what the table calls that msda-doctor (before, after); by default its number
#   CORES (default 2): the cores every build is confined to.
#   WHEELS_TO: a folder to keep each doctor's wheel in, as NAME.whl (for a bench of the same code).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: $0 PEERS_DEST [NAME=]MSDA_DOCTOR [[NAME=]MSDA_DOCTOR...]" >&2; exit 2; }
peers=$1
shift
cores=${CORES:-2}
cpus="0-$((cores - 1))"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')
[ -n "$cc" ] || { echo "build-speed: no GPU answers nvidia-smi" >&2; exit 1; }

# timed NAME CMD...: runs CMD on the cores, its stderr in $work/NAME.err, "wall user sys" in
# $work/NAME.time.
timed() {
    local name=$1
    shift
    local TIMEFORMAT='%R %U %S'
    { time taskset -c "$cpus" "$@" > "$work/$name.out" 2> "$work/$name.err"; } 2> "$work/$name.time" ||
        { echo "build-speed: $name failed:" >&2; tail -n 20 "$work/$name.err" "$work/$name.out" >&2; exit 1; }
}

mkdir -p "$work/peers"
cp -r "$peers/src" "$work/peers/src"
timed original env PEERS=orig PEERS_NO_SPLIT=1 MAX_JOBS="$cores" tests/bench/peers/build-peers.sh build \
    "$work/peers" "$cc"
names=() doctors=()
for arg in "$@"; do
    case $arg in
    *=*) names+=("${arg%%=*}") doctors+=("${arg#*=}") ;;
    *) names+=("${#names[@]}") doctors+=("$arg") ;;
    esac
done
for n in "${!doctors[@]}"; do
    timed "doctor$n" "${doctors[$n]}" build --arch native --platform "$(uname -m)" --cache "$work/cache$n" \
        --out "$work/out$n"
done

if [ -n "${WHEELS_TO:-}" ]; then
    mkdir -p "$WHEELS_TO"
    for n in "${!doctors[@]}"; do cp "$work/out$n"/*.whl "$WHEELS_TO/${names[$n]}.whl"; done
fi

read -r o_wall o_user o_sys < "$work/original.time"
o_cpu=$(awk -v u="$o_user" -v s="$o_sys" 'BEGIN { print u + s }')
echo "GPU compute capability $cc; every build on $cores cores ($cpus), cold"
printf '%-52s %9s %9s %9s %9s\n' build "wall s" "CPU s" "wall/orig" "CPU/orig"
printf '%-52s %9.1f %9.1f %9s %9s\n' "original op, torch extension (TORCH_CUDA_ARCH_LIST=$cc)" "$o_wall" "$o_cpu" 1.00 1.00
for n in "${!doctors[@]}"; do
    read -r wall user sys < "$work/doctor$n.time"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
    printf '%-52s %9.1f %9.1f %9.2f %9.2f\n' "msda-doctor build --arch native (${names[$n]})" \
        "$wall" "$cpu" "$(awk -v a="$wall" -v b="$o_wall" 'BEGIN { print a / b }')" \
        "$(awk -v a="$cpu" -v b="$o_cpu" 'BEGIN { print a / b }')"
done
for n in "${!doctors[@]}"; do
    echo
    echo "steps of ${names[$n]} (${doctors[$n]}), as its progress lines give them:"
    grep '^\[' "$work/doctor$n.err" | sed 's/^/  /' || echo "  (none printed)"
done
