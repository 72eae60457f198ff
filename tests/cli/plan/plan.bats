#!/usr/bin/env bats
# The build planner against fake toolkits and host compilers: each case in
# tests/cli/plan/cases/ states the arguments and the exact plan (see its README).
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
load ../host-cpu
CASES="$BATS_TEST_DIRNAME/cases"
load fake-nvcc

make_fakes() {
  local toolkits=$1 gccs=$2 v dirs=""
  FAKE="$BATS_TEST_TMPDIR/fake"
  mkdir -p "$FAKE/bin"
  for v in $toolkits; do
    fake_nvcc "$FAKE/cuda-$v" "$v"
    dirs="$dirs${dirs:+:}$FAKE/cuda-$v"
  done
  TOOLKIT_PATHS=${dirs:-/nonexistent}
  local first=1 g
  for g in $gccs; do
    if [ $first = 1 ]; then name=g++; first=0; else name=g++-$g; fi
    printf '#!/bin/sh\necho %s.1.0\n' "$g" > "$FAKE/bin/$name"
    chmod +x "$FAKE/bin/$name"
  done
  printf '#!/bin/sh\necho "cc (fake) 12.2.0"\n' > "$FAKE/bin/cc"
  chmod +x "$FAKE/bin/cc"
  # A fresh project folder (its build/ starts empty) whose sources are the repository's.
  SRC="$BATS_TEST_TMPDIR/src"
  mkdir -p "$SRC" && ln -sfn "$ROOT/kernels" "$SRC/kernels" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
}

field() { sed -n "s/^$1: *//p" "$2" | head -n 1; }

run_case() {
  local file="$CASES/$1.case"
  [ -f "$file" ] || { echo "no case $file" >&2; return 1; }
  make_fakes "$(field toolkits "$file")" "$(field gcc "$file")"
  local gpus args want_exit want_error
  gpus=$(field gpus "$file"); args=$(field args "$file")
  want_exit=$(field exit "$file"); want_error=$(field error "$file")
  local env=(PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS")
  [ -n "$gpus" ] && env+=(MSDA_LIBCUDA="$MSDA_FAKE_LIBCUDA" MSDA_FAKE_GPUS="$ROOT/tests/fixtures/gpus/$gpus.json")
  # shellcheck disable=SC2086
  run --separate-stderr env "${env[@]}" "$MSDA_DOCTOR" build --dry-run --json --platform "$HOST_CPU" \
      --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" $args
  [ "$status" -eq "$want_exit" ] || { echo "exit $status, want $want_exit; stderr: $stderr" >&2; return 1; }
  if grep -qE 'AddressSanitizer|runtime error:' <<<"$stderr"; then echo "$stderr" >&2; return 1; fi
  if [ -n "$want_error" ]; then
    [[ "$stderr" == *"$want_error"* ]] || { echo "stderr '$stderr' lacks '$want_error'" >&2; return 1; }
    # one line; a usage error (2) adds the "Try ... --help" hint
    [ "$(grep -c . <<<"$stderr")" -eq $((want_exit == 2 ? 2 : 1)) ] || { echo "lines: $stderr" >&2; return 1; }
  fi
  [ "$want_exit" -eq 0 ] || return 0
  local got want
  got=$(jq -r '.plan.targets[] | "\(.arch) \(.toolkit) \(.ccbin // "-" | split("/") | last) \(.max_threads) \(.f16_atomic) \(.bf16_atomic)"' <<<"$output")
  want=$(sed -n '/^expect:/,$p' "$file" | sed '1d' | grep -v '^note:')
  if [ "$got" != "$want" ]; then diff <(echo "$want") <(echo "$got") >&2; return 1; fi
  local note
  while IFS= read -r note; do
    jq -e --arg n "$note" 'any(.plan.notes[]; contains($n))' <<<"$output" >/dev/null ||
      { echo "no note '$note'" >&2; return 1; }
  done < <(sed -n 's/^note: *//p' "$file")
  # A dry run plans every step and runs none: one image step per target and part of the device
  # code (nvcc -fatbin, or the kernels' script for the old drivers' PTX), each made from the PTX
  # of a PTX step listed before it, and no more PTX steps than images.
  check_device_steps
  [ "$(jq '.compiled' <<<"$output")" -eq 0 ]
}

# The device steps of build --json's OUTPUT against its plan (see run_case).
check_device_steps() {
  local images ptx parts
  parts=$(jq '.device.parts' "$SRC/kernels/libmsda.json")
  images=$(jq '[.steps[] | select(((.command[0] | endswith("/nvcc")) and (.command | index("-fatbin"))) or ((.command[1] // "") | endswith("/ptx-for-old-drivers.sh")))] | length' <<<"$output")
  ptx=$(jq '[.steps[] | select((.command[0] | endswith("/nvcc")) and (.command | index("-ptx")))] | length' <<<"$output")
  [ "$images" -eq "$(jq --argjson p "$parts" '.plan.targets | length * $p' <<<"$output")" ] || { echo "$images image steps" >&2; return 1; }
  [ "$(jq '[.steps[] | select((.command[1] // "") | endswith("/ptx-for-old-drivers.sh"))] | length' <<<"$output")" -eq "$(jq --argjson p "$parts" '[.plan.targets[] | select(.lowered)] | length * $p' <<<"$output")" ]
  # Each PTX step compiles one part: MSDA_PART=0, 1, ... as often each.
  local part
  for ((part = 0; part < parts; part++)); do
    [ "$(jq --arg d "-DMSDA_PART=$part" '[.steps[] | select(.command | index($d))] | length' <<<"$output")" -eq $((ptx / parts)) ] ||
      { echo "part $part: not one PTX step in $parts" >&2; return 1; }
  done
  [ "$ptx" -ge 1 ] && [ "$ptx" -le "$images" ] || { echo "$ptx PTX steps for $images images" >&2; return 1; }
  # Each image's input is the output of a PTX step before it.
  jq -e '.steps as $s | [range(0; $s | length) as $i | $s[$i] | select((.command[-1] | endswith(".ptx")))
         | .command[-1] as $in | any($s[0:$i][]; .output == $in)] | all' <<<"$output" >/dev/null ||
    { echo "an image whose PTX no earlier step writes" >&2; return 1; }
}

