#!/usr/bin/env bats
# Every exit status of the md_exit enum (src/cli/cli.h) is one the tool really exits with: for
# each code a test, named "exit N: ...", makes msda-doctor end with N the way a user would meet
# it. The last test checks that the codes these tests exercise, the codes of the enum and the
# codes of the man page's EXIT STATUS are one set, so a code added to the enum (or the man page)
# without a test here fails. Exit 9 (out of memory) comes from tests/faults/inject.c preloaded
# into the release build ($MSDA_INJECT, $MSDA_DOCTOR_RELEASE: make check-cli sets them), as in
# 30-alloc-failures.bats, and from a write to /dev/full.
load helpers
# the loopback redist server of the fetch suites: serve, teardown, $REDIST, $ROOT
load fetch/server

CLI_H="$ROOT/src/cli/cli.h"
MAN="$ROOT/man/msda-doctor.1"
LOGS="$ROOT/tests/fixtures/logs"

# expect_exit CODE COMMAND...: runs COMMAND (stdout in $output, stderr in $stderr) and fails
# unless it exits CODE without a sanitizer report. The test's name must begin "exit CODE:",
# which is what the coverage test below counts.
expect_exit() {
  local code=$1
  shift
  [[ "$BATS_TEST_DESCRIPTION" == "exit $code: "* ]] ||
    { echo "a test of exit $code must be named 'exit $code: ...'" >&2; return 1; }
  run --separate-stderr "$@"
  assert_no_sanitizer_report
  [ "$status" -eq "$code" ] || { echo "exit $status, want $code; stderr: $stderr" >&2; return 1; }
}

# The enum's codes, one a line, sorted; fails when an entry has no explicit number ("Never
# renumber": each code is written down).
enum_codes() {
  local block
  block=$(sed -n '/^typedef enum {/,/^} md_exit;/p' "$CLI_H")
  grep -q '} md_exit;' <<<"$block" || { echo "no md_exit enum in $CLI_H" >&2; return 1; }
  local names numbers
  names=$(grep -c '^[[:space:]]*MD_EXIT_[A-Z_0-9]*' <<<"$block")
  numbers=$(sed -n 's/^[[:space:]]*MD_EXIT_[A-Z_0-9]*[[:space:]]*=[[:space:]]*\([0-9][0-9]*\).*/\1/p' <<<"$block")
  [ "$names" -gt 0 ] && [ "$names" -eq "$(grep -c . <<<"$numbers")" ] ||
    { echo "md_exit: $names names but numbers for $(grep -c . <<<"$numbers")" >&2; return 1; }
  sort -n <<<"$numbers"
}

# The codes of the man page's EXIT STATUS: the .B tag after each .TP.
man_codes() {
  awk '/^\.SH / { in_part = ($0 ~ /^\.SH "?EXIT STATUS"?$/); next }
       in_part && /^\.TP/ { tag = 1; next }
       in_part && tag { tag = 0; if ($1 == ".B" && $2 ~ /^[0-9]+$/) print $2; else print "bad:" $0 }' "$MAN" | sort -n
}

# The codes the tests of FILE are named for.
tested_codes() {
  sed -n 's/^@test "exit \([0-9][0-9]*\): .*/\1/p' "$1" | sort -nu
}

fetch_from() {
  env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u MSDA_CUDA_MIRROR \
    "$MSDA_DOCTOR" fetch --cuda 11.8.0 --mirror "$URL" --dest "$BATS_TEST_TMPDIR/dest" --timeout 2 --retries 0
}

@test "exit 0: --version, and diagnose on a clean log" {
  expect_exit 0 doctor --version
  expect_exit 0 doctor diagnose --no-probe "$LOGS/clean-build.log"
  [[ "$output" == *"No issues found"* ]]
}

@test "exit 1: diagnose finds a known failure in a log" {
  expect_exit 1 doctor diagnose --no-probe --json "$LOGS/no-kernel-image.log"
  [ "$(jq -r '.findings[0].id' <<<"$output")" = no-kernel-image ]
}

@test "exit 2: an unknown option is a usage error" {
  expect_exit 2 doctor inspect --frob
  [[ "$stderr" == *"unknown option '--frob'"* ]]
}

@test "exit 3: inspect on a file of no known kind" {
  printf 'plain text\n' > "$BATS_TEST_TMPDIR/notes.txt"
  expect_exit 3 doctor inspect "$BATS_TEST_TMPDIR/notes.txt"
  assert_one_line_error
  [[ "$stderr" == *"not an ELF file, fatbin, cubin or wheel"* ]]
}

