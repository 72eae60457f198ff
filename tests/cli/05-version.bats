#!/usr/bin/env bats
# The version has one source, the VERSION file: --version, the man page make installs, and the
# wheel's Python package (tests/cli/wheels) all say what it says.
load helpers

ROOT="$BATS_TEST_DIRNAME/../.."

@test "--version prints the VERSION file" {
  run --separate-stderr doctor --version
  [ "$status" -eq 0 ]
  [ "$output" = "msda-doctor $(cat "$ROOT/VERSION")" ]
}

@test "the installed man page carries the VERSION file's version" {
  [ -n "$MSDA_MAN_PAGE" ] && [ -f "$MSDA_MAN_PAGE" ]
  head -n 1 "$MSDA_MAN_PAGE" | grep -qF "\"msda-doctor $(cat "$ROOT/VERSION")\""
  ! grep -q '@VERSION@' "$MSDA_MAN_PAGE"
}
