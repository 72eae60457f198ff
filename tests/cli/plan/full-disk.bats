#!/usr/bin/env bats
# build on a full disk (issue 13): the cache's disk full while nvcc writes a fatbin into it, the
# output folder's disk full before or while the wheel is written, and the same on a real small
# tmpfs where mount is allowed. Each ends with one line naming what failed and "No space left on
# device", exit status 4 (a compilation or packaging step failed), no file in the output folder,
# no cache entry or temporary file, and a next build that makes the same wheel as a clean one.
# The full disk is tests/faults/inject.c (MSDA_INJECT_WRITE_LIMIT and MSDA_INJECT_WRITE_DIR)
# preloaded into the release build, which the sanitizer build's own malloc and write would refuse.
bats_require_minimum_version 1.5.0

load fake-build

# Called in the test itself: a skip inside `run` only ends run's subshell, with status 0.
needs_injector() {
  [ -n "${MSDA_INJECT:-}" ] && [ -n "${MSDA_DOCTOR_RELEASE:-}" ] ||
    skip "needs MSDA_INJECT and MSDA_DOCTOR_RELEASE (make check-plan sets them)"
}

# The release msda-doctor with the injector; children (the fake nvcc) inherit the full disk.
build_on_full_disk() {
  env MSDA_TOOLKIT_PATHS="$FAKE" LD_PRELOAD="$MSDA_INJECT" "$@" "$MSDA_DOCTOR_RELEASE" build --quiet --arch sm_90 \
      --platform "$HOST_CPU" --source "$SRC" --cache "$CACHE" --out "$OUT"
}

one_line() {
  [ "$(printf '%s\n' "$1" | grep -c .)" -eq 1 ] || { printf 'not one line:\n%s\n' "$1" >&2; return 1; }
}

# Nothing in the output folder, no temporary file or probe anywhere, no fatbin in the cache.
nothing_left() {
  [ -z "$(ls -A "$OUT" 2>/dev/null)" ] || { ls -A "$OUT" >&2; return 1; }
  [ -z "$(find "$CACHE" "$OUT" \( -name '*.tmp*' -o -name '.space-probe*' -o -name '.*.whl.*' \) 2>/dev/null)" ]
}

# The next build, with room, succeeds and makes the wheel a clean build in fresh folders makes.
next_build_is_clean() {
  run --separate-stderr build
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  local wheel=("$OUT"/*.whl)
  CACHE="$BATS_TEST_TMPDIR/clean-cache" OUT="$BATS_TEST_TMPDIR/clean-out" SRC="$BATS_TEST_TMPDIR/clean-src"
  mkdir -p "$SRC" && ln -sfn "$ROOT/kernels" "$SRC/kernels" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
  run --separate-stderr build
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  cmp "${wheel[0]}" "$OUT"/*.whl
}

@test "the cache's disk full while nvcc writes a fatbin: exit 4 naming the step, the entry and ENOSPC" {
  needs_injector
  mkdir -p "$CACHE"
  run --separate-stderr build_on_full_disk MSDA_INJECT_WRITE_LIMIT=0 MSDA_INJECT_WRITE_DIR="$CACHE"
  [ "$status" -eq 4 ] || { echo "status $status: $stderr" >&2; return 1; }
  [[ "$stderr" == "msda-doctor: error: sm_90 (CUDA 13.0, part "[01]") failed: no room for '$CACHE/"*".fatbin': No space left on device (log: "* ]]
  one_line "$stderr"
  cache_has_no_fatbin
  nothing_left
  next_build_is_clean
}

@test "the output disk full before and part way through the wheel: exit 4 naming the wheel and ENOSPC" {
  needs_injector
  # 0: the first byte fails; 3000: the wheel is cut short inside a member (it is larger, below).
  for limit in 0 3000; do
    mkdir -p "$OUT"
    run --separate-stderr build_on_full_disk MSDA_INJECT_WRITE_LIMIT=$limit MSDA_INJECT_WRITE_DIR="$OUT"
    [ "$status" -eq 4 ] || { echo "limit $limit: status $status: $stderr" >&2; return 1; }
    [[ "$stderr" == "msda-doctor: error: cannot write '$OUT/msda-"*".whl': No space left on device" ]] ||
      { echo "limit $limit: $stderr" >&2; return 1; }
    one_line "$stderr"
    nothing_left
  done
  next_build_is_clean
  [ "$(stat -c %s "$OUT"/*.whl)" -gt 3000 ]
}

@test "a real full tmpfs as the output folder and as the cache (root where mount is allowed)" {
  [ "$(id -u)" -eq 0 ] || skip "mounting a tmpfs needs root (CI runs unprivileged)"
  mkdir -p "$BATS_TEST_TMPDIR/small"
  mount -t tmpfs -o size=8k tmpfs "$BATS_TEST_TMPDIR/small" 2>/dev/null ||
    skip "mount -t tmpfs is not permitted here (an unprivileged container)"
  # a file that leaves one page of the two free: the wheel does not fit, the fake fatbin does
  head -c 4096 /dev/zero > "$BATS_TEST_TMPDIR/small/filler"
  OUT="$BATS_TEST_TMPDIR/small/out"
  run --separate-stderr build
  [ "$status" -eq 4 ] || { echo "status $status: $stderr" >&2; umount "$BATS_TEST_TMPDIR/small"; return 1; }
  [[ "$stderr" == "msda-doctor: error: "*"'$OUT/"*".whl"*"': No space left on device" ]] ||
    { echo "$stderr" >&2; umount "$BATS_TEST_TMPDIR/small"; return 1; }
  one_line "$stderr"
  nothing_left || { umount "$BATS_TEST_TMPDIR/small"; return 1; }
  # the cache there: the fake fatbin fits, the host objects do not
  rm -rf "$OUT"
  OUT="$BATS_TEST_TMPDIR/out" CACHE="$BATS_TEST_TMPDIR/small/cache"
  run --separate-stderr build
  local st=$status err=$stderr
  [ -z "$(find "$CACHE" -name '*.tmp*' -o -name '.space-probe*')" ] || { umount "$BATS_TEST_TMPDIR/small"; return 1; }
  umount "$BATS_TEST_TMPDIR/small"
  [ "$st" -eq 4 ] || { echo "status $st: $err" >&2; return 1; }
  [[ "$err" == *"failed: no room for '$CACHE/"*"': No space left on device (log: "* ]] || { echo "$err" >&2; return 1; }
  one_line "$err"
  [ -z "$(ls -A "$OUT" 2>/dev/null)" ]
}
