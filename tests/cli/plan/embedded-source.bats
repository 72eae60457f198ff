#!/usr/bin/env bats
# build without --source: the kernels, libmsda.json and the Python package built into
# msda-doctor (src/lib/build/embedded_source.h) are unpacked once into the cache and built from
# there, from any folder. A fake nvcc (fake-build.bash), the real host compiler and link.
bats_require_minimum_version 1.5.0
load fake-build

# A build from a folder that is not the checkout, without --source.
build_here() {
  mkdir -p "$BATS_TEST_TMPDIR/elsewhere"
  cd "$BATS_TEST_TMPDIR/elsewhere"
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" \
      --cache "$CACHE" --out "$OUT" "$@"
  if grep -qE 'AddressSanitizer|runtime error:' <<<"$stderr"; then echo "$stderr" >&2; return 1; fi
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
}

@test "embedded sources: a build from another folder uses the sources built in, unpacked in the cache" {
  build_here
  [[ "${lines[0]}" == "Sources: built into msda-doctor "*", unpacked in $CACHE/source-"* ]]
  local dir=${lines[0]##*unpacked in }
  [ -f "$dir/.complete" ]
  # Every file the build reads is there, byte for byte the checkout's.
  local n=0 f
  while IFS= read -r f; do
    cmp "$dir/$f" "$ROOT/$f" || return 1
    n=$((n + 1))
  done < <(cd "$dir" && find kernels wheels -type f -not -path '*/build/*' | sort)
  [ "$n" -ge 20 ]
  for f in kernels/libmsda.json kernels/msda_kernels.cu kernels/gen-fatbin-asm.sh kernels/ptx-for-old-drivers.sh \
           wheels/msda/__init__.py wheels/MultiScaleDeformableAttention/__init__.py; do
    [ -f "$dir/$f" ] || { echo "missing $f" >&2; return 1; }
  done
  # The wheel is written, with the Python package of the checkout.
  local wheel
  wheel=$(compgen -G "$OUT/msda-*.whl")
  [ "$(python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read("msda/__init__.py"))' \
       "$wheel" | sha256sum)" = "$(sha256sum < "$ROOT/wheels/msda/__init__.py")" ]
  # Nothing is written into the folder the build ran in.
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/elsewhere")" ]
}

@test "embedded sources: --json names them; a second build reuses the folder and leaves nothing temporary" {
  build_here --json
  [ "$(jq -r .source.embedded <<<"$output")" = true ]
  local dir
  dir=$(jq -r .source.dir <<<"$output")
  [[ "$dir" == "$CACHE/source-"* ]]
  build_here --json
  [ "$(jq -r .source.dir <<<"$output")" = "$dir" ]
  [ "$(find "$CACHE" -maxdepth 1 -name 'source-*' | wc -l)" -eq 1 ]
  [ -z "$(find "$CACHE" -maxdepth 1 -name '.source-*')" ]
}

@test "embedded sources: a folder left half-written (no mark) is replaced whole" {
  build_here --json --dry-run
  local dir
  dir=$(jq -r .source.dir <<<"$output")
  rm "$dir/.complete" "$dir/kernels/msda.h"
  echo garbage > "$dir/kernels/libmsda.json"
  build_here
  cmp "$dir/kernels/msda.h" "$ROOT/kernels/msda.h"
  cmp "$dir/kernels/libmsda.json" "$ROOT/kernels/libmsda.json"
  [ -f "$dir/.complete" ]
  [ -z "$(find "$CACHE" -maxdepth 1 -name '.source-*')" ]
}

@test "embedded sources: a cache that cannot be created is a one-line error, exit 3" {
  touch "$BATS_TEST_TMPDIR/a-file"
  cd "$BATS_TEST_TMPDIR"
  run --separate-stderr env MSDA_TOOLKIT_PATHS="$FAKE" "$MSDA_DOCTOR" build --arch sm_90 --dry-run \
      --platform "$HOST_CPU" --cache "$BATS_TEST_TMPDIR/a-file/cache"
  [ "$status" -eq 3 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(grep -c . <<<"$stderr")" -eq 1 ]
  [[ "$stderr" == "msda-doctor: error: cannot create '$BATS_TEST_TMPDIR/a-file/cache'"* ]]
}

@test "embedded sources: --source DIR builds that folder instead" {
  build_here --json --dry-run --source "$SRC"
  [ "$(jq -r .source.embedded <<<"$output")" = false ]
  [ "$(jq -r .source.dir <<<"$output")" = "$SRC" ]
  [ -z "$(find "$CACHE" -maxdepth 1 -name 'source-*')" ]
}
