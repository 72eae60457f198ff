#!/usr/bin/env bats
# build refuses to write a wheel whose manylinux tag would lie: a library that needs a glibc
# symbol newer than the 2.17 floor, or that links a library manylinux does not allow. The
# sources are a copy of kernels/ with one more C file; one nvcc compile serves every test.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
load ../host-cpu

setup_file() {
  export SRC="$BATS_FILE_TMPDIR/src" CACHE="$BATS_FILE_TMPDIR/cache"
  mkdir -p "$SRC/kernels" && cp -r "$ROOT"/kernels/. "$SRC/kernels/" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
}

# Builds sm_90 for this CPU from $SRC with kernels/zz_extra.c holding $1; jq program $2 edits the recipe.
build_with() {
  printf '%s\n' "$1" > "$SRC/kernels/zz_extra.c"
  jq "${2:-.}" "$ROOT/kernels/libmsda.json" > "$SRC/kernels/libmsda.json"
  OUT="$BATS_TEST_TMPDIR/out"
  run --separate-stderr "$MSDA_DOCTOR" build --arch sm_90 --platform "$HOST_CPU" --source "$SRC" --out "$OUT" \
      --cache "$CACHE"
}

@test "a library that needs a glibc symbol above the floor is refused, naming it, and no wheel is written" {
  build_with '#include <pthread.h>
#include <time.h>
int msda_zz_wait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t);
int msda_zz_wait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) {
    return pthread_cond_clockwait(c, m, CLOCK_MONOTONIC, t);
}'
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"needs GLIBC_2."*"pthread_cond_clockwait@GLIBC_2."*"a manylinux_2_17 wheel would lie"* ]]
  [ -z "$(ls "$OUT" 2>/dev/null)" ]
}

@test "a library that links a library manylinux does not allow is refused, and no wheel is written" {
  build_with 'unsigned long OpenSSL_version_num(void);
unsigned long msda_zz_version(void);
unsigned long msda_zz_version(void) { return OpenSSL_version_num(); }' '.host.libs += ["-lcrypto"]'
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"links libcrypto.so"*"which manylinux_2_17 does not allow"* ]]
  [ -z "$(ls "$OUT" 2>/dev/null)" ]
}

@test "the same sources without the extra file build a wheel (the refusals are the extra file's)" {
  build_with 'int msda_zz_nothing(void);
int msda_zz_nothing(void) { return 0; }'
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  ls "$(wheel_for "$OUT" "$HOST_CPU")"
}
