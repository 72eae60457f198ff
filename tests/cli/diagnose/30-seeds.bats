#!/usr/bin/env bats
# The seed scenarios of issue 5, end to end: a fake machine (driver, nvidia-smi, Jetson files,
# Python, installed op) and a failing log give the right cause, evidence and fix.
load diag_helpers

@test "P40: no kernel image, explained by an sm_52-only binary; the fix builds sm_61, not -DCUDA_HAS_FP16" {
  gpus p40; smi ok; install_op f118-sm52.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json "$LOGS/p40-no-kernel-image.log"
  [ "$status" -eq 1 ]
  assert_clean_stderr
  [ "$(jq -r '.findings[0].id' <<<"$output")" = no-kernel-image ]
  f=$(finding no-kernel-image)
  cause=$(jq -r .cause <<<"$f")
  [[ "$cause" == *"sm_52"* && "$cause" == *"no PTX"* && "$cause" == *"Tesla P40 (sm_61)"* ]]
  jq -e '.evidence | any(contains("no kernel image is available for execution on the device"))' <<<"$f"
  jq -e '.evidence | any(startswith("GPU 0: Tesla P40, sm_61"))' <<<"$f"
  jq -e '.evidence | any(contains("MultiScaleDeformableAttention") and contains("SASS sm_52; PTX none"))' <<<"$f"
  [ "$(jq -r '.fix[0]' <<<"$f")" = "msda-doctor build --arch sm_61" ]
  jq -e '.fix | any(contains("pip install --force-reinstall wheels/dist/msda-"))' <<<"$f"
  jq -e '.notes | any(contains("-DCUDA_HAS_FP16") and contains("not the fix"))' <<<"$f"
  jq -e '.confirmed_by | index("gpu_arch_not_in_binary") and index("binary_built_on_other_gpu")' <<<"$f"
  [ "$(check_status binaries)" = fail ]
}

@test "P40, text: the checklist marks, the fix command and the summary line" {
  gpus p40; smi ok; install_op f118-sm52.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" "$LOGS/p40-no-kernel-image.log"
  [ "$status" -eq 1 ]
  [[ "$output" == *"[v] GPUs (driver API): 1 GPU, driver 535.183.01, CUDA 12.2"* ]]
  [[ "$output" == *"[x] MSDA binaries: 1 found"* ]]
  [[ "$output" == *"[x] no-kernel-image: "* ]]
  [[ "$output" == *$'\n      msda-doctor build --arch sm_61\n'* ]]
  # the binaries fail, and without a toolkit the toolkits check warns: a warning is no problem,
  # as for the exit status, and is counted apart
  [[ "$output" == *"! 1 finding; problems in 1 check; 1 warning."* ]]
  # not a terminal: plain ASCII, no colour
  ! LC_ALL=C grep -q $'[\x80-\xff\x1b]' <<<"$output"
}

