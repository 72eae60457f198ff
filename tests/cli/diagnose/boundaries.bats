#!/usr/bin/env bats
# Issue 45: diagnose's readings at their boundaries, each test written to fail when one rule is
# off by one: SASS of a lower minor of the same major runs and of a higher one does not (the
# probes' binaries check, src/lib/binary/runs_on.c, and a log's own build targets,
# src/lib/diagnose/diag_facts.c); PyTorch's space-separated TORCH_CUDA_ARCH_LIST; two readings
# of one ambiguous message one point apart and tied (src/lib/diagnose/diag_fill.c); a Jetson's
# log read alone names the aarch64 wheel.
load diag_helpers
load ../host-cpu

# A GPU description for the fake driver: the A100 of tests/fixtures/gpus with its name, compute
# capability and registers per SM changed, on a CUDA 13.0 driver (580), which loads CUDA 13's
# SASS: the fixtures are CUDA 13 builds, so only the architecture decides whether they run.
fake_gpu() {  # fake_gpu NAME CC
  MSDA_FAKE_GPUS="$BATS_TEST_TMPDIR/gpu-$2.json"
  jq --arg name "$1" --arg cc "$2" \
    '.driver_version = 13000 | .driver_release = "580.95.05"
     | .devices[0].name = $name | .devices[0].cc = $cc' "$GPUS/a100.json" > "$MSDA_FAKE_GPUS"
  export MSDA_FAKE_GPUS
}

# The binaries check's line for the one binary on GPU 0, and the finding IDs.
binaries_verdict() { jq -r '.checks[] | select(.id == "binaries") | .details[1] // "" | sub("^ +"; "")' <<<"$output"; }

@test "SASS of a lower minor runs: sm_80 code on an sm_86 GPU gives no no-kernel-image" {
  fake_gpu "NVIDIA GeForce RTX 3090" 8.6
  install_op f13-sm80.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json
  assert_clean_stderr
  [ "$(check_status binaries)" = ok ] ||
    { jq -c '.checks[] | select(.id == "binaries") | {status, problems}' <<<"$output" >&2; return 1; }
  [ "$(binaries_verdict)" = "runs on GPU 0 NVIDIA GeForce RTX 3090 (sm_80 SASS from CUDA 13.0)" ]
  [ "$(ids)" = "" ]
  [ "$status" -eq 0 ]
}

@test "SASS of a higher minor does not run: sm_86 code on an sm_80 GPU is no-kernel-image, for the architecture" {
  fake_gpu "NVIDIA A100-SXM4-40GB" 8.0
  [ "$(head -n 1 "$MSDA_FIXTURES/f13-regs40.archs")" = "sass: sm_86" ]
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$MSDA_FIXTURES/f13-regs40.cubin" --json
  assert_clean_stderr
  [ "$(ids)" = no-kernel-image ] ||
    { echo "findings: '$(ids)'; $(jq -c '.checks[] | select(.id == "binaries") | {status, problems, details}' <<<"$output")" >&2; return 1; }
  [ "$status" -eq 1 ]
  [ "$(check_status binaries)" = fail ]
  # not the driver: the architecture (sm_86 SASS, no sm_8x up to sm_80)
  jq -e '.checks[] | select(.id == "binaries") | .problems
         | any(endswith("cannot run on GPU 0 NVIDIA A100-SXM4-40GB (sm_80): no SASS sm_8x up to sm_80, no PTX up to compute_80"))' \
    <<<"$output" >/dev/null
  jq -e '.confirmed_by | index("gpu_arch_not_in_binary")' <<<"$(finding no-kernel-image)" >/dev/null
  [ "$(finding no-kernel-image | jq -r '.fix[0]')" = "msda-doctor build --arch sm_80" ]
}

