#!/usr/bin/env bats
# Which files of wheels/ the wheel carries: the Python packages (folders with __init__.py) with
# everything in them but caches and hidden files, and the top level's own modules; not the
# tests, not the other top-level files, not compiled bytecode. One nvcc compile (sm_90), cached
# for the second test.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"

@test "the wheel carries the packages and top-level modules of wheels/, and nothing else there" {
  SRC="$BATS_TEST_TMPDIR/src" OUT="$BATS_TEST_TMPDIR/out"
  mkdir -p "$SRC/kernels" && cp -r "$ROOT"/kernels/. "$SRC/kernels/"
  cp -r "$ROOT/wheels" "$SRC/wheels"
  rm -rf "$SRC/wheels/dist" "$SRC/wheels/build"
  w=$SRC/wheels
  printf 'x = 1\n' > "$w/z.py"                    # a top-level module, a one-letter name
  printf 'notes\n' > "$w/NOTES.txt"               # top level, not a module
  printf 'x\n' > "$w/.hidden.py"                  # hidden
  mkdir -p "$w/msda/__pycache__" "$w/msda/data" "$w/loose" "$w/tests"
  printf 'x\n' > "$w/msda/__pycache__/a.cpython-311.pyc"
  printf 'x\n' > "$w/msda/stale.pyc"
  printf 'x\n' > "$w/msda/.swp"
  printf 'data\n' > "$w/msda/data/table.txt"      # inside a package: carried, whatever it is
  printf 'x = 1\n' > "$w/loose/mod.py"            # a top-level folder without __init__.py
  run --separate-stderr "$MSDA_DOCTOR" build --arch sm_90 --platform x86_64 --source "$SRC" --out "$OUT" \
      --cache "$BATS_FILE_TMPDIR/cache"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  members=$(python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$OUT"/*.whl)
  for want in z.py msda/__init__.py msda/data/table.txt msda/libmsda.so; do
    grep -qx "$want" <<<"$members" || { echo "missing $want in: $members" >&2; return 1; }
  done
  for unwanted in NOTES.txt .hidden.py msda/stale.pyc msda/.swp loose/mod.py; do
    ! grep -qx "$unwanted" <<<"$members" || { echo "$unwanted carried" >&2; return 1; }
  done
  ! grep -q '__pycache__\|^tests/' <<<"$members" || { echo "cache or tests carried: $members" >&2; return 1; }
}

@test "a wheels/ of one top-level module is a package too; one with none is refused" {
  SRC="$BATS_TEST_TMPDIR/src" OUT="$BATS_TEST_TMPDIR/out"
  mkdir -p "$SRC/kernels" "$SRC/wheels" && cp -r "$ROOT"/kernels/. "$SRC/kernels/"
  printf 'x = 1\n' > "$SRC/wheels/only.py"
  run --separate-stderr "$MSDA_DOCTOR" build --arch sm_90 --platform x86_64 --source "$SRC" --out "$OUT" \
      --cache "$BATS_FILE_TMPDIR/cache"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  python3 -c 'import sys, zipfile; n = zipfile.ZipFile(sys.argv[1]).namelist(); sys.exit("only.py" not in n)' "$OUT"/*.whl
  rm "$SRC/wheels/only.py" && rm -rf "$OUT"
  run --separate-stderr "$MSDA_DOCTOR" build --arch sm_90 --platform x86_64 --source "$SRC" --out "$OUT" \
      --cache "$BATS_FILE_TMPDIR/cache"
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"no Python package (a folder with __init__.py) in '$SRC/wheels'"* ]]
}