@test "TX2: too many resources, explained by 32K registers per block, with the threads that fit" {
  gpus tx2; install_op f118-regs40.fatbin MultiScaleDeformableAttention.cpython-36m-aarch64-linux-gnu.so
  # A TX2's last driver (r32) runs CUDA 10.2 and loads no 11.x SASS (issue 39); the op on it was
  # built by its own CUDA 10.2 nvcc. No 10.2 toolkit here: the 11.8 cubins stand in for it, their
  # e_version (the writing toolkit, times ten) set to 102.
  perl -0777 -pi -e 's/(\x7fELF\x02.{13}\xbe\x00)\x76\x00\x00\x00/$1\x66\x00\x00\x00/gs' \
    "$OPS/MultiScaleDeformableAttention.cpython-36m-aarch64-linux-gnu.so"
  run --separate-stderr diagnose "${PY[@]}" --root "$ROOT/tests/fixtures/jetson/tx2" --search "$OPS" --json \
      "$LOGS/tx2-too-many-resources.log"
  [ "$status" -eq 1 ]
  assert_clean_stderr
  [ "$(jq -r '.findings[0].id' <<<"$output")" = launch-out-of-resources ]
  f=$(finding launch-out-of-resources)
  cause=$(jq -r .cause <<<"$f")
  # 40 registers x 1024 threads = 40960 > 32768; 25 warps of 1280 registers = 800 threads fit
  [[ "$cause" == *"32768 registers"* && "$cause" == *"40 registers per thread"* && "$cause" == *"at most 800 threads fit"* ]]
  jq -e '.fix | any(contains("CUDA_NUM_THREADS = 800;"))' <<<"$f"
  [ "$(jq -r '.fix[0]' <<<"$f")" = "msda-doctor build --arch sm_62" ]
  jq -e '.fix | any(contains("manylinux_2_17_aarch64"))' <<<"$f"
  jq -e '.confirmed_by | index("gpu_regs_per_block_32k") and index("binary_regs_times_threads_exceed_block")' <<<"$f"
  # the evidence names the kernel that does not fit, with its arithmetic
  jq -e --arg op "$OPS/MultiScaleDeformableAttention.cpython-36m-aarch64-linux-gnu.so" '.evidence | index($op + ": SASS sm_62 sm_86; PTX none: on NVIDIA Tegra X2, _Z10probe_regsPfPKfi takes 40 registers x 1024 threads = 40960 of 32768 registers per block")' <<<"$f"
  [ "$(jq -r '.machine.jetson | "\(.module) \(.l4t) \(.jetpack) \(.cuda) \(.arch)"' <<<"$output")" = \
    "Jetson TX2 32.7.4 4.6.4 10.2 sm_62" ]
  [ "$(jq -r '.machine.gpus[0].registers_per_block' <<<"$output")" -eq 32768 ]
  # TX2 has no nvidia-smi: skipped, not a problem
  [ "$(check_status nvidia-smi)" = skipped ]
}

@test "TX2 without an installed binary: 32K registers still explain it; 128 threads fit at any count" {
  gpus tx2
  run --separate-stderr diagnose "${PY[@]}" --root "$ROOT/tests/fixtures/jetson/tx2" --json "$LOGS/tx2-too-many-resources.log"
  # the Jetson check: the module from the device tree's model, and the model itself
  [ "$(jq -c '.checks[] | select(.id == "jetson") | [.status, .details]' <<<"$output")" = \
    '["ok",["Jetson TX2: sm_62 (compute capability 6.2), 32768 registers per block","device-tree model: quill"]]' ]
  f=$(finding launch-out-of-resources)
  [[ "$(jq -r .cause <<<"$f")" == *"32768 registers, not 65536"* ]]
  jq -e '.fix | any(contains("CUDA_NUM_THREADS = 128;"))' <<<"$f"
}

@test "md5: a dependency download failing its check names the file" {
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/md5-mismatch.log"
  [ "$status" -eq 1 ]
  [ "$(ids)" = checksum-mismatch ]
  [ "$(finding checksum-mismatch | jq -r '.fix[1]')" = "head -c 300 /home/wei/bevformer_tensorrt/build/cub_ext-prefix/src/cub-1.8.0.zip" ]
}

@test "cuDNN: a libcudnn.so.8 without its unversioned link, on the machine and in the log" {
  lib="$FAKE_ROOT/usr/lib/aarch64-linux-gnu"
  mkdir -p "$lib"; : > "$lib/libcudnn.so.8.6.0"; ln -s libcudnn.so.8.6.0 "$lib/libcudnn.so.8"
  gpus orin
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/cudnn-symlink.log"
  [ "$(jq -r '.findings[0].id' <<<"$output")" = cudnn-not-found ]
  f=$(finding cudnn-not-found)
  [ "$(jq -r '.fix[0]' <<<"$f")" = "sudo ln -s libcudnn.so.8 /usr/lib/aarch64-linux-gnu/libcudnn.so" ]
  [ "$(jq -r '.fix[1]' <<<"$f")" = "sudo apt-get install libcudnn8-dev" ]
  jq -e '.confirmed_by | index("cudnn_unversioned_link_missing")' <<<"$f"
  [ "$(check_status cudnn)" = warning ]
  # with the link made, the machine argues against it
  ln -s libcudnn.so.8 "$lib/libcudnn.so"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/cudnn-symlink.log"
  jq -e '.ruled_out_by | index("cudnn_unversioned_link_present")' <<<"$(finding cudnn-not-found)"
  [ "$(check_status cudnn)" = ok ]
}

