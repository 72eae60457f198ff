#!/usr/bin/env bash
# Build speed against the build it replaces (issue 41), on a machine with torch and nvcc: in one
# run and on the same CORES cores (taskset), cold each time,
#   - the original Deformable-DETR op compiled as its users compile it (a torch extension with
#     its setup.py's flags, TORCH_CUDA_ARCH_LIST = the architecture's), through tests/bench/peers;
#   - `msda-doctor build --arch native` (or --arch ARCH) of each MSDA_DOCTOR given (the old one
#     and the new one);
# then prints wall and CPU seconds (user + system, children included) per build, each as a
# share of the original's, and the doctor builds' per-step times from their progress lines.
#
# Usage: tests/bench/build-speed.sh PEERS_DEST [NAME=]MSDA_DOCTOR [[NAME=]MSDA_DOCTOR...]
#   PEERS_DEST: a folder holding src/deformable-detr (tests/bench/peers/build-peers.sh extract)
#   NAME: what the table calls that msda-doctor (before, after); by default its number
#   CORES (default 2): the cores every build is confined to.
#   ARCH (default native: this machine's GPU, through nvidia-smi): an architecture, sm_XY, for a
#     machine without a GPU; with MSDA_TOOLKIT_PATHS naming the one toolkit whose SASS the
#     driver would load, the doctor's plan is the one `native` makes there (one image).
#   RUNS (default 1): rounds of all the builds, one after the other in each; each doctor build's
#     share is taken of its own round's original, and the median of the rounds' shares is printed
#     (the machine's speed moves from round to round, and the original op's build with it).
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
arch=${ARCH:-native}
if [ "$arch" = native ]; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')
    [ -n "$cc" ] || { echo "build-speed: no GPU answers nvidia-smi (set ARCH=sm_XY on a machine without one)" >&2; exit 1; }
else
    case $arch in
    sm_[1-9][0-9] | sm_[1-9][0-9][0-9]) cc="${arch#sm_}" cc="${cc%?}.${cc: -1}" ;;
    *) echo "build-speed: ARCH must be native or sm_XY, not '$arch'" >&2; exit 2 ;;
    esac
fi

# timed NAME CMD...: runs CMD on the cores, its stderr in $work/NAME.err, "wall user sys" in
# $work/NAME.time.
timed() {
    local name=$1
    shift
    local TIMEFORMAT='%R %U %S'
    { time taskset -c "$cpus" "$@" > "$work/$name.out" 2> "$work/$name.err"; } 2> "$work/$name.time" ||
        { echo "build-speed: $name failed:" >&2; tail -n 20 "$work/$name.err" "$work/$name.out" >&2; exit 1; }
}

names=() doctors=()
for arg in "$@"; do
    case $arg in
    *=*) names+=("${arg%%=*}") doctors+=("${arg#*=}") ;;
    *) names+=("${#names[@]}") doctors+=("$arg") ;;
    esac
done
runs=${RUNS:-1}
case $runs in '' | *[!0-9]* | 0*) echo "build-speed: RUNS must be a whole number from 1" >&2; exit 2 ;; esac
for r in $(seq 1 "$runs"); do
    mkdir -p "$work/peers$r"
    cp -r "$peers/src" "$work/peers$r/src"
    timed "original.$r" env PEERS=orig PEERS_NO_SPLIT=1 MAX_JOBS="$cores" tests/bench/peers/build-peers.sh build \
        "$work/peers$r" "$cc"
    for n in "${!doctors[@]}"; do
        timed "doctor$n.$r" "${doctors[$n]}" build --arch "$arch" --platform "$(uname -m)" --cache "$work/cache$n.$r" \
            --out "$work/out$n.$r"
    done
done

if [ -n "${WHEELS_TO:-}" ]; then
    mkdir -p "$WHEELS_TO"
    for n in "${!doctors[@]}"; do cp "$work/out$n.1"/*.whl "$WHEELS_TO/${names[$n]}.whl"; done
fi

# cpu NAME: user + system seconds of $work/NAME.time; wall NAME: its wall seconds
cpu() { awk '{ print $2 + $3 }' "$work/$1.time"; }
wall() { awk '{ print $1 }' "$work/$1.time"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
# median of the numbers on stdin, with the least and the most: "MEDIAN (LEAST-MOST)"
median() { sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'; }

echo "compute capability $cc (--arch $arch); every build on $cores cores ($cpus), cold; $runs round(s)"
printf '%-5s %-56s %9s %9s %9s %9s\n' round build "wall s" "CPU s" "wall/orig" "CPU/orig"
for r in $(seq 1 "$runs"); do
    printf '%-5s %-56s %9.1f %9.1f %9s %9s\n' "$r" "original op, torch extension (TORCH_CUDA_ARCH_LIST=$cc)" \
        "$(wall "original.$r")" "$(cpu "original.$r")" 1.00 1.00
    for n in "${!doctors[@]}"; do
        printf '%-5s %-56s %9.1f %9.1f %9.2f %9.2f\n' "$r" "msda-doctor build --arch $arch (${names[$n]})" \
            "$(wall "doctor$n.$r")" "$(cpu "doctor$n.$r")" "$(ratio "$(wall "doctor$n.$r")" "$(wall "original.$r")")" \
            "$(ratio "$(cpu "doctor$n.$r")" "$(cpu "original.$r")")"
    done
done
if [ "$runs" -gt 1 ]; then
    echo
    echo "median over the rounds (least-most):"
    printf '  %-50s wall s %s, CPU s %s\n' "original op" \
        "$(for r in $(seq 1 "$runs"); do wall "original.$r"; done | median)" \
        "$(for r in $(seq 1 "$runs"); do cpu "original.$r"; done | median)"
    for n in "${!doctors[@]}"; do
        printf '  %-50s wall/orig %s, CPU/orig %s, wall s %s\n' "${names[$n]}" \
            "$(for r in $(seq 1 "$runs"); do ratio "$(wall "doctor$n.$r")" "$(wall "original.$r")"; echo; done | median)" \
            "$(for r in $(seq 1 "$runs"); do ratio "$(cpu "doctor$n.$r")" "$(cpu "original.$r")"; echo; done | median)" \
            "$(for r in $(seq 1 "$runs"); do wall "doctor$n.$r"; done | median)"
    done
fi
for n in "${!doctors[@]}"; do
    echo
    echo "steps of ${names[$n]} (${doctors[$n]}) in round $runs, as its progress lines give them:"
    grep '^\[' "$work/doctor$n.$runs.err" | sed 's/^/  /' || echo "  (none printed)"
done
