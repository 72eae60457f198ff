#!/usr/bin/env bats
# tests/ci/check-wheels, the last job of the CI workflow, on the wheels build --arch all makes
# here with the toolkits found here: it passes on them, and fails on what it is there to catch.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
CHECK="$ROOT/tests/ci/check-wheels"

setup_file() {
  export DIST="$BATS_FILE_TMPDIR/dist" CACHE="$ROOT/build/msda-cache"
  # On failure, the error (the log's end) rather than the plan's 30 lines before it: CI shows
  # only part of a long output.
  ( cd "$ROOT" && "$MSDA_DOCTOR" build --arch all --platform x86_64,aarch64 --out "$DIST" --cache "$CACHE" \
      > "$BATS_FILE_TMPDIR/build.log" 2>&1 ) || { tail -n 3 "$BATS_FILE_TMPDIR/build.log" >&2; return 1; }
  TOOLKITS=$( ( cd "$ROOT" && "$MSDA_DOCTOR" build --dry-run --json --arch all --platform x86_64 --cache "$CACHE" ) |
              jq -r '.plan.toolkits[] | "--toolkit " + .version' | tr '\n' ' ')
  export TOOLKITS
}

# check-wheels on DIR with the toolkits found here, then ARGS.
check() {
  local dir=$1; shift
  # shellcheck disable=SC2086
  run --separate-stderr "$CHECK" "$MSDA_DOCTOR" "$dir" $TOOLKITS "$@"
}

# A copy of the wheels in a folder of its own.
copy() {
  mkdir -p "$BATS_TEST_TMPDIR/dist" && cp "$DIST"/*.whl "$BATS_TEST_TMPDIR/dist/"
}

@test "check-wheels passes on both wheels of build --arch all" {
  check "$DIST"
  [ "$status" -eq 0 ] || { echo "$output $stderr" >&2; return 1; }
  [[ "$output" == *" 0 failed" ]]
  [[ "$output" == *"verify refuses "*" on $(uname -m)"* ]]
}

@test "check-wheels fails when one CPU's wheel is missing" {
  copy && rm "$BATS_TEST_TMPDIR"/dist/*_aarch64.whl
  check "$BATS_TEST_TMPDIR/dist"
  [ "$status" -eq 1 ]
  [[ "$output" == *"FAIL  a wheel for aarch64"* ]]
}

@test "check-wheels fails when the SASS range is not the one the toolkits give" {
  check "$DIST" --toolkit 10.2
  [ "$status" -eq 1 ]
  [[ "$output" == *"FAIL  "*"SASS from sm_30 to sm_121: SASS sm_"* ]]
}

@test "check-wheels fails on a wheel whose WHEEL tags are not its name's" {
  copy
  w=$(ls "$BATS_TEST_TMPDIR"/dist/*_x86_64.whl)
  python3 - "$w" <<'PY'
import os, sys, zipfile
path = sys.argv[1]
src = zipfile.ZipFile(path)
items = [(i, src.read(i)) for i in src.infolist()]
src.close()
with zipfile.ZipFile(path + ".new", "w", zipfile.ZIP_DEFLATED) as dst:
    for info, data in items:
        if info.filename.endswith(".dist-info/WHEEL"):
            data = data.replace(b"x86_64", b"aarch64")
        dst.writestr(info, data)
os.replace(path + ".new", path)
PY
  check "$BATS_TEST_TMPDIR/dist"
  [ "$status" -eq 1 ]
  [[ "$output" == *"FAIL  $(basename "$w"): WHEEL's Tag lines are the name's tags"* ]]
}

@test "check-wheels refuses a CUDA release recipes/toolkits.json does not know" {
  run --separate-stderr "$CHECK" "$MSDA_DOCTOR" "$DIST" --toolkit 9.9
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"CUDA 9.9 is not in recipes/toolkits.json"* ]]
}