@test "all with CUDA 13.0: every architecture it targets (sm_88 with safe defaults), PTX of the newest and of the oldest" { run_case all-cuda13; }
@test "all with CUDA 13.0 and 11.8: old architectures go to 11.8 with g++-11, sm_35 included" { run_case all-cuda13-and-11.8; }
@test "each architecture goes to the newest toolkit that lists it; +PTX adds PTX" { run_case newest-toolkit-wins; }
@test "GPU names and compute capabilities, de-duplicated" { run_case named-gpus; }
@test "an unknown GPU name is a usage error" { run_case unknown-name; }
@test "architectures no toolkit supports are named with the toolkits that would" { run_case no-toolkit-for-arch; }
@test "a new architecture with only an old toolkit" { run_case too-new-for-old-toolkit; }
@test "a gcc too new for nvcc, and no older one installed" { run_case gcc-too-new; }
@test "all cannot be combined with a list" { run_case all-and-list; }
@test "only +PTX may follow an architecture" { run_case bad-ptx-suffix; }
@test "native: the P40 of this machine (fake driver)" { run_case native-p40; }
@test "native: two different GPUs (fake driver)" { run_case native-two-gpus; }
@test "native: only the SASS the driver loads, the newest toolkit's it loads (13.0 on 580, 11.8 on 550)" {
  run_case native-h100-driver-580
  run_case native-h100-driver-550
}
@test "native without a GPU" { run_case native-no-gpu; }
@test "no toolkit at all" { run_case no-toolkit; }

@test "dry-run text shows the plan and the exact nvcc commands" {
  make_fakes "13.0 11.8" "12 11"
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch tx2
  [ "$status" -eq 0 ]
  [[ "$output" == *"sm_62        CUDA 11.8  driver >= 450.80.02          threads 128"*"-ccbin $FAKE/bin/g++-11"* ]]
  [[ "$output" == *"compute_62   CUDA 11.8  ISA 6.5, driver >= 440.33"* ]]
  # One PTX step per part for compute_62, which the SASS and the old drivers' lowered PTX are
  # both made from.
  [ "$(grep -c -- "-ptx -arch=compute_62 " <<<"$output")" -eq 2 ]
  local ptx
  ptx=$(grep -- "-ptx -arch=compute_62 .*-DMSDA_PART=1 " <<<"$output" | sed 's/.* -o \([^ ]*\.ptx\) .*/\1/')
  [[ "$output" == *"sh $SRC/kernels/ptx-for-old-drivers.sh 6.5 62 -o "*".fatbin $ptx"* ]]
  # The floor of each architecture, from its images.
  [[ "$output" == *"Drivers: each architecture runs on"*"sm_62            CUDA 11.8 SASS from driver 450.80.02 (CUDA 11.0); PTX ISA 6.5 from driver 440.33 (CUDA 10.2)"* ]]
  [[ "$output" == *"$FAKE/cuda-11.8/bin/nvcc -ptx -arch=compute_62 "*"-DMSDA_MAX_THREADS=128"*"-DMSDA_PART=0 -o "*"msda_kernels.cu"* ]]
  [[ "$output" == *"$FAKE/cuda-11.8/bin/nvcc -fatbin -Xfatbin=-compress-all -gencode arch=compute_62,code=sm_62 "*" $ptx"* ]]
  # the host code gets the version under the macro kernels/libmsda.json names
  local macro
  macro=$(jq -r .host.version_define "$SRC/kernels/libmsda.json")
  [ -n "$macro" ] && [ "$macro" != null ]
  [[ "$output" == *" -D$macro=\"$(cat "$ROOT/VERSION")\" "* ]]
}