# A log alone: its GPU (deviceQuery's compute capability), the build's -gencode, the failure.
build_log() {  # build_log FILE CC SM
  cat > "$1" <<LOG
  CUDA Capability Major/Minor version number:    $2
/usr/local/cuda-12.4/bin/nvcc -c ms_deform_attn_cuda.cu -o ms_deform_attn_cuda.o -gencode=arch=compute_$3,code=sm_$3 -O3
RuntimeError: CUDA error: no kernel image is available for execution on the device
LOG
}

@test "a log's own build: sm_80 SASS covers its sm_86 GPU, sm_86 SASS does not cover an sm_80 one" {
  build_log "$BATS_TEST_TMPDIR/lower.log" 8.6 80
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/lower.log"
  assert_clean_stderr
  [ "$(jq -r '.logs[0].facts | "\(.compute_capability) \(.build_archs | join(","))"' <<<"$output")" = "8.6 sm_80" ]
  # covered: the log's build is not blamed, the finding keeps its general meaning
  [ "$(finding no-kernel-image | jq -r .cause)" = "$(jq -r '.signatures[] | select(.id == "no-kernel-image") | .meaning' "$ROOT/recipes/signatures.json")" ]

  build_log "$BATS_TEST_TMPDIR/higher.log" 8.0 86
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/higher.log"
  [ "$(jq -r '.logs[0].facts | "\(.compute_capability) \(.build_archs | join(","))"' <<<"$output")" = "8.0 sm_86" ]
  [[ "$(finding no-kernel-image | jq -r .cause)" == "The build in the log targeted sm_86, and the GPU of compute capability 8.0 (sm_80) runs none of them"* ]]
}

# The same log with TORCH_CUDA_ARCH_LIST written as $1.
arch_list_log() {  # arch_list_log FILE LIST
  cat > "$1" <<LOG
+ export TORCH_CUDA_ARCH_LIST="$2"
+ python setup.py build install
  CUDA Capability Major/Minor version number:    8.0
RuntimeError: CUDA error: no kernel image is available for execution on the device
LOG
}

@test "PyTorch's space-separated TORCH_CUDA_ARCH_LIST is read as the same list as the ';'-separated one" {
  arch_list_log "$BATS_TEST_TMPDIR/semi.log" "7.5;8.0;8.6+PTX"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/semi.log"
  assert_clean_stderr
  semi=$(jq -c '.logs[0].facts.build_archs | sort' <<<"$output")
  [ "$semi" = '["compute_86","sm_75","sm_80","sm_86"]' ]
  arch_list_log "$BATS_TEST_TMPDIR/space.log" "7.5 8.0 8.6+PTX"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/space.log"
  assert_clean_stderr
  [ "$(jq -r '.logs[0].facts.torch_cuda_arch_list' <<<"$output")" = "7.5 8.0 8.6+PTX" ]
  space=$(jq -c '.logs[0].facts.build_archs | sort' <<<"$output")
  [ "$space" = "$semi" ] || { echo "space-separated: $space; ';'-separated: $semi" >&2; return 1; }
  # and judged alike: the list holds sm_80, so the log's build is not what lacks the A100's code
  [[ "$(finding no-kernel-image | jq -r .cause)" != "The build in the log targeted"* ]]
  # a space-separated list without the GPU's architecture is blamed, naming every entry
  arch_list_log "$BATS_TEST_TMPDIR/lacks.log" "6.1 7.0 7.5"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/lacks.log"
  [[ "$(finding no-kernel-image | jq -r .cause)" == "The build in the log targeted sm_61, sm_70, sm_75, and the GPU of compute capability 8.0 (sm_80) runs none of them"* ]]
}

