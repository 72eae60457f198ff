#!/usr/bin/env bash
# Times `msda-doctor build --arch all` cold (empty cache), again with nothing changed (the wheels
# kept), and into another output folder (linked and packed from the cache), and prints a table.
# Usage: tests/bench/build-time.sh MSDA_DOCTOR
set -euo pipefail
doctor=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
t0=$(now); "$doctor" build --arch all --cache "$work/cache" --out "$work/dist1" > "$work/cold.log"; t1=$(now)
"$doctor" build --arch all --cache "$work/cache" --out "$work/dist1" > "$work/warm.log"; t2=$(now)
# into another folder: everything linked and packed again from the cache, for the bytes
"$doctor" build --arch all --cache "$work/cache" --out "$work/dist2" > "$work/repack.log"; t3=$(now)
targets=$(sed -n 's/^Plan: \([0-9]*\) targets.*/\1/p' "$work/cold.log")
identical=yes
for w in "$work"/dist1/*.whl; do cmp -s "$w" "$work/dist2/$(basename "$w")" || identical=no; done
printf '%-34s %s\n' "targets (architectures + PTX)" "$targets"
printf '%-34s %s\n' "platforms" "$(ls "$work/dist1" | sed -n 's/.*manylinux_2_17_\([a-z0-9_]*\)\..*/\1/p' | tr '\n' ' ')"
printf '%-34s %s\n' "cores" "$(nproc)"
printf '%-34s %.2f s  (%s)\n' "cold build --arch all" "$(echo "$t1 - $t0" | bc)" "$(grep '^Compiled' "$work/cold.log")"
printf '%-34s %.3f s  (%s)\n' "rebuild, nothing changed" "$(echo "$t2 - $t1" | bc)" "$(grep '^Compiled' "$work/warm.log")"
printf '%-34s %.3f s  (%s)\n' "rebuild into another folder" "$(echo "$t3 - $t2" | bc)" "$(grep '^Compiled' "$work/repack.log")"
printf '%-34s %s\n' "wheels byte-identical" "$identical"