@test "an architecture the table lacks, named alone, is built with the safe defaults and a note" {
  make_fakes "13.0" "12"
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run --json \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_88
  [ "$status" -eq 0 ]
  [ "$(jq -r '.plan.targets[] | "\(.arch) \(.known) \(.max_threads) \(.f16_atomic)"' <<<"$output")" = "sm_88 false 128 f32-buffer" ]
  jq -e '.plan.notes[] | select(contains("sm_88: not in recipes/architectures.json"))' <<<"$output" >/dev/null
}

@test "--define replaces a knob of the recipe for every target and adds other macros" {
  make_fakes "13.0" "12"
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run --json \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_80,sm_90 \
      --define MSDA_F16_ATOMIC=2 --define MSDA_VECTOR_ATOMICS=0
  [ "$status" -eq 0 ]
  [ "$(jq -r '[.plan.targets[] | .f16_atomic] | unique | join(",")' <<<"$output")" = "cas" ]
  cmd=$(jq -r '.steps[0].command | join(" ")' <<<"$output")
  [[ "$cmd" == *"-DMSDA_F16_ATOMIC=2 -DMSDA_BF16_ATOMIC=4 -DMSDA_VECTOR_ATOMICS=0 -DMSDA_PART=0 -o "* ]]
  [[ "$cmd" != *"-DMSDA_F16_ATOMIC=1"* ]]
}

@test "a dry run takes no lock: it neither waits for another build nor says it does" {
  # (A real build that waits, naming the process it waits for, is tests/cli/plan/signals.bats's.)
  make_fakes "13.0" "12"
  mkdir -p "$SRC/build/msda"
  flock "$SRC/build/msda/.lock" sleep 30 &
  local holder=$!
  for _ in $(seq 50); do flock -n "$SRC/build/msda/.lock" true || break; sleep 0.05; done
  run --separate-stderr timeout 20 env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build \
      --dry-run --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90
  kill "$holder"
  wait "$holder" || true
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [[ "$stderr" != *"another build"* ]]
}

@test "a malformed --define is a usage error" {
  make_fakes "13.0" "12"
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90 --define '1X=2'
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"define '1X=2': the name must be a C identifier"* ]]
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90 --define 'X=two'
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"the value must be an integer"* ]]
}

# A source folder whose kernels/libmsda.json is a copy, changed by the jq program $1.
recipe_source() {
  SRC="$BATS_TEST_TMPDIR/edited"
  mkdir -p "$SRC/kernels" && cp -r "$ROOT"/kernels/. "$SRC/kernels/" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
  jq "$1" "$ROOT/kernels/libmsda.json" > "$SRC/kernels/libmsda.json"
}

@test "kernels/libmsda.json alone decides the flags: one edit reaches nvcc, the host compiler and the link" {
  make_fakes "13.0" "12"
  recipe_source '.device.nvcc_flags += ["-lineinfo"] | .host.cflags += ["-DMSDA_EDITED"] | .host.libs += ["-lrt"]
                 | .per_arch.MSDA_MAX_THREADS = {"fact": "none", "otherwise": 512, "unknown": 512} | .ptx = ["newest"]'
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run --json \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch all
  [ "$status" -eq 0 ]
  jq -e '[.steps[] | select(.what | test("^(sm|compute)_")) | .command | index("-lineinfo")] | all' <<<"$output" >/dev/null
  jq -e '[.steps[] | select(.what | endswith(".c")) | .command | index("-DMSDA_EDITED")] | all' <<<"$output" >/dev/null
  jq -e '.steps[] | select(.what | endswith("libmsda.so")) | .command | index("-lrt")' <<<"$output" >/dev/null
  # the soname is product.h's, given once, whatever the recipe's link flags say
  [ "$(jq '[.steps[] | select(.what | endswith("libmsda.so")) | .command[] | select(. == "-Wl,-soname,libmsda.so")] | length' <<<"$output")" = 1 ]
  [ "$(jq -r '.plan.targets[] | select(.arch == "sm_90") | .max_threads' <<<"$output")" = 512 ]
  [ "$(jq -r '[.plan.targets[] | select(.kind == "ptx") | .arch] | join(",")' <<<"$output")" = "compute_121" ]
}