@test "exit 4: build whose nvcc fails" {
  # A fake CUDA 13.0 whose nvcc answers the version questions and fails every compile; the
  # sources are links to the repository's (build writes its step logs under them).
  local tk="$BATS_TEST_TMPDIR/cuda-13.0" src="$BATS_TEST_TMPDIR/src"
  mkdir -p "$tk/bin" "$src"
  cat > "$tk/bin/nvcc" <<'NVCC'
#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 13.0, V13.0.0"; exit 0 ;;
  --list-gpu-code) echo sm_90; exit 0 ;;
esac
echo "msda_kernels.cu(1): error: this nvcc was told to fail" >&2
exit 2
NVCC
  chmod +x "$tk/bin/nvcc"
  ln -s "$ROOT/kernels" "$src/kernels" && ln -s "$ROOT/wheels" "$src/wheels"
  expect_exit 4 env MSDA_TOOLKIT_PATHS="$tk" "$MSDA_DOCTOR" build --quiet --arch sm_90 --platform "$(uname -m)" \
    --source "$src" --cache "$BATS_TEST_TMPDIR/cache" --out "$BATS_TEST_TMPDIR/out"
  assert_one_line_error
  [[ "$stderr" == *" failed, "* ]]
  [ -z "$(ls "$BATS_TEST_TMPDIR/out" 2>/dev/null)" ]
}

@test "exit 5: fetch from a mirror without the release (HTTP 404)" {
  mkdir -p "$BATS_TEST_TMPDIR/repo"
  REPO="$BATS_TEST_TMPDIR/repo" serve
  expect_exit 5 fetch_from
  assert_one_line_error
  [[ "$stderr" == *"redistrib_11.8.0.json': HTTP 404"* ]]
}

@test "exit 6: fetch of an archive that does not match its sha256" {
  local repo="$BATS_TEST_TMPDIR/repo" platform
  python3 "$REDIST" make "$repo" 11.8.0
  platform=$(jq -r --arg cpu "$(uname -m)" '.host_platforms[$cpu][0]' "$ROOT/recipes/redist.json")
  jq --arg p "$platform" '.cuda_nvcc[$p].sha256 = ("0" * 64)' "$repo/redistrib_11.8.0.json" > "$repo/m"
  mv "$repo/m" "$repo/redistrib_11.8.0.json"
  REPO="$repo" serve
  expect_exit 6 fetch_from
  assert_one_line_error
  [[ "$stderr" == *"sha256 mismatch for cuda_nvcc"* ]]
}

@test "exit 9: out of memory (the first allocation fails, release build with the injector)" {
  [ -n "${MSDA_INJECT:-}" ] && [ -n "${MSDA_DOCTOR_RELEASE:-}" ] ||
    skip "needs MSDA_INJECT and MSDA_DOCTOR_RELEASE (make check-cli sets them)"
  expect_exit 9 env LD_PRELOAD="$MSDA_INJECT" MSDA_INJECT_MALLOC_FAIL=1 "$MSDA_DOCTOR_RELEASE" \
    diagnose --no-probe "$LOGS/no-kernel-image.log"
  assert_one_line_error
  [[ "$stderr" == *"out of memory"* ]]
}

@test "exit 9: the output cannot be written (/dev/full)" {
  [ -w /dev/full ] || skip "no /dev/full"
  expect_exit 9 bash -c '"$MSDA_DOCTOR" --help > /dev/full'
  [[ "$stderr" == *"cannot write the output"* ]]
}

@test "the codes tested here, the md_exit enum and the man page's EXIT STATUS are one set" {
  local enum man tested
  enum=$(enum_codes)
  man=$(man_codes)
  tested=$(tested_codes "$BATS_TEST_FILENAME")
  [ -n "$enum" ]
  if [ "$enum" != "$man" ]; then
    echo "enum ($(echo $enum)) and man page EXIT STATUS ($(echo $man)) differ" >&2; return 1
  fi
  if [ "$enum" != "$tested" ]; then
    echo "enum ($(echo $enum)) and the codes tested here ($(echo $tested)) differ" >&2; return 1
  fi
}

@test "each 'exit N:' test here runs expect_exit N" {
  awk '/^@test "exit [0-9]+: / { if (code != "" && !seen) bad = bad " " code
                                   code = $0; sub(/^@test "exit /, "", code); sub(/:.*/, "", code)
                                   seen = 0; next }
       /^@test / { if (code != "" && !seen) bad = bad " " code; code = ""; next }
       code != "" && $1 == "expect_exit" && $2 == code { seen = 1 }
       END { if (code != "" && !seen) bad = bad " " code
             if (bad != "") { print "tests named for exit" bad " do not run expect_exit with that code" > "/dev/stderr"; exit 1 } }' \
    "$BATS_TEST_FILENAME"
}
