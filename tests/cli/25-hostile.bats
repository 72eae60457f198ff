#!/usr/bin/env bats
# Hostile files (issue 13): every input that once hung, gave a plausible answer for a corrupt
# file, ran in quadratic time, filled /tmp or took unbounded memory. Inputs are made here by
# tests/cli/hostile.py from the nvcc-built fixtures, so each test shows the bytes it changes.
load helpers

t() { printf '%s/%s' "$BATS_TEST_TMPDIR" "$1"; }
hostile() { python3 "$BATS_TEST_DIRNAME/hostile.py" "$@"; }

# Exit 3, one line on stderr containing $1, nothing that looks like an answer on stdout.
expect_refused() {
  local want="$1"; shift
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$@"
  [ "$status" -eq 3 ] || { echo "status $status, stdout: $output, stderr: $stderr" >&2; return 1; }
  assert_one_line_error
  [[ "$stderr" == *"$want"* ]] || { echo "stderr: $stderr (wanted: $want)" >&2; return 1; }
  [[ "$output" != *"SASS"* && "$output" != *"runs"* ]] || { echo "stdout: $output" >&2; return 1; }
}

# ---- 1. files that are not regular files ---------------------------------------------------------

@test "a FIFO is refused by type at once, not opened (it used to hang for ever)" {
  mkfifo "$(t pipe)"
  expect_refused "'$(t pipe)': a FIFO, not a regular file" "$(t pipe)"
}

@test "a link to a FIFO is refused the same way; a link to a library still works" {
  mkfifo "$(t pipe)"
  ln -s "$(t pipe)" "$(t pipe-link)"
  expect_refused "a FIFO, not a regular file" "$(t pipe-link)"
  ln -s "$(fix f13-sm80.so)" "$(t lib-link.so)"
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$(t lib-link.so)"
  [ "$status" -eq 0 ]
  [ "$output" = "$(t lib-link.so): SASS sm_80" ]
}

@test "a character device and a socket are refused by type" {
  expect_refused "'/dev/null': a character device, not a regular file" /dev/null
  python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$(t sock)"
  expect_refused "a socket, not a regular file" "$(t sock)"
}

@test "a folder holding a FIFO is still searched: the FIFO is skipped, not waited on" {
  mkdir "$(t dir)"
  mkfifo "$(t dir/pipe.so)"
  cp "$(fix f13-sm80.so)" "$(t dir/lib.so)"
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$(t dir)"
  [ "$status" -eq 0 ]
  [ "$output" = "$(t dir)/lib.so: SASS sm_80" ]
  assert_no_sanitizer_report
}
