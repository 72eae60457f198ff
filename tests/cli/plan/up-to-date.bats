#!/usr/bin/env bats
# A rebuild with nothing changed links and packs nothing: the last build's stamp in the work
# folder (the key of the pack's commands and the Python package, the wheel's sha256) says its
# wheel is the one this build would write. Anything that changes the wheel, or the wheel itself
# changed or gone, packs again. The fake build is tests/cli/plan/fake-build.bash.
bats_require_minimum_version 1.5.0
load fake-build

# The build of fake-build.bash with --json, which must succeed and say up_to_date $1.
build_up_to_date() {
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --json --quiet --arch sm_90 \
      --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT"
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(jq -r .up_to_date <<<"$output")" = "$1" ] || { echo "up_to_date is not $1" >&2; return 1; }
}

@test "nothing changed: nothing linked or packed, the wheel kept as it is; text says so" {
  build_up_to_date false
  local wheel before
  wheel=$(compgen -G "$OUT/*.whl")
  before=$(stat -c %Y.%i "$wheel")
  sleep 1
  build_up_to_date true
  [ "$(stat -c %Y.%i "$wheel")" = "$before" ]
  [ "$(jq -r '.outputs[0].wheel' <<<"$output")" = "$wheel" ]
  jq -e '.compiled == 0 and .cached > 0' <<<"$output"
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" \
      --source "$SRC" --cache "$CACHE" --out "$OUT"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nothing changed since the last build: its wheel kept"* ]]
  [ -z "$stderr" ] # no step ran, so no progress line
}

@test "the wheel gone or changed, another output folder, the library gone: packed again, the same bytes" {
  build_up_to_date false
  local wheel clean
  wheel=$(compgen -G "$OUT/*.whl")
  clean="$BATS_TEST_TMPDIR/clean.whl"
  cp "$wheel" "$clean"
  rm "$wheel"
  build_up_to_date false && cmp "$wheel" "$clean"
  printf 'x' >> "$wheel"
  build_up_to_date false && cmp "$wheel" "$clean"
  OUT="$BATS_TEST_TMPDIR/out2"
  build_up_to_date false && cmp "$(compgen -G "$OUT/*.whl")" "$clean"
  build_up_to_date true
  rm "$SRC/build/msda/$HOST_CPU/libmsda.so"
  build_up_to_date false
}

@test "a change to the Python package packs again" {
  # the package as a copy, so that it can change
  rm "$SRC/wheels" && cp -r "$ROOT/wheels" "$SRC/wheels" && rm -rf "$SRC/wheels/dist"
  build_up_to_date false
  build_up_to_date true
  echo "# changed" >> "$SRC/wheels/msda/_shapes.py"
  build_up_to_date false
  python3 -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read("msda/_shapes.py").decode().splitlines()[-1])' \
    "$(compgen -G "$OUT/*.whl")" | grep -qx "# changed"
}
