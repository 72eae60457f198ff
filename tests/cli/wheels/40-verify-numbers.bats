#!/usr/bin/env bats
# Issue 45: verify's numeric judgement, on wheels whose library computes wrong numbers. Each
# wheel is built by `msda-doctor build` from a copy of kernels/ in which one line of the CPU
# path's forward (kernels/msda_cpu_impl.h) scales the f32 output: by 1 (the untouched control),
# by 1 + 3e-5 (three times the f32 tolerance of 1e-5) and by 1.5. Only the f32 instantiation
# changes (its value type is the only 4-byte one), so the f64 reference the CPU path is judged
# against stays exact. GPUs are hidden (MSDA_LIBCUDA): the judgement under test is the CPU's,
# whatever machine runs this.
#
# One nvcc compile (sm_120, CUDA 13.0 only) serves the three wheels, msda_cpu_impl.h being no
# part of the device code; it is build/msda-cache's (the cache of make run and the wheels
# suite, whose keys leave the folder out), so after the first run only the C is compiled.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
load ../host-cpu

FORWARD_STORE='out[g * D + d] = CPU_STORE(acc[d]);'

# A wheel of this CPU whose f32 CPU forward is multiplied by FACTOR, into $BATS_FILE_TMPDIR/NAME.
wheel_with_factor() {  # wheel_with_factor NAME FACTOR
  local impl="$SRC/kernels/msda_cpu_impl.h"
  cp "$ROOT/kernels/msda_cpu_impl.h" "$impl"
  if [ "$2" != 1 ]; then
    sed -i "s/$(sed 's/[][*.]/\\&/g' <<<"$FORWARD_STORE")/out[g * D + d] = CPU_STORE(acc[d] * (sizeof(CPU_T) == 4 ? (CPU_A)$2 : (CPU_A)1));/" "$impl"
    # the planted line is there once: a change to the kernels that moves it fails here, loudly
    [ "$(grep -c "(CPU_A)$2" "$impl")" -eq 1 ] || { echo "the forward's store of $FORWARD_STORE is gone from kernels/msda_cpu_impl.h" >&2; return 1; }
  fi
  "$MSDA_DOCTOR" build --quiet --arch sm_120 --platform "$HOST_CPU" --source "$SRC" --out "$BATS_FILE_TMPDIR/$1" \
      --cache "$ROOT/build/msda-cache" > "$BATS_FILE_TMPDIR/$1.log" 2>&1 ||
    { cat "$BATS_FILE_TMPDIR/$1.log" >&2; return 1; }
}

# A wheel of the untouched kernels whose library does not export msda_fatbin_key and
# msda_fatbin_count (as a library older than them), into $BATS_FILE_TMPDIR/nokeys: each kernels
# C file of the copy built with both names #defined to others. The C files are no part of the
# device code, so its compile comes from the cache too.
wheel_without_image_keys() {
  local f
  cp "$ROOT/kernels/msda_cpu_impl.h" "$SRC/kernels/msda_cpu_impl.h"
  for f in "$SRC"/kernels/*.c; do
    { printf '#define msda_fatbin_key msda_fatbin_key_unlisted\n#define msda_fatbin_count msda_fatbin_count_unlisted\n'
      cat "$ROOT/kernels/${f##*/}"; } > "$f"
  done
  "$MSDA_DOCTOR" build --quiet --arch sm_120 --platform "$HOST_CPU" --source "$SRC" --out "$BATS_FILE_TMPDIR/nokeys" \
      --cache "$ROOT/build/msda-cache" > "$BATS_FILE_TMPDIR/nokeys.log" 2>&1 ||
    { cat "$BATS_FILE_TMPDIR/nokeys.log" >&2; return 1; }
  for f in "$SRC"/kernels/*.c; do cp "$ROOT/kernels/${f##*/}" "$f"; done
}

setup_file() {
  grep -qF "$FORWARD_STORE" "$ROOT/kernels/msda_cpu_impl.h" ||
    { echo "kernels/msda_cpu_impl.h has no line '$FORWARD_STORE' to plant the error in" >&2; return 1; }
  export SRC="$BATS_FILE_TMPDIR/src"
  mkdir -p "$SRC" && cp -r "$ROOT/kernels" "$SRC/kernels" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
  wheel_with_factor exact 1
  wheel_with_factor little 1.00003
  wheel_with_factor lot 1.5
  wheel_without_image_keys
}

verify() {  # verify NAME [--json]
  run --separate-stderr env MSDA_LIBCUDA=/nonexistent "$MSDA_DOCTOR" verify "${@:2}" "$(wheel_for "$BATS_FILE_TMPDIR/$1" "$HOST_CPU")"
  if grep -qE 'AddressSanitizer|runtime error:' <<<"$stderr"; then echo "$stderr" >&2; return 1; fi
}

# dtype:passed:forward error:backward error of the CPU, the errors as %.1e.
cpu_dtypes() {
  jq -r '.devices[0].dtypes | map("\(.dtype):\(.passed):\(.forward_error):\(.backward_error)") | join(" ")' <<<"$output" |
    awk '{ for (i = 1; i <= NF; i++) { split($i, f, ":"); printf "%s%s:%s:%.1e:%.1e", (i > 1 ? " " : ""), f[1], f[2], f[3], f[4] } }'
}

