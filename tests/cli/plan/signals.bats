#!/usr/bin/env bats
# build stopped by SIGTERM, SIGHUP or SIGINT sent to msda-doctor alone (as a scheduler, CI
# cancellation or `timeout` sends it): every compile step's process group is stopped (the fake
# nvcc and the child it waits on, as nvcc waits on cicc), nothing partial is left in the cache,
# the work folder or /tmp, msda-doctor dies of the same signal once it has cleaned up, and the
# next build succeeds with a wheel byte for byte a clean build's.
bats_require_minimum_version 1.5.0
load fake-build

# Starts a build whose nvcc hangs, waits until it runs, sends SIG to msda-doctor only, and
# leaves its exit status in $status.
stop_with() {
  local sig=$1 mode=${2:-hang-tree}
  export FAKE_PIDS="$BATS_TEST_TMPDIR/pids"
  : > "$FAKE_PIDS"
  # The signal at its default (a background job starts with SIGINT ignored, which the build
  # keeps ignored); fd 3 (bats' own) closed so that a process left behind cannot hold the test.
  env --default-signal="$sig" MSDA_TOOLKIT_PATHS="$FAKE" FAKE_NVCC_MODE="$mode" TMPDIR="$BATS_TEST_TMPDIR/tmp" \
    "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT" \
    > "$BATS_TEST_TMPDIR/build.log" 2>&1 3>&- &
  local pid=$!
  for _ in $(seq 600); do [ -s "$FAKE_PIDS" ] && break; sleep 0.1; done
  [ -s "$FAKE_PIDS" ] || { kill -KILL "$pid"; echo "nvcc never started" >&2; return 1; }
  kill -"$sig" "$pid"
  status=0
  wait "$pid" || status=$?
}

# No process the steps started is alive (a zombie, dead but not yet reaped by whoever adopted
# it, counts as gone); nothing partial anywhere.
assert_clean() {
  local p state
  for p in $(cat "$FAKE_PIDS"); do
    state=$(ps -o stat= -p "$p" 2>/dev/null) || continue
    if [[ "$state" != Z* ]]; then echo "process $p is still running ($state)" >&2; kill -KILL "$p"; return 1; fi
  done
  [ -z "$(find "$CACHE" -name '*.tmp*')" ] || { find "$CACHE" -name '*.tmp*' >&2; return 1; }
  [ -z "$(find "$SRC/" -path '*build/msda/tmp-*')" ] || { echo "a step temp folder was left" >&2; return 1; }
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/tmp" 2>/dev/null)" ] || { ls -A "$BATS_TEST_TMPDIR/tmp" >&2; return 1; }
  [ -z "$(ls -A "$OUT" 2>/dev/null)" ]
}

# The next build succeeds, and its wheel is a clean build's, byte for byte.
assert_next_build_is_clean() {
  run --separate-stderr build
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  local clean="$BATS_TEST_TMPDIR/clean"
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" \
      --source "$SRC" --cache "$clean/cache" --out "$clean/out"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  cmp "$(compgen -G "$OUT/*.whl")" "$(compgen -G "$clean/out/*.whl")"
}

setup_tmp() { mkdir -p "$BATS_TEST_TMPDIR/tmp"; }

@test "SIGTERM to msda-doctor alone stops every compiler it started, cleans up, and ends with SIGTERM" {
  setup_tmp
  stop_with TERM
  [ "$status" -eq 143 ] || { echo "exit $status"; cat "$BATS_TEST_TMPDIR/build.log"; return 1; } >&2
  assert_clean
  assert_next_build_is_clean
}

@test "SIGHUP (the terminal closed) does the same, and ends with SIGHUP" {
  setup_tmp
  stop_with HUP
  [ "$status" -eq 129 ] || { echo "exit $status"; cat "$BATS_TEST_TMPDIR/build.log"; return 1; } >&2
  assert_clean
  assert_next_build_is_clean
}

