#!/usr/bin/env bash
# Benchmark, not a test: wall time of `msda-doctor diagnose` with every probe, medians of RUNS
# (default 15) after one warm-up, once with the Python on PATH (torch installed where it is) and
# once with a Python that has no torch (a fresh virtual environment without site packages).
# Then diagnose-big-log.sh for `--no-probe` on a 200 MB log. The figures issue 12 asks for:
# under 150 ms without torch, under 1 s with torch, under 2 s for the big log.
#
#   tests/bench/diagnose-time.sh [./msda-doctor] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
doctor=${1:-$root/msda-doctor}
runs=${2:-15}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv --without-pip "$tmp/bare"
median_ms() {  # median_ms COMMAND...: runs it RUNS times (plus one warm-up), prints the median
  "$@" >/dev/null 2>&1 || true
  for _ in $(seq "$runs"); do
    s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N)
    echo $(( (e - s) / 1000000 ))
  done | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
torch=$(python3 -c 'import importlib.util as u; print("yes" if u.find_spec("torch") else "no")')
printf '%-44s %8s\n' "case" "ms"
printf '%-44s %8s\n' "diagnose, python3 on PATH (torch: $torch)" "$(median_ms "$doctor" diagnose)"
printf '%-44s %8s\n' "diagnose --python <venv without torch>" "$(median_ms "$doctor" diagnose --python "$tmp/bare/bin/python3")"
printf '%-44s %8s\n' "diagnose --no-probe (no log)" "$(median_ms "$doctor" diagnose --no-probe)"
"$root/tests/bench/diagnose-big-log.sh" "$doctor" 200
