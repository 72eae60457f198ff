#!/usr/bin/env bats
# Suites whose exit status tells the truth (issue 45): tests/run-suite exits non-zero when its
# suite recorded a failure, in each of its formats, and zero when the suite passed, so that
# `make check-NAME` fails with its suite; `make check` still runs every suite after a failing one
# and ends with tests/summarize, which fails. Fake suite commands (sh -c) stand for the suites;
# for `make check`, targets defined on the command line (--eval) stand for check-NAME, as in
# sanitizer-probe.bats.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

setup() {
  RESULTS="$BATS_TEST_TMPDIR/results"
}

# tests/run-suite on suite NAME of FORMAT, whose command prints TEXT (printf's format) and exits
# with CODE.
suite() {
  local name=$1 format=$2 text=$3 code=$4
  run "$ROOT/tests/run-suite" "$RESULTS" "$name" "$format" sh -c "printf '$text'; exit $code"
}

# The counts run-suite recorded for NAME: "passed failed skipped".
recorded() { cat "$RESULTS/$1"; }

@test "run-suite: a TAP suite with a failing test exits non-zero, whatever its command's status" {
  suite tap tap '1..2\nok 1 a\nnot ok 2 b\n' 1
  [ "$status" -ne 0 ] || { echo "$output" >&2; return 1; }
  [ "$(recorded tap)" = "1 1 0" ]
  [[ "$output" == *"== suite tap: 1 passed, 1 failed, 0 skipped"* ]]
  # a runner that prints the failing line and still exits 0
  suite tap tap '1..2\nok 1 a\nnot ok 2 b\n' 0
  [ "$status" -ne 0 ]
  [ "$(recorded tap)" = "1 1 0" ]
}

@test "run-suite: a counts suite that printed '219 passed, 1 failed' and exited 0 exits non-zero" {
  # make check-corpus: tests/diagnose-corpus/score's last line, its exit status 0
  suite corpus counts '219 passed, 1 failed\n' 0
  [ "$status" -ne 0 ] || { echo "$output" >&2; return 1; }
  [ "$(recorded corpus)" = "219 1 0" ]
}

@test "run-suite: a Check suite with a failure or an error exits non-zero" {
  suite unit check '80%%: Checks: 5, Failures: 1, Errors: 0\n' 1
  [ "$status" -ne 0 ]
  [ "$(recorded unit)" = "4 1 0" ]
  suite unit check '80%%: Checks: 5, Failures: 0, Errors: 1\n' 1
  [ "$status" -ne 0 ]
  [ "$(recorded unit)" = "4 1 0" ]
}

@test "run-suite: a command that fails without a counted failure, or runs no test, exits non-zero" {
  suite crashed tap '1..3\nok 1 a\n' 134
  [ "$status" -ne 0 ]
  [ "$(recorded crashed)" = "1 1 0" ]
  [[ "$output" == *"exited with status 134 and counted no failure"* ]]
  suite empty tap '' 0
  [ "$status" -ne 0 ]
  [ "$(recorded empty)" = "0 1 0" ]
  [[ "$output" == *"ran no test"* ]]
}

@test "run-suite: a suite that passed exits zero, in each format, skips included" {
  suite tap tap '1..3\nok 1 a\nok 2 b\nok 3 c # skip not here\n' 0
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
  [ "$(recorded tap)" = "2 0 1" ]
  suite counts counts '3 passed, 0 failed, 1 skipped\n' 0
  [ "$status" -eq 0 ]
  [ "$(recorded counts)" = "3 0 1" ]
  suite unit check '100%%: Checks: 5, Failures: 0, Errors: 0\n' 0
  [ "$status" -eq 0 ]
  [ "$(recorded unit)" = "5 0 0" ]
}

# `make check` on CHECK_SUITES=$*, each suite a fake: check-fail records a failure, check-pass
# a pass. Results in $RESULTS, not the checkout's build/test-results.
make_check() {
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL MSDA_NO_INSTALL=1 make --no-print-directory -C "$ROOT" \
    RESULTS="$RESULTS" CHECK_SUITES="$*" \
    --eval 'check-fail: ; @$(RUN_SUITE) fail tap sh -c "echo 1..1; echo not ok 1 planted"' \
    --eval 'check-pass: ; @$(RUN_SUITE) pass tap sh -c "echo 1..1; echo ok 1 fine"' \
    check
}

@test "make check: a failing suite does not stop the suites after it; summarize runs and fails" {
  make_check fail pass
  [ "$status" -ne 0 ] || { echo "$output" >&2; return 1; }
  # the suite after the failing one ran and recorded its pass
  [ "$(recorded fail)" = "0 1 0" ] || { echo "$output" >&2; return 1; }
  [ "$(recorded pass)" = "1 0 0" ] || { echo "$output" >&2; return 1; }
  [[ "$output" == *"failing suites: fail (logs in $RESULTS/)"* ]]
  [[ "$output" == *"Summary: 1 passed, 1 failed, 0 skipped"* ]]
}

@test "make check: every suite passing exits zero" {
  make_check pass
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
  [[ "$output" == *"Summary: 1 passed, 0 failed, 0 skipped"* ]]
}