@test "the untouched library passes, f32 within its tolerance" {
  verify exact --json
  [ "$status" -eq 0 ] || { echo "exit $status: $(cpu_dtypes) $stderr" >&2; return 1; }
  [ "$(jq -r '.passed' <<<"$output")" = true ]
  [ "$(jq -r '.devices | length' <<<"$output")" -eq 1 ]
  jq -e '.devices[0].dtypes[] | select(.dtype == "f32") | .tolerance == 1e-5 and .forward_error < 1e-6' <<<"$output" >/dev/null
}

@test "an f32 forward wrong by 3e-5 fails verify, naming f32 and its error; the other types pass" {
  verify little --json
  [ "$status" -eq 1 ] || { echo "exit $status: $(cpu_dtypes) $stderr" >&2; return 1; }
  [ "$(jq -r '.passed' <<<"$output")" = false ]
  got=$(cpu_dtypes)
  [[ "$got" == "f32:false:3.0e-05:"* ]] || { echo "CPU: $got" >&2; return 1; }
  # the backward is untouched, and so are the other types
  jq -e '.devices[0].dtypes[] | select(.dtype == "f32") | .backward_error < 1e-6' <<<"$output" >/dev/null
  [ "$(jq -r '[.devices[0].dtypes[] | select(.dtype != "f32") | .passed] | all' <<<"$output")" = true ]
  verify little
  [ "$status" -eq 1 ]
  [[ "$output" == *"[FAIL] CPU: CPU path"* ]]
  grep -qE '^ +f32 +forward 3\.0[0-9]e-05 +backward [0-9.e+-]+ +\(tolerance 1e-05\) +FAIL$' <<<"$output" ||
    { echo "$output" >&2; return 1; }
  [ "$(grep -c 'FAIL$' <<<"$output")" -eq 1 ]
  [[ "$output" == *"verify: FAILED"* ]]
  [[ "$output" == *"[--] GPUs not checked: "* ]]
}

@test "an f32 forward wrong by half fails verify, naming f32 and its error" {
  verify lot --json
  [ "$status" -eq 1 ]
  got=$(cpu_dtypes)
  [[ "$got" == "f32:false:5.0e-01:"* ]] || { echo "CPU: $got" >&2; return 1; }
  verify lot
  grep -qE '^ +f32 +forward 5\.00e-01 +backward [0-9.e+-]+ +\(tolerance 1e-05\) +FAIL$' <<<"$output" ||
    { echo "$output" >&2; return 1; }
}

# verify's GPU path without a GPU: the fake driver built with the entry points verify runs the
# op through (build/fakes/compute/libcuda.so.1) on one fake H100. libmsda then finds that driver
# too old for its kernels, which verify reports for each GPU entry; what is under test is which
# entries there are: the GPU as the library chooses, then once per kind of image it embeds.
verify_on_fake_gpu() {  # verify_on_fake_gpu NAME
  [ -n "${MSDA_FAKE_COMPUTE_LIBCUDA:-}" ] || { echo "MSDA_FAKE_COMPUTE_LIBCUDA is not set (make check-wheels sets it)" >&2; return 1; }
  run --separate-stderr env MSDA_LIBCUDA="$MSDA_FAKE_COMPUTE_LIBCUDA" MSDA_FAKE_GPUS="$ROOT/tests/fixtures/gpus/h100.json" \
    "$MSDA_DOCTOR" verify --json "$(wheel_for "$BATS_FILE_TMPDIR/$1" "$HOST_CPU")"
  if grep -qE 'AddressSanitizer|runtime error:' <<<"$stderr"; then echo "$stderr" >&2; return 1; fi
  [ "$status" -eq 1 ] || { echo "exit $status: $output $stderr" >&2; return 1; }
  [ "$(jq -r '.passed' <<<"$output")" = false ]
  [ "$(jq -r '.devices[0].gpu' <<<"$output")" = false ]
  [ "$(jq -r '[.devices[1:][] | .gpu and .sm == 90] | all' <<<"$output")" = true ]
}

@test "on a GPU, verify checks it as the library chooses and once per kind of image it embeds" {
  verify_on_fake_gpu exact
  # the wheel holds one kind, sm_120's SASS of CUDA 13.0 (--arch sm_120): the GPU as the library
  # chooses, then under MSDA_IMAGE=sass:13.0
  [ "$(jq -r '[.devices[1:][] | .device] | join(" | ")' <<<"$output")" = \
    "GPU 0: NVIDIA H100 80GB HBM3 (sm_90) | GPU 0: NVIDIA H100 80GB HBM3 (sm_90), MSDA_IMAGE=sass:13.0" ] ||
    { echo "$output" >&2; return 1; }
  [[ "$(jq -r '.devices[1].error' <<<"$output")" == *"the driver is too old"* ]]
}

@test "on a GPU, a library that cannot list its kinds of image is checked once, as it chooses" {
  # verify.c's image_kinds: a library without msda_fatbin_key and msda_fatbin_count lists none
  # (calling the missing msda_fatbin_key would crash verify)
  verify_on_fake_gpu nokeys
  [ "$(jq -r '.devices | length' <<<"$output")" -eq 2 ] || { echo "$output" >&2; return 1; }
  [ "$(jq -r '.devices[1].device' <<<"$output")" = "GPU 0: NVIDIA H100 80GB HBM3 (sm_90)" ]
}
