# Shared set-up for the command-line tests: $MSDA_DOCTOR is the sanitizer build, $MSDA_FIXTURES
# the nvcc-built fixtures (both set by `make check`).
bats_require_minimum_version 1.5.0

doctor() { "$MSDA_DOCTOR" "$@"; }
fix() { printf '%s/%s' "$MSDA_FIXTURES" "$1"; }

# The sanitizers write their reports to stderr and exit non-zero: a clean run's stderr has no
# report in it.
assert_no_sanitizer_report() {
  if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' <<<"$stderr"; then
    echo "sanitizer report: $stderr" >&2
    return 1
  fi
}

# One line on stderr, in the tool's error format.
assert_one_line_error() {
  assert_no_sanitizer_report
  [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || { echo "stderr: $stderr" >&2; return 1; }
  [[ "$stderr" == "msda-doctor: error: "* ]] || { echo "stderr: $stderr" >&2; return 1; }
}

have_cuda118() { [ -e "$(fix f118-multi.so)" ]; }
