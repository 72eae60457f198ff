#!/usr/bin/env bash
# Benchmark, not a test: `msda-doctor diagnose --no-probe` on a generated log of SIZE_MB
# (default 200) megabytes, built from a real training log repeated, with very long lines,
# random bytes, NULs, CRLF and ANSI colours, and one failure at the very end. Prints the time
# and the peak memory (/usr/bin/time -v) and fails if the failure is missed or the peak memory
# exceeds LIMIT_MB (default 64): the log is read as a stream, so memory must not grow with it.
#
#   tests/bench/diagnose-big-log.sh [./msda-doctor] [SIZE_MB]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
doctor=${1:-$root/msda-doctor}
size_mb=${2:-200}
limit_mb=${LIMIT_MB:-64}
[ -x /usr/bin/time ] || { echo "diagnose-big-log: /usr/bin/time is needed (package time)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log="$tmp/big.log"

# One block of about 1 MB: the clean training log, a 300 KB line, random bytes with NULs, a
# coloured CRLF line. Repeated to the size asked for.
block="$tmp/block"
{
  cat "$root/tests/fixtures/logs/clean-train.log"
  head -c 300000 /dev/zero | tr '\0' 'x'; printf '\n'
  head -c 200000 /dev/urandom
  printf '\n\x1b[32mEpoch: [3]  [ 100/7329]  loss: 6.1\x1b[0m\r\n'
  for _ in $(seq 1 40); do cat "$root/tests/fixtures/logs/clean-build.log"; done
} > "$block"
block_size=$(stat -c %s "$block")
n=$(( size_mb * 1024 * 1024 / block_size + 1 ))
for _ in $(seq 1 "$n"); do cat "$block"; done > "$log"
printf 'error in ms_deformable_im2col_cuda: no kernel image is available for execution on the device\n' >> "$log"
echo "log: $(( $(stat -c %s "$log") / 1024 / 1024 )) MB"

/usr/bin/time -v "$doctor" diagnose --no-probe --json "$log" > "$tmp/out.json" 2> "$tmp/time.txt" || true
elapsed=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$tmp/time.txt")
rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time.txt")
ids=$(python3 -c 'import json,sys; print(" ".join(f["id"] for f in json.load(open(sys.argv[1]))["findings"]))' "$tmp/out.json")
echo "time: $elapsed  peak RSS: $(( rss_kb / 1024 )) MB  findings: ${ids:-none}"
[ "$ids" = "no-kernel-image" ] || { echo "diagnose-big-log: expected exactly no-kernel-image" >&2; exit 1; }
[ "$rss_kb" -le $(( limit_mb * 1024 )) ] || { echo "diagnose-big-log: peak RSS above ${limit_mb} MB" >&2; exit 1; }
echo "diagnose-big-log: ok"
