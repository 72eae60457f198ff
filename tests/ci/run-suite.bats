#!/usr/bin/env bats
# tests/run-suite: a suite run alone (make check-unit, ...) gets the sanitizer options that
# `make check` probes once for every suite (tests/sanitizer-env), and keeps them where make
# check already has.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

# What the suite's command sees: the probe's mark and ASAN_OPTIONS.
report='echo "probed=${MSDA_SANITIZER_PROBED:-} asan=${ASAN_OPTIONS:-}"; echo "1 passed, 0 failed"'

@test "a suite run alone probes the sanitizer options, keeping the caller's" {
  run env -u MSDA_SANITIZER_PROBED ASAN_OPTIONS=abort_on_error=1 \
    "$ROOT/tests/run-suite" "$BATS_TEST_TMPDIR/results" alone counts bash -c "$report"
  [ "$status" -eq 0 ]
  # Where LeakSanitizer cannot run (qemu-user) the probe adds detect_leaks=0, and says so.
  [[ "$output" =~ probed=1\ asan=abort_on_error=1(:detect_leaks=0)?$'\n' ]]
  grep -qx '1 0 0' "$BATS_TEST_TMPDIR/results/alone"
}

@test "under make check the suite keeps the options it was given" {
  run env MSDA_SANITIZER_PROBED=1 ASAN_OPTIONS=given=1 \
    "$ROOT/tests/run-suite" "$BATS_TEST_TMPDIR/results" inner counts bash -c "$report"
  [ "$status" -eq 0 ]
  [[ "$output" == *"probed=1 asan=given=1"* ]]
}
