#!/usr/bin/env bats
# Issue 45: the toolkit choice with two minors of one major installed (fake CUDA 12.6 and 12.9,
# as plan.bats makes them): the newer minor builds every architecture both list, whichever the
# machine names first; a CUDA 13 toolkit beside them takes the newest SASS and the newer 12.x the
# SASS for older drivers. Written to fail on a planner that compares majors only or keeps the
# order the toolkits were found in (src/lib/machine/toolkit.c, src/lib/build/plan.c).
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
load ../host-cpu
load fake-nvcc

# Fake toolkits 12.6, 12.9 and 13.0, each in its own folder; a default g++ 12 that each accepts.
setup() {
  FAKE="$BATS_TEST_TMPDIR/fake"
  mkdir -p "$FAKE/bin"
  local v
  for v in 12.6 12.9 13.0; do
    fake_nvcc "$FAKE/cuda-$v" "$v"
  done
  printf '#!/bin/sh\necho 12.1.0\n' > "$FAKE/bin/g++"
  printf '#!/bin/sh\necho "cc (fake) 12.2.0"\n' > "$FAKE/bin/cc"
  chmod +x "$FAKE/bin/g++" "$FAKE/bin/cc"
  SRC="$BATS_TEST_TMPDIR/src"
  mkdir -p "$SRC" && ln -sfn "$ROOT/kernels" "$SRC/kernels" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
}

# plan VERSIONS ARCH: a dry run with the toolkits of VERSIONS found in that order.
plan() {
  local paths="" v
  for v in $1; do paths="$paths${paths:+:}$FAKE/cuda-$v"; done
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$paths" "$MSDA_DOCTOR" build --dry-run --json \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch "$2"
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  if grep -qE 'AddressSanitizer|runtime error:' <<<"$stderr"; then echo "$stderr" >&2; return 1; fi
}

targets() { jq -r '[.plan.targets[] | "\(.arch)/\(.toolkit)"] | join(" ")' <<<"$output"; }
toolkits() { jq -r '[.plan.toolkits[].version] | join(" ")' <<<"$output"; }

@test "12.6 and 12.9: the newer minor builds the architectures both list, whichever is found first" {
  for order in "12.6 12.9" "12.9 12.6"; do
    plan "$order" sm_86,sm_90+PTX
    [ "$(toolkits)" = "12.9 12.6" ] || { echo "found $order: toolkits $(toolkits)" >&2; return 1; }
    [ "$(targets)" = "sm_86/12.9 sm_90/12.9 compute_90/12.9" ] || { echo "found $order: $(targets)" >&2; return 1; }
    # the nvcc run is 12.9's: three images, from two PTX steps (sm_90 and its PTX share one),
    # each step once per part of the device code
    jq -e --arg nvcc "$FAKE/cuda-12.9/bin/nvcc" '[.steps[] | select(.what | test("^(sm|compute)_"))] | length == 10 and all(.command[0] == $nvcc)' \
      <<<"$output" >/dev/null || { echo "found $order: $(jq -c '[.steps[].command[0]]' <<<"$output")" >&2; return 1; }
  done
}

@test "12.6 and 12.9, --arch all: every SASS and the recipe's PTX from 12.9; 12.6 only for the old drivers' lowered PTX" {
  plan "12.6 12.9" all
  [ "$(jq -r '[.plan.targets[] | select(.lowered | not) | .toolkit] | unique | join(" ")' <<<"$output")" = 12.9 ] ||
    { echo "$(targets)" >&2; return 1; }
  # 12.9's own architectures, sm_50 to sm_121; PTX of its newest and of its oldest
  [ "$(jq -r '[.plan.targets[] | select(.kind == "sass") | .arch] | join(" ")' <<<"$output")" = \
    "sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_100 sm_101 sm_103 sm_120 sm_121" ]
  [ "$(jq -r '[.plan.targets[] | select(.kind == "ptx" and (.lowered | not)) | .arch] | join(" ")' <<<"$output")" = \
    "compute_50 compute_121" ]
  # the old drivers' PTX comes from the toolkit of the oldest PTX ISA, lowered (kernels/libmsda.json)
  [ "$(jq -r '[.plan.targets[] | select(.lowered) | "\(.arch)/\(.toolkit)"] | join(" ")' <<<"$output")" = \
    "compute_53/12.6 compute_62/12.6 compute_72/12.6" ]
}

@test "13.0, 12.6 and 12.9: 13.0's SASS, and the older drivers' SASS from 12.9, not 12.6" {
  plan "12.6 13.0 12.9" sm_86,sm_90
  [ "$(toolkits)" = "13.0 12.9 12.6" ]
  [ "$(targets)" = "sm_86/13.0 sm_86/12.9 sm_90/13.0 sm_90/12.9" ] || { echo "$(targets)" >&2; return 1; }
  # an architecture 13.0 lacks: 12.9 alone
  plan "12.6 13.0 12.9" sm_61
  [ "$(targets)" = "sm_61/12.9" ] || { echo "$(targets)" >&2; return 1; }
}
