#!/usr/bin/env bats
# build under faults: nvcc failing, killed, hanging past MSDA_BUILD_STEP_TIMEOUT, an output folder
# that cannot be made, two builds sharing one cache, and a build interrupted with SIGINT. Each
# ends with a clear error and the build's documented exit status, nothing partial in the cache or
# the output folder, and a next build that succeeds. A fake nvcc (FAKE_NVCC_MODE) stands in for
# the compiler; the host C and the link are real.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
load ../host-cpu

setup() {
  FAKE="$BATS_TEST_TMPDIR/cuda-13.0"
  mkdir -p "$FAKE/bin"
  ln -s "$(dirname "$(dirname "$(realpath "$(command -v nvcc)")")")/include" "$FAKE/include"
  cat > "$FAKE/bin/nvcc" <<'NVCC'
#!/bin/sh
case "$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release 13.0, V13.0.0"; exit 0 ;;
  --list-gpu-code) echo sm_80; echo sm_90; exit 0 ;;
esac
out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
case "${FAKE_NVCC_MODE:-ok}" in
  fail) echo "msda_kernels.cu(1): error: this nvcc was told to fail" >&2; exit 2 ;;
  kill) kill -9 $$ ;;
  hang) exec sleep 600 ;;
  slow) sleep 3 ;;
esac
printf 'fatbin bytes of %s\n' "$out" > "$out"
NVCC
  chmod +x "$FAKE/bin/nvcc"
  CACHE="$BATS_TEST_TMPDIR/cache" OUT="$BATS_TEST_TMPDIR/out"
  SRC="$BATS_TEST_TMPDIR/src"
  mkdir -p "$SRC" && ln -sfn "$ROOT/kernels" "$SRC/kernels" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
}

build() {
  env MSDA_TOOLKIT_PATHS="$FAKE" "$@" "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" \
      --source "$SRC" --cache "$CACHE" --out "$OUT"
}

# Nothing a failed step made is in the cache: no entry, no temporary file.
cache_has_no_fatbin() {
  [ -z "$(find "$CACHE" -name '*.fatbin*' 2>/dev/null)" ] || { find "$CACHE" -name '*.fatbin*' >&2; return 1; }
}

@test "nvcc failing: exit 4 naming the step, its exit status and its error; nothing cached, no wheel" {
  run --separate-stderr build FAKE_NVCC_MODE=fail
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"sm_90 (CUDA 13.0) failed, exit 2 (log: "*"this nvcc was told to fail"* ]]
  [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ]
  cache_has_no_fatbin
  [ -z "$(ls "$OUT" 2>/dev/null)" ]
  run --separate-stderr build
  [ "$status" -eq 0 ] && ls "$OUT"/*.whl
}

@test "nvcc killed by a signal: exit 4 naming the signal; the next build succeeds" {
  run --separate-stderr build FAKE_NVCC_MODE=kill
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"sm_90 (CUDA 13.0) failed, killed by signal 9"* ]]
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
  set -m  # its own process group, as a terminal's Ctrl-C would reach
  build FAKE_NVCC_MODE=hang > "$BATS_TEST_TMPDIR/int.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -n "$(find "$CACHE" -name '*.tmp*' 2>/dev/null)" ] && break; sleep 0.1; done
  kill -INT -- "-$pid"
  wait "$pid" || true
  set +m
  [ -z "$(find "$CACHE" -name '*.fatbin')" ]
  [ -z "$(ls "$OUT" 2>/dev/null)" ]
  run --separate-stderr build
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  ls "$OUT"/*.whl
}