@test "NCCL link errors while building PyTorch on a Jetson: is_jetson and nccl_absent confirm it" {
  gpus orin
  run --separate-stderr diagnose "${PY[@]}" --root "$ROOT/tests/fixtures/jetson/orin" --json "$LOGS/jetson-nccl.log"
  [ "$(jq -r '.findings[0].id' <<<"$output")" = nccl-link-error ]
  f=$(finding nccl-link-error)
  jq -e '.confirmed_by | index("is_jetson") and index("nccl_absent")' <<<"$f"
  [ "$(jq -r '.fix[0]' <<<"$f")" = "export USE_NCCL=0 USE_DISTRIBUTED=0 USE_QNNPACK=0 USE_PYTORCH_QNNPACK=0" ]
  [ "$(jq -r '.fix[1]' <<<"$f")" = 'export TORCH_CUDA_ARCH_LIST="8.7+PTX"' ]
  jq -e '.evidence | any(startswith("Jetson: Jetson AGX Orin, L4T 36.4.3, JetPack 6.2"))' <<<"$f"
}

@test "MAGMA missing: torch without MAGMA (its ATen/cuda/CUDAConfig.h) confirms it" {
  gpus orin
  torch="$BATS_TEST_TMPDIR/torch"
  mkdir -p "$torch/lib" "$torch/include/ATen/cuda"
  printf '#pragma once\n#define AT_CUDNN_ENABLED() 1\n#define AT_MAGMA_ENABLED() 0\n' > "$torch/include/ATen/cuda/CUDAConfig.h"
  python_json '{"executable": "/usr/bin/python3", "version": "3.10.12", "msda_importable": true, "binaries": [],
                "torch": {"version": "2.5.0a0+872d972e41.nv24.08", "cuda": "12.6", "lib": "'"$torch"'/lib"}}'
  run --separate-stderr diagnose "${PY[@]}" --root "$ROOT/tests/fixtures/jetson/orin" --json "$LOGS/magma-missing.log"
  [ "$(jq -r '.findings[0].id' <<<"$output")" = magma-missing ]
  jq -e '.confirmed_by | index("torch_without_magma") and index("is_jetson")' <<<"$(finding magma-missing)"
  [ "$(jq -r '.machine.python.has_magma' <<<"$output")" = false ]
}

@test "a .cpp and a .cu with the same basename: rename the .cu" {
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/same-basename.log"
  [ "$(jq -r '.findings[0].id' <<<"$output")" = duplicate-object-name ]
  [ "$(finding duplicate-object-name | jq -r '.fix[0]')" = \
    "git mv /work/ddetr/models/ops/src/ms_deform_attn.cu /work/ddetr/models/ops/src/ms_deform_attn_cuda.cu" ]
}

@test "libc10.so not found because the extension was imported before torch" {
  python_json '{"executable": "/home/kim/venv/bin/python", "version": "3.11.9", "msda_importable": true, "binaries": [],
                "torch": {"version": "2.4.1", "cuda": "12.1",
                          "lib": "'"$BATS_TEST_TMPDIR"'/torch/lib"}}'
  mkdir -p "$BATS_TEST_TMPDIR/torch/lib"; : > "$BATS_TEST_TMPDIR/torch/lib/libc10.so"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/libc10-import-order.log"
  [ "$(ids)" = shared-lib-not-found ]
  f=$(finding shared-lib-not-found)
  jq -e '.confirmed_by | index("extension_imported_before_torch") and index("missing_lib_in_torch_lib_dir")' <<<"$f"
  [ "$(jq -r '.fix[0]' <<<"$f")" = "/home/kim/venv/bin/python -c 'import torch, MultiScaleDeformableAttention'" ]
}