# "invalid device function" has two readings in recipes/signatures.json, ranked by score (the
# facts for minus the facts against that hold), ties going to the data's order. In this log
# no-kernel-image's reading has one fact for (hint:arch_list_not_set) and one against (the
# log's build covers its sm_80 GPU): 0. cuda-version-mismatch's has, with torch's CUDA line,
# one for (torch_cuda_major_differs: torch 12.1, nvcc 11.8): 1, and without it none: 0.
ambiguous_log() {  # ambiguous_log FILE [TORCH_CUDA]
  {
    echo "UserWarning: TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included for compilation."
    echo "  CUDA Capability Major/Minor version number:    8.0"
    echo "/usr/local/cuda-11.8/bin/nvcc -c ms_deform_attn_cuda.cu -o ms_deform_attn_cuda.o -gencode=arch=compute_80,code=sm_80"
    if [ -n "${2:-}" ]; then echo "CUDA used to build PyTorch: $2"; fi
    echo "RuntimeError: CUDA error: invalid device function"
  } > "$1"
}

readings() { jq -r '[.findings[0].causes[] | "\(.id)=\(.score)"] | join(" ")' <<<"$output"; }

@test "two readings of one message: the second wins by exactly one point when its evidence is there" {
  # the data's order, which breaks ties
  [ "$(jq -r '.signatures[] | select(.id == "no-kernel-image") | .readings[0].causes | map(.finding) | join(" ")' \
        "$ROOT/recipes/signatures.json")" = "no-kernel-image cuda-version-mismatch" ]
  ambiguous_log "$BATS_TEST_TMPDIR/mismatch.log" 12.1
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/mismatch.log"
  assert_clean_stderr
  [ "$(readings)" = "cuda-version-mismatch=1 no-kernel-image=0" ] || { echo "readings: $(readings)" >&2; return 1; }
  [ "$(jq -c '.findings[0].causes[1] | [.for, .against]' <<<"$output")" = \
    '[["hint:arch_list_not_set"],["log_build_archs_cover_gpu_arch"]]' ]
  [ "$(ids)" = cuda-version-mismatch ]
  [[ "$(jq -r '.findings[0].causes[0].cause' <<<"$output")" == "The same message comes from an extension compiled with another CUDA toolkit"*"(nvcc 11.8, torch's CUDA 12.1)"* ]]
  # decided by a point: not ambiguous, in JSON or in text
  [ "$(jq -r '.findings[0].ambiguous_with' <<<"$output")" = null ]
  jq -e '.findings[0].notes | all(startswith("Ambiguous") | not)' <<<"$output"
  run --separate-stderr diagnose --no-probe "$BATS_TEST_TMPDIR/mismatch.log"
  [[ "$output" != *Ambiguous* ]]
}

@test "two readings of one message tied: the data's first reading wins, called ambiguous" {
  ambiguous_log "$BATS_TEST_TMPDIR/tie.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/tie.log"
  assert_clean_stderr
  [ "$(readings)" = "no-kernel-image=0 cuda-version-mismatch=0" ] || { echo "readings: $(readings)" >&2; return 1; }
  [ "$(ids)" = no-kernel-image ]
  [[ "$(jq -r '.findings[0].causes[0].cause' <<<"$output")" == "'invalid device function' from an extension usually means"* ]]
  # and says that nothing decided: the other ID in JSON, a note naming both
  [ "$(jq -r '.findings[0].ambiguous_with' <<<"$output")" = cuda-version-mismatch ]
  jq -e '.findings[0].notes | any(startswith("Ambiguous: nothing in the log decides between no-kernel-image and cuda-version-mismatch, which score the same"))' <<<"$output"
  run --separate-stderr diagnose --no-probe "$BATS_TEST_TMPDIR/tie.log"
  [[ "$output" == *"Ambiguous: nothing in the log decides between no-kernel-image and cuda-version-mismatch"*"(msda-doctor diagnose --list)."* ]]
}

