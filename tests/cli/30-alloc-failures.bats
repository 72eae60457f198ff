#!/usr/bin/env bats
# Failing allocations (issue 13): inspect on a wheel, a shared object, a fatbin and a cubin, and
# diagnose --no-probe on a log, run with allocation N failing for every N from 1 to the number a
# successful run makes (diagnose: a fixed sample of them, its 16,000 allocations would take ten
# minutes). Every run must end either with the successful run's exit status and exactly its
# output (the failure was recovered from), or with exit status 9 (out of memory) and one line
# "msda-doctor: error: ..." that does not call the input corrupt. Never a crash (a status of 124 or more, from
# timeout or a signal), a second line, a "corrupt" verdict, or a result quietly missing a part.
# The one exception is libarchive's own: some of its string allocations end the process with
# status 1 and "Fatal Internal Error in libarchive: ...", which no caller can catch; those runs
# are counted and shown. The failures come from tests/faults/inject.c preloaded into the
# release build (the sanitizer build replaces malloc itself).
load helpers

setup() {
  [ -n "${MSDA_INJECT:-}" ] && [ -n "${MSDA_DOCTOR_RELEASE:-}" ] ||
    skip "needs MSDA_INJECT and MSDA_DOCTOR_RELEASE (make check-cli sets them)"
}

# sweep STEP TAIL ARGS...: the allocations to fail are 1, 1 + STEP, ... and the last TAIL ones.
# The preload and the variables go on msda-doctor's own command (env), after timeout: a wrapper
# preloaded in front would take MSDA_INJECT_* for itself (inject.c removes them at load).
sweep() {
  local step=$1 tail=$2
  shift 2
  local clean_out="$BATS_TEST_TMPDIR/clean.out" out="$BATS_TEST_TMPDIR/run.out" err="$BATS_TEST_TMPDIR/run.err"
  local counts="$BATS_TEST_TMPDIR/counts"
  set +e
  timeout 60 env LD_PRELOAD="$MSDA_INJECT" MSDA_INJECT_COUNT="$counts" "$MSDA_DOCTOR_RELEASE" "$@" > "$clean_out" 2>/dev/null
  local clean_status=$?
  set -e
  [ "$clean_status" -le 1 ] || { echo "the run without a fault failed: $clean_status" >&2; return 1; }
  local total
  total=$(awk '$1 == "allocations" { print $2 }' "$counts")
  [ "$total" -gt 0 ]
  local tried=0 recovered=0 nomem=0 libarchive=0 bad=0 n
  for n in $( { seq 1 "$step" "$total"; seq $((total > tail ? total - tail + 1 : 1)) "$total"; } | sort -nu); do
    tried=$((tried + 1))
    set +e
    timeout 60 env LD_PRELOAD="$MSDA_INJECT" MSDA_INJECT_MALLOC_FAIL="$n" "$MSDA_DOCTOR_RELEASE" "$@" > "$out" 2> "$err"
    local status=$?
    set -e
    local lines
    lines=$(grep -c . "$err" || true)
    if [ "$status" -eq "$clean_status" ] && [ "$lines" -eq 0 ] && cmp -s "$out" "$clean_out"; then
      recovered=$((recovered + 1))
    elif [ "$status" -eq 9 ] && [ "$lines" -eq 1 ] && grep -q '^msda-doctor: error: ' "$err" && ! grep -q corrupt "$err"; then
      nomem=$((nomem + 1))
    elif [ "$status" -eq 1 ] && [ "$lines" -eq 1 ] && grep -q '^Fatal Internal Error in libarchive: ' "$err"; then
      libarchive=$((libarchive + 1))
    else
      bad=$((bad + 1))
      echo "allocation $n of $total: status $status, $lines line(s): $(head -c 300 "$err")" >&2
    fi
  done
  echo "# $*: $total allocations, $tried runs: $recovered recovered, $nomem out of memory (exit 9)," \
       "$libarchive ended by libarchive, $bad wrong" >&3
  [ "$bad" -eq 0 ]
}

@test "inspect a wheel with each allocation failing in turn" {
  w="$BATS_TEST_TMPDIR/msda-0.1.0-py3-none-manylinux_2_17_x86_64.whl"
  python3 - "$w" "$(fix f13-multi.so)" "$(fix f13-sm80.so)" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.write(sys.argv[2], "msda/libmsda.so")
    z.write(sys.argv[3], "msda/sub/libother.so.1")
    z.writestr("msda/__init__.py", "")
    z.writestr("msda-0.1.0.dist-info/RECORD", "")
PY
  sweep 1 0 inspect "$w"
}

@test "inspect a shared object, fatbins and a cubin with each allocation failing in turn" {
  sweep 1 0 inspect "$(fix f13-multi.so)"
  sweep 1 0 inspect --json "$(fix f13-compressed.fatbin)"
  sweep 1 0 inspect "$(fix f13-uncompressed.fatbin)"
  sweep 1 0 inspect --gpu h100 "$(fix f13-sm90.cubin)"
}

@test "diagnose --no-probe a log, with a sample of its allocations failing" {
  # every 40th, and the last 400: the log's own scan and the report come last
  sweep 40 400 diagnose --no-probe "$BATS_TEST_DIRNAME/../fixtures/logs/no-kernel-image.log"
}
