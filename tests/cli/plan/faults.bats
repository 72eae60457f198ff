#!/usr/bin/env bats
# build under faults: nvcc failing, killed, hanging past MSDA_BUILD_STEP_TIMEOUT, an output folder
# that cannot be made, two builds sharing one cache, and a build interrupted with SIGINT. Each
# ends with a clear error and the build's documented exit status, nothing partial in the cache or
# the output folder, and a next build that succeeds. A fake nvcc (FAKE_NVCC_MODE) stands in for
# the compiler; the host C and the link are real.
bats_require_minimum_version 1.5.0

load fake-build

@test "nvcc failing: exit 4 naming the step, its exit status and its error; nothing cached, no wheel" {
  run --separate-stderr build FAKE_NVCC_MODE=fail
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"compute_90 PTX (CUDA 13.0, part "[01]") failed, exit 2 (log: "*"this nvcc was told to fail"* ]]
  [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ]
  cache_has_no_fatbin
  [ -z "$(ls "$OUT" 2>/dev/null)" ]
  run --separate-stderr build
  [ "$status" -eq 0 ] && ls "$OUT"/*.whl
}

@test "nvcc killed by a signal: exit 4 naming the signal; the next build succeeds" {
  run --separate-stderr build FAKE_NVCC_MODE=kill
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"compute_90 PTX (CUDA 13.0, part "[01]") failed, killed by signal 9"* ]]
  cache_has_no_fatbin
  run --separate-stderr build
  [ "$status" -eq 0 ]
}

@test "a hanging nvcc is stopped after MSDA_BUILD_STEP_TIMEOUT: exit 4, in about that time" {
  start=$SECONDS
  run --separate-stderr timeout 60 env FAKE_NVCC_MODE=hang MSDA_BUILD_STEP_TIMEOUT=2 MSDA_TOOLKIT_PATHS="$FAKE" \
      "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT"
  [ "$status" -eq 4 ]
  [ $((SECONDS - start)) -lt 30 ]
  [[ "$stderr" == *"did not finish in 2 s (MSDA_BUILD_STEP_TIMEOUT)"* ]]
  cache_has_no_fatbin
  [ -z "$(ls "$OUT" 2>/dev/null)" ]
}

@test "a malformed MSDA_BUILD_STEP_TIMEOUT is a usage error" {
  run --separate-stderr build MSDA_BUILD_STEP_TIMEOUT=soon
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"MSDA_BUILD_STEP_TIMEOUT must be a number of seconds"* ]]
}

@test "an output folder that cannot be made: an error naming it, and no wheel anywhere" {
  touch "$BATS_TEST_TMPDIR/file"
  OUT="$BATS_TEST_TMPDIR/file/dist"
  run --separate-stderr build
  [ "$status" -eq 3 ]
  [[ "$stderr" == *"cannot create '$BATS_TEST_TMPDIR/file/dist'"* ]]
  [ -z "$(find "$BATS_TEST_TMPDIR" -name '*.whl')" ]
}

@test "two builds sharing one cache at once both succeed with the same wheel" {
  OUT="$BATS_TEST_TMPDIR/out1" build FAKE_NVCC_MODE=slow > "$BATS_TEST_TMPDIR/one.log" 2>&1 &
  first=$!
  OUT="$BATS_TEST_TMPDIR/out2" build FAKE_NVCC_MODE=slow > "$BATS_TEST_TMPDIR/two.log" 2>&1 || { cat "$BATS_TEST_TMPDIR/two.log" >&2; return 1; }
  wait "$first" || { cat "$BATS_TEST_TMPDIR/one.log" >&2; return 1; }
  cmp "$BATS_TEST_TMPDIR"/out1/*.whl "$BATS_TEST_TMPDIR"/out2/*.whl
  [ -z "$(find "$CACHE" -name '*.tmp*')" ]
}

@test "a build interrupted with SIGINT leaves no wheel and no cache entry; the next one succeeds" {
  # Its own session and process group, as a terminal's Ctrl-C would reach, and SIGINT at its
  # default: a background job of a shell without job control starts with SIGINT ignored (and
  # `set -m` gives no job control where there is no terminal, as in CI), so the build would
  # finish its 600 s nvcc and store the partial output. fd 3 (bats' own) closed: a process left
  # behind must not hold the test open.
  setsid env --default-signal=INT MSDA_TOOLKIT_PATHS="$FAKE" FAKE_NVCC_MODE=hang "$MSDA_DOCTOR" build \
      --arch sm_90 --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT" \
      > "$BATS_TEST_TMPDIR/int.log" 2>&1 3>&- &
  pid=$!
  # Ctrl-C once nvcc runs (its partial output is there): sent earlier, a build slowed down (under
  # valgrind) could spawn nvcc after the signal, outside its reach, and leave it running
  # (the first step writes the PTX, in the build's own folder under the work folder)
  for _ in $(seq 600); do [ -n "$(find "$CACHE" "$SRC/build" -name '*.tmp*' 2>/dev/null)" ] && break; sleep 0.1; done
  [ -n "$(find "$CACHE" "$SRC/build" -name '*.tmp*' 2>/dev/null)" ] || { kill -KILL -- "-$pid"; echo "nvcc never started" >&2; return 1; }
  kill -INT -- "-$pid"
  wait "$pid" || true
  [ -z "$(find "$CACHE" -name '*.fatbin')" ]
  [ -z "$(ls "$OUT" 2>/dev/null)" ]
  run --separate-stderr build
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  ls "$OUT"/*.whl
}
