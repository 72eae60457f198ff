#!/usr/bin/env bats
# Two builds from two checkouts (two source folders, each of links to kernels/ and wheels/) that
# share one --cache and run at the same time (issue 45). Each checkout has its own work folder
# and so its own lock: nothing makes the second wait, and both compile the same cache entries at
# once. Each must write its compiler's output under a name of its own (the entry's name and
# the process id) and rename it into place, so that both succeed with the same wheel and no
# temporary file is left in the cache. The fake build is tests/cli/plan/fake-build.bash.
bats_require_minimum_version 1.5.0
load fake-build

# fake-build.bash's setup, then the second checkout, and a fake nvcc mode of this file's own.
eval "fake_build_$(declare -f setup)"
setup() {
  fake_build_setup
  SRC2="$BATS_TEST_TMPDIR/src2"
  mkdir -p "$SRC2"
  ln -sfn "$ROOT/kernels" "$SRC2/kernels"
  ln -sfn "$ROOT/wheels" "$SRC2/wheels"
  # FAKE_NVCC_MODE=meet: the output written first, as a compiler writes it over its run, then
  # held open until the other build's nvcc has written the same cache entry too (MEET, one
  # folder per entry, a file per nvcc; 60 s at most): the two compiles of an entry overlap,
  # whatever the two builds' start times. Any other mode goes to fake-build.bash's nvcc.
  mv "$FAKE/bin/nvcc" "$FAKE/bin/nvcc-fake"
  cat > "$FAKE/bin/nvcc" <<'NVCC'
#!/bin/sh
[ "${FAKE_NVCC_MODE:-}" = meet ] || exec "$(dirname "$0")/nvcc-fake" "$@"
case "$1" in --version|--list-gpu-code|--help) exec "$(dirname "$0")/nvcc-fake" "$@" ;; esac
out=
for a; do [ "$prev" = -o ] && out=$a; prev=$a; done
printf 'fatbin bytes\n' > "$out"
entry="$MEET/$(basename "${out%.tmp*}")"
mkdir -p "$entry" && : > "$entry/$$"
i=0
while [ "$(ls "$entry" | wc -l)" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
NVCC
  chmod +x "$FAKE/bin/nvcc"
  export MEET="$BATS_TEST_TMPDIR/meet"
}

# The cache entries a build of source folder $1 would write (its dry run's step outputs in the
# cache), sorted.
planned_entries() {
  env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --dry-run --json --quiet --arch sm_90 --platform "$HOST_CPU" \
      --source "$1" --cache "$CACHE" --out "$OUT" | jq -r --arg c "$CACHE/" '.steps[].output | select(startswith($c))' | sort
}

# The two builds at once, SRC and SRC2 into out1 and out2, with FAKE_NVCC_MODE=$1; both must
# succeed, with the same wheel, and leave nothing temporary in the cache.
two_checkouts_at_once() {
  local mode=$1 first
  SRC="$SRC" OUT="$BATS_TEST_TMPDIR/out1" build FAKE_NVCC_MODE="$mode" > "$BATS_TEST_TMPDIR/one.log" 2>&1 &
  first=$!
  SRC="$SRC2" OUT="$BATS_TEST_TMPDIR/out2" build FAKE_NVCC_MODE="$mode" > "$BATS_TEST_TMPDIR/two.log" 2>&1 ||
    { echo "the build of src2 failed:" >&2; cat "$BATS_TEST_TMPDIR/two.log" >&2; wait "$first"; return 1; }
  wait "$first" || { echo "the build of src failed:" >&2; cat "$BATS_TEST_TMPDIR/one.log" >&2; return 1; }
  # two work folders, so two locks: neither build waited for the other
  [ -e "$SRC/build/msda/.lock" ]
  [ -e "$SRC2/build/msda/.lock" ]
  cmp "$BATS_TEST_TMPDIR"/out1/*.whl "$BATS_TEST_TMPDIR"/out2/*.whl
  [ -n "$(find "$CACHE" -name '*.fatbin')" ] || { echo "no fatbin in the cache" >&2; return 1; }
  if [ -n "$(find "$CACHE" -name '*.tmp*')" ]; then
    echo "temporary files left in the cache:" >&2; find "$CACHE" -name '*.tmp*' >&2; return 1
  fi
}

@test "two checkouts sharing one cache, nvcc slow: both builds succeed with one wheel, no temporary file left" {
  two_checkouts_at_once slow
}

@test "two checkouts of the same sources share one cache's entries: the second compiles nothing" {
  [ "$(planned_entries "$SRC2")" = "$(planned_entries "$SRC")" ] ||
    { echo "the two checkouts' builds would write different cache entries:" >&2
      diff <(planned_entries "$SRC") <(planned_entries "$SRC2") >&2; return 1; }
  run --separate-stderr build
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  find "$CACHE" -type f ! -name '.*' | sort > "$BATS_TEST_TMPDIR/after-one"
  SRC="$SRC2" OUT="$BATS_TEST_TMPDIR/out2" run --separate-stderr build
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  find "$CACHE" -type f ! -name '.*' | sort | diff "$BATS_TEST_TMPDIR/after-one" - >&2
}

@test "two checkouts sharing one cache, their nvcc writing one entry at the same time: both succeed alike" {
  # Only builds that write the same entries can collide (the test above says whether they do).
  [ "$(planned_entries "$SRC2")" = "$(planned_entries "$SRC")" ] ||
    skip "the two checkouts write different cache entries, so none is written by both at once"
  two_checkouts_at_once meet
  # every fatbin entry was compiled by both builds, at once
  local entries=0 entry
  for entry in "$MEET"/*; do
    [ "$(ls "$entry" | wc -l)" -eq 2 ] || { echo "$entry: $(ls "$entry")" >&2; return 1; }
    entries=$((entries + 1))
  done
  [ "$entries" -ge 1 ]
}