@test "kernels/libmsda.json's ptx list alone decides the PTX: the oldest of the newest toolkit only" {
  make_fakes "13.0" "12"
  recipe_source '.ptx = ["oldest_of_newest_toolkit"]'
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run --json \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch all
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(jq -r '[.plan.targets[] | select(.kind == "ptx") | .arch] | join(",")' <<<"$output")" = "compute_75" ]
}

@test "kernels/libmsda.json's sass and old_driver_ptx alone decide what older drivers get" {
  make_fakes "13.0 11.8" "12 11"
  # As shipped: sm_86 from both toolkits, each with what it needs of a driver; TX2's lowered PTX.
  dry_json sm_86,sm_62
  [ "$(jq -r '[.plan.targets[] | "\(.arch)/\(.toolkit)/\(.needs_cuda)/\(.needs_driver)/\(.ptx_isa)"] | join(" ")' <<<"$output")" = \
    "sm_62/11.8/11.0/450.80.02/null sm_86/13.0/13.0/580.65.06/null sm_86/11.8/11.0/450.80.02/null compute_62/11.8/10.2/440.33/6.5" ]
  # SASS compressed as PTX is; the old drivers' PTX goes through the script (fatbinary's own PTX compression).
  jq -e '[.steps[] | select((.command[0] | endswith("/nvcc")) and (.command | index("-fatbin")))] | all(.command | index("-Xfatbin=-compress-all"))' <<<"$output" >/dev/null
  jq -e '[.steps[] | select((.command[1] // "") | endswith("/ptx-for-old-drivers.sh"))][0].command | index("-Xfatbin=-compress-all") == null' <<<"$output" >/dev/null
  recipe_source '.sass = ["newest"] | del(.old_driver_ptx)'
  dry_json sm_86,sm_62
  [ "$(jq -r '[.plan.targets[] | "\(.arch)/\(.toolkit)"] | join(" ")' <<<"$output")" = "sm_62/11.8 sm_86/13.0" ]
  recipe_source '.sass = ["lowest_driver"]'
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90
  [ "$status" -eq 3 ]
  [[ "$stderr" == *"kernels/libmsda.json: sass must include 'newest'"* ]]
  recipe_source '.old_driver_ptx.isa = "six"'
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90
  [ "$status" -eq 3 ]
  [[ "$stderr" == *"old_driver_ptx needs an 'isa'"* ]]
}

@test "a malformed kernels/libmsda.json is an error naming the file and the field" {
  make_fakes "13.0" "12"
  recipe_source '.per_arch.MSDA_MAX_THREADS.fact = "colour"'
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90
  [ "$status" -eq 3 ]
  [[ "$stderr" == *"kernels/libmsda.json: per_arch 'MSDA_MAX_THREADS' follows an unknown fact 'colour'"* ]]
  [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ]
  for bad in 0 65 '"four"'; do
    assert_recipe_refused ".device.ptxas_threads = $bad" \
      "kernels/libmsda.json: device.ptxas_threads must be an integer from 1 to 64"
  done
  for bad in 0 9 '"two"' null; do
    assert_recipe_refused ".device.parts = $bad" "kernels/libmsda.json: device.parts must be an integer from 1 to 8"
  done
  for bad in '""' 2 null; do
    assert_recipe_refused ".device.part_define = $bad" "kernels/libmsda.json: device.part_define must name a macro"
  done
}

# build --dry-run --json --arch $1 of $SRC with the fake toolkits, which must succeed.
dry_json() {
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run --json \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch "$1"
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
}

# The recipe edited by jq filter $1 is refused: exit 3, and the error has $2.
assert_recipe_refused() {
  recipe_source "$1"
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90
  [ "$status" -eq 3 ] && [[ "$stderr" == *"$2"* ]] || { echo "$1: exit $status: $stderr" >&2; return 1; }
}