# Read alone (--no-probe), a Jetson's log is judged by its GPU: the wheel its fix installs is the
# aarch64 one, whatever CPU reads the log; another GPU's log gets this CPU's wheel.
@test "the smallest driver version a driver can answer (1) is a version, compared with the toolkit's" {
  jq '.driver_version = 1' "$GPUS/t4.json" > "$BATS_TEST_TMPDIR/v1.json"
  export MSDA_FAKE_GPUS="$BATS_TEST_TMPDIR/v1.json"
  toolkit 11.8; gxx 11
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  assert_clean_stderr
  [ "$(jq -c '.checks[] | select(.id == "toolkits") | [.status, .problems]' <<<"$output")" = \
    '["fail",["the driver (CUDA 0.0) is older than CUDA 11.8 needs (driver 520.61.05 or newer)"]]' ]
}

@test "a Jetson Orin log read with --no-probe: the fix names the aarch64 wheel" {
  cat > "$BATS_TEST_TMPDIR/orin.log" <<'LOG'
nvidia@orin-devkit:~$ cat /etc/nv_tegra_release
# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023
nvidia@orin-devkit:~$ /usr/local/cuda/samples/1_Utilities/deviceQuery/deviceQuery
Device 0: "Orin"
  CUDA Driver Version / Runtime Version          11.4 / 11.4
  CUDA Capability Major/Minor version number:    8.7
nvidia@orin-devkit:~$ python3 demo.py
RuntimeError: CUDA error: no kernel image is available for execution on the device
LOG
  assert_jetson_fix "$BATS_TEST_TMPDIR/orin.log" sm_87
  jq -e '.fix | all(contains("x86_64") | not)' <<<"$f" >/dev/null
}

# diagnose --no-probe of Jetson log $1: no-kernel-image (in $f), whose fixes build for $2 and
# install the aarch64 wheel.
assert_jetson_fix() {
  run --separate-stderr diagnose --no-probe --json "$1"
  assert_clean_stderr
  f=$(finding no-kernel-image)
  [ "$(jq -r '.fix[0]' <<<"$f")" = "msda-doctor build --arch $2" ]
  [ "$(jq -r '.fix[1]' <<<"$f")" = "python3 -m pip install --force-reinstall $(wheel_for wheels/dist aarch64)" ] ||
    { echo "fix: $(jq -r '.fix[1]' <<<"$f")" >&2; return 1; }
}

@test "a Jetson TX2 log read with --no-probe (torch's sm_62 warning): the fix names the aarch64 wheel" {
  cat > "$BATS_TEST_TMPDIR/tx2.log" <<'LOG'
nvidia@tx2:~/Deformable-DETR$ head -n 1 /etc/nv_tegra_release
# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t186ref, EABI: aarch64, DATE: Sat Feb 19 17:05:08 UTC 2022
nvidia@tx2:~/Deformable-DETR$ python3 main.py
/usr/local/lib/python3.6/dist-packages/torch/cuda/__init__.py:143: UserWarning:
NVIDIA Tegra X2 with CUDA capability sm_62 is not compatible with the current PyTorch installation.
RuntimeError: CUDA error: no kernel image is available for execution on the device
LOG
  assert_jetson_fix "$BATS_TEST_TMPDIR/tx2.log" sm_62
  # the same failure on an A100 gets this CPU's wheel
  build_log "$BATS_TEST_TMPDIR/a100.log" 8.0 86
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/a100.log"
  [ "$(finding no-kernel-image | jq -r '.fix[1]')" = "python3 -m pip install --force-reinstall $(wheel_for wheels/dist "$HOST_CPU")" ]
}

@test "a Jetson's nvidia-smi -L line, 'GPU 0: Orin (nvgpu)', names the GPU and its architecture" {
  # The name pattern wanted a character after "Orin" before " (", so the log gave no GPU at all.
  printf 'GPU 0: Orin (nvgpu)\nRuntimeError: CUDA error: no kernel image is available for execution on the device\n' \
    > "$BATS_TEST_TMPDIR/orin.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/orin.log"
  [ "$status" -eq 1 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(jq -r '.logs[0].facts.gpu_name' <<<"$output")" = "Orin" ]
  [ "$(jq -r '.logs[0].facts.compute_capability' <<<"$output")" = "8.7" ]
}