@test "SIGINT to msda-doctor alone does the same, and ends with SIGINT" {
  setup_tmp
  stop_with INT
  [ "$status" -eq 130 ] || { echo "exit $status"; cat "$BATS_TEST_TMPDIR/build.log"; return 1; } >&2
  assert_clean
  assert_next_build_is_clean
}

# The PTX steps write into the build's own folder, the image steps into the cache under a
# temporary name: stopped there, the partial image in the cache must go too.
@test "SIGTERM while an image step writes into the cache: its partial file is removed, nothing is cached" {
  setup_tmp
  stop_with TERM hang-tree-image
  [ "$status" -eq 143 ] || { echo "exit $status"; cat "$BATS_TEST_TMPDIR/build.log"; return 1; } >&2
  assert_clean
  [ -z "$(find "$CACHE" -name '*.fatbin')" ] || { find "$CACHE" >&2; return 1; }
  assert_next_build_is_clean
}

@test "progress on a pipe: one line per finished step, counted; --quiet prints none" {
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" \
      --source "$SRC" --cache "$CACHE" --out "$OUT"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  local total
  total=$(grep -c '^\[' <<<"$stderr")
  [ "$total" -ge 3 ]
  # each part's PTX, then its image: a part's image line after that part's PTX line
  local part ptx_line image_line
  for part in 0 1; do
    ptx_line=$(grep -n "^\[[0-9]*/$total\] compute_90 PTX (CUDA 13.0, part $part) [0-9.]* s$" <<<"$stderr" | cut -d: -f1)
    image_line=$(grep -n "^\[[0-9]*/$total\] sm_90 (CUDA 13.0, part $part) [0-9.]* s$" <<<"$stderr" | cut -d: -f1)
    [ -n "$ptx_line" ] && [ -n "$image_line" ] && [ "$ptx_line" -lt "$image_line" ] || { echo "$stderr" >&2; return 1; }
  done
  grep -q "^\[1/$total\] compute_90 PTX (CUDA 13.0, part [01]) [0-9.]* s$" <<<"$stderr" || { echo "$stderr" >&2; return 1; }
  grep -q "^\[$total/$total\] " <<<"$stderr"
  rm -rf "$CACHE" "$OUT"
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --quiet --arch sm_90 \
      --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT"
  [ "$status" -eq 0 ] && [ -z "$stderr" ]
}

@test "a second build of the same folder names the process it waits for; --no-wait fails at once; --dry-run does not wait" {
  export FAKE_PIDS="$BATS_TEST_TMPDIR/pids"
  : > "$FAKE_PIDS"
  env MSDA_TOOLKIT_PATHS="$FAKE" FAKE_NVCC_MODE=hang-tree "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" \
    --source "$SRC" --cache "$CACHE" --out "$OUT" > /dev/null 2>&1 3>&- &
  local first=$!
  for _ in $(seq 600); do [ -s "$FAKE_PIDS" ] && break; sleep 0.1; done
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --no-wait --arch sm_90 \
      --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT"
  local no_wait=$status no_wait_err=$stderr
  run --separate-stderr timeout 20 env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --dry-run --arch sm_90 \
      --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT"
  local dry=$status
  # The waiting build says whom it waits for, then finishes once the first is stopped.
  env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" --source "$SRC" \
    --cache "$CACHE" --out "$OUT" > /dev/null 2> "$BATS_TEST_TMPDIR/second.err" 3>&- &
  local second=$!
  for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/second.err" ] && break; sleep 0.1; done
  kill -TERM "$first"
  wait "$first" || true
  wait "$second"
  [ "$no_wait" -eq 4 ] && [[ "$no_wait_err" == *"another build of this folder is running (process $first holds '"*"/.lock')"* ]] ||
    { echo "--no-wait: exit $no_wait: $no_wait_err" >&2; return 1; }
  [ "$dry" -eq 0 ] || { echo "--dry-run waited or failed: exit $dry" >&2; return 1; }
  grep -q "another build of this folder is running (process $first holds " "$BATS_TEST_TMPDIR/second.err"
}