@test "same_ptx: a group's SASS made from its lowest architecture's PTX, one PTX step; a SASS whose own PTX is planned uses that" {
  make_fakes "13.0 11.8" "12 11"
  made_from() { jq -r --arg w "$1" '.steps[] | select(.what == $w) | .command as $c | $c[($c | indices("-gencode")[0]) + 1]' <<<"$output"; }
  recipe_source '.same_ptx = {"13.0": [[80, 86, 89], [103, 121]]}'
  dry_json sm_80,sm_86,sm_89,sm_103,sm_121+PTX
  check_device_steps
  [ "$(made_from "sm_86 (CUDA 13.0, part 0)")" = "arch=compute_80,code=sm_86" ]
  [ "$(made_from "sm_89 (CUDA 13.0, part 1)")" = "arch=compute_80,code=sm_89" ]
  [ "$(made_from "sm_103 (CUDA 13.0, part 0)")" = "arch=compute_103,code=sm_103" ]
  # sm_121's own PTX is compiled anyway, for its PTX image
  [ "$(made_from "sm_121 (CUDA 13.0, part 1)")" = "arch=compute_121,code=sm_121" ]
  [ "$(made_from "compute_121 (CUDA 13.0, part 0)")" = "arch=compute_121,code=compute_121" ]
  # 13.0: compute_80 for three SASS, compute_103, compute_121; 11.8 has no group here, so its
  # SASS are each made from their own PTX; each once per part
  [ "$(jq -r '[.steps[] | select(.command | index("-ptx")) | .what | sub(", part [01]"; "")] | unique | join(",")' <<<"$output")" = \
    "compute_103 PTX (CUDA 13.0),compute_121 PTX (CUDA 13.0),compute_80 PTX (CUDA 11.8),compute_80 PTX (CUDA 13.0),compute_86 PTX (CUDA 11.8),compute_89 PTX (CUDA 11.8)" ]
  [ "$(jq '[.steps[] | select(.command | index("-ptx"))] | length' <<<"$output")" -eq 12 ]
  [ "$(made_from "sm_86 (CUDA 11.8, part 1)")" = "arch=compute_86,code=sm_86" ]
  for bad in '{"13.0": [[80]]}' '{"13.0": [[80, 86], [86, 89]]}' '{"thirteen": [[80, 86]]}' '[[80, 86]]'; do
    assert_recipe_refused ".same_ptx = $bad" "kernels/libmsda.json: same_ptx"
  done
}

@test "ptxas's threads: libmsda.json's ptxas_threads on the SASS steps of a toolkit whose nvcc has --split-compile, on no other step" {
  make_fakes "13.0 11.8" "12 11"
  dry_json sm_80+PTX
  # sm_80 from 13.0 (whose --help offers it), sm_80 from 11.8, compute_80 from 13.0
  # 1 (the shipped recipe's): no flag at all, as ptxas's default
  [ "$(jq '[.steps[] | select(.command | any(startswith("--split-compile")))] | length' <<<"$output")" -eq 0 ]
  recipe_source '.device.ptxas_threads = 2'
  dry_json sm_80+PTX
  [ "$(jq -r '[.steps[] | select(.command | index("--split-compile=2")) | .what] | join(",")' <<<"$output")" = \
    "sm_80 (CUDA 13.0, part 0),sm_80 (CUDA 13.0, part 1)" ]
  [ "$(jq '[.steps[] | select(.command | any(startswith("--split-compile")))] | length' <<<"$output")" -eq 2 ]
}

@test "a missing cross compiler names Debian's package for it" {
  make_fakes "13.0" "12"
  other=$FOREIGN_CPU
  run --separate-stderr env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build --dry-run \
      --platform "$other" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"no C compiler for $other: apt-get install gcc-${other//_/-}-linux-gnu"* ]]
}

@test "compilations at a time: by default the cores this process may run on (taskset, a cpuset), not the machine's" {
  make_fakes "13.0" "12"
  # jobs_of [taskset -c CPUS] [OPTION...]: the build's jobs, from --json
  jobs_of() {
    local pin=()
    [ "$1" = taskset ] && { pin=(taskset -c "$3"); shift 3; }
    run --separate-stderr "${pin[@]}" env PATH="$FAKE/bin" MSDA_TOOLKIT_PATHS="$TOOLKIT_PATHS" "$MSDA_DOCTOR" build \
        --dry-run --json --platform "$HOST_CPU" --source "$SRC" --cache "$BATS_TEST_TMPDIR/cache" --arch sm_90 "$@"
    [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
    jq .jobs <<<"$output"
  }
  [ "$(jobs_of taskset -c 0)" -eq 1 ]
  [ "$(jobs_of)" -eq "$(nproc)" ]
  [ "$(jobs_of taskset -c 0 -j 3)" -eq 3 ]
}
