#!/usr/bin/env bats
# Issue 12: the log's own facts, logs from another machine, ambiguous messages read two ways and
# ranked, the per-log "no known failure", the fact keys that read this machine's files, and the
# Python probe that never imports torch.
load diag_helpers

# A log as written on another machine: an RTX 3090 box, torch 1.10, nvcc 11.3, built for sm_61.
foreign_log() {
  cat > "$BATS_TEST_TMPDIR/foreign.log" <<'LOG'
alice@gpu-box-7:~/Deformable-DETR$ nvidia-smi -L
GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-5d1b8c0e-1a2b-4c3d-9e8f-0a1b2c3d4e5f)
alice@gpu-box-7:~/Deformable-DETR$ python -c 'import torch; print(torch.__version__)'
PyTorch version: 1.10.1+cu113
alice@gpu-box-7:~/Deformable-DETR$ cd models/ops && python setup.py build install
/usr/local/cuda-11.3/bin/nvcc -I/opt/conda/include -c src/cuda/ms_deform_attn_cuda.cu -o build/ms_deform_attn_cuda.o -gencode=arch=compute_61,code=sm_61 -O3
alice@gpu-box-7:~/Deformable-DETR$ python main.py
UserWarning: NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible with the current PyTorch installation.
RuntimeError: CUDA error: no kernel image is available for execution on the device
LOG
}

@test "a log from another machine: said so, judged by the log alone, this machine's findings apart" {
  gpus p40; toolkit 11.8; gxx 12 11
  mkdir -p "$FAKE_ROOT/etc"; echo lab-p40 > "$FAKE_ROOT/etc/hostname"
  foreign_log
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/foreign.log"
  [ "$status" -eq 1 ]
  assert_clean_stderr
  [ "$(jq -r '.logs[0] | "\(.origin) \(.foreign)"' <<<"$output")" = "another-machine true" ]
  jq -e '.logs[0].compared | any(.fact == "host" and .log == "gpu-box-7" and .machine == "lab-p40" and (.same | not))' <<<"$output"
  jq -e '.logs[0].compared | any(.fact == "gpu_name" and .machine == "Tesla P40" and (.same | not))' <<<"$output"
  [ "$(ids)" = "no-kernel-image host-compiler-unsupported" ]
  f=$(finding no-kernel-image)
  [ "$(jq -r '"\(.source) \(.judged_on) \(.gpu)"' <<<"$f")" = "log log null" ]
  # the log's GPU and build, not this machine's P40, fill the cause and the fix
  [[ "$(jq -r .cause <<<"$f")" == "The build in the log targeted sm_61, and the NVIDIA GeForce RTX 3090 (sm_86) runs none of them"* ]]
  [ "$(jq -r '.fix[0]' <<<"$f")" = "msda-doctor build --arch sm_86" ]
  jq -e '.evidence | any(startswith("the log says: GPU NVIDIA GeForce RTX 3090, sm_86, torch 1.10.1+cu113, torch'"'"'s CUDA 11.3, nvcc 11.3, built for sm_61"))' <<<"$f"
  jq -e '.evidence | all(startswith("GPU 0: Tesla P40") | not)' <<<"$f"
  [ "$(finding host-compiler-unsupported | jq -r '"\(.source) \(.judged_on)"')" = "probe machine" ]
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" "$BATS_TEST_TMPDIR/foreign.log"
  [[ "$output" == *"came from: another machine; judged by the log alone, this machine's findings kept apart"* ]]
  [[ "$output" == *"[x] no-kernel-image: no code for this GPU's architecture in the binary (judged by the log alone)"* ]]
  [[ "$output" == *$'On this machine, apart from the logs:\n\n[x] host-compiler-unsupported'* ]]
}

@test "a log that matches this machine is judged with it; --foreign judges it alone anyway" {
  gpus p40; smi ok; install_op f118-sm52.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json "$LOGS/p40-no-kernel-image.log"
  [ "$(jq -r '.logs[0] | "\(.origin) \(.foreign)"' <<<"$output")" = "this-machine false" ]
  [ "$(finding no-kernel-image | jq -r .judged_on)" = log-and-machine ]
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --foreign --json "$LOGS/p40-no-kernel-image.log"
  [ "$(jq -r '.logs[0] | "\(.origin) \(.foreign)"' <<<"$output")" = "this-machine true" ]
  f=$(finding no-kernel-image)
  [ "$(jq -r '"\(.judged_on) \(.confirmed_by | length)"' <<<"$f")" = "log 0" ]
  # the binaries check still runs: its own finding, from the probes, kept apart
  [ "$(jq -r '[.findings[] | "\(.id):\(.source)"] | join(" ")' <<<"$output")" = "no-kernel-image:log no-kernel-image:probe" ]
}

@test "each fact weighs: the capability alone decides either way, a GPU name outweighs it, a tie is this machine's" {
  # a log that states only the capability: one point, this machine's when it is the T4's, another
  # machine's when it is not, never "unknown" once one fact was compared
  printf '%s\n' "torch.cuda.get_device_capability(0): (7, 5)" \
    "RuntimeError: CUDA error: no kernel image is available for execution on the device" > "$BATS_TEST_TMPDIR/cc.log"
  gpus t4
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/cc.log"
  assert_clean_stderr
  [ "$(jq -r '.logs[0] | "\(.origin) \([.compared[].fact] | join(","))"' <<<"$output")" = "this-machine compute_capability" ]
  gpus p40
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/cc.log"
  [ "$(jq -r '.logs[0] | "\(.origin) \([.compared[].fact] | join(","))"' <<<"$output")" = "another-machine compute_capability" ]
  # the GPU's name (two points) against the capability (one): the name that differs wins
  printf '%s\n' "GPU 0: Tesla P40 (UUID: GPU-5d1b8c0e-1a2b-4c3d-9e8f-0a1b2c3d4e5f)" > "$BATS_TEST_TMPDIR/both.log"
  cat "$BATS_TEST_TMPDIR/cc.log" >> "$BATS_TEST_TMPDIR/both.log"
  gpus t4
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/both.log"
  [ "$(jq -r '.logs[0] | "\(.origin) \([.compared[] | "\(.fact):\(.same)"] | join(","))"' <<<"$output")" = \
    "another-machine gpu_name:false,compute_capability:true" ]
  # a tie (the host's name, two points, against the name of a GPU the table does not know, whose
  # capability is not read from it): this machine's
  mkdir -p "$FAKE_ROOT/etc"; echo lab-t4 > "$FAKE_ROOT/etc/hostname"
  printf '%s\n' 'bob@lab-t4:~$ nvidia-smi -L' "GPU 0: NVIDIA Prototype X1 (UUID: GPU-5d1b8c0e-1a2b-4c3d-9e8f-0a1b2c3d4e5f)" > "$BATS_TEST_TMPDIR/tie.log"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/tie.log"
  [ "$(jq -r '.logs[0] | "\(.origin) \([.compared[] | "\(.fact):\(.same)"] | join(","))"' <<<"$output")" = \
    "this-machine host:true,gpu_name:false" ]
}

@test "facts the log states: GPU, CUDA, torch, gcc, driver, -gencode and TORCH_CUDA_ARCH_LIST" {
  cat > "$BATS_TEST_TMPDIR/env.log" <<'LOG'
PyTorch version: 2.1.2+cu121
CUDA used to build PyTorch: 12.1
GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Nvidia driver version: 535.104.05
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0)
Cuda compilation tools, release 12.1, V12.1.105
export TORCH_CUDA_ARCH_LIST="8.0;8.6+PTX"
nvcc -c a.cu -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_86,code=compute_86 -gencode arch=compute_90,code=sm_90
RuntimeError: CUDA error: invalid device function
LOG
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/env.log"
  assert_clean_stderr
  [ "$(jq -r '.logs[0].facts | "\(.torch_version)|\(.torch_cuda)|\(.gcc_version)|\(.driver_version)|\(.gpu_name)|\(.nvcc_version)|\(.torch_cuda_arch_list)"' <<<"$output")" = \
    "2.1.2+cu121|12.1|11.4.0|535.104.05|NVIDIA A100-SXM4-80GB|12.1|8.0;8.6+PTX" ]
  [ "$(jq -r '.logs[0].facts.build_archs | sort | join(",")' <<<"$output")" = "compute_86,sm_80,sm_86,sm_90" ]
  [ "$(jq -r '.logs[0].origin' <<<"$output")" = unknown ]
}

@test "a log from a driver 535 machine is judged with CUDA 12.2 (issue 39)" {
  cat > "$BATS_TEST_TMPDIR/d535.log" <<'LOG'
Driver Version: 535.104.05
Cuda compilation tools, release 13.0, V13.0.88
RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.
LOG
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/d535.log"
  assert_clean_stderr
  [ "$status" -eq 1 ]
  [ "$(jq -r '.logs[0].facts | "\(.driver_version) \(.driver_cuda)"' <<<"$output")" = "535.104.05 12.2" ]
  [ "$(jq -r '.findings[0].id' <<<"$output")" = driver-too-old ]
  jq -e '.findings[0].confirmed_by | index("driver_older_than_toolkit")' <<<"$output"
  [[ "$(jq -r '.findings[0].cause' <<<"$output")" == *"driver 535.104.05 supports CUDA 12.2, older than the CUDA 13.0 toolkit"* ]]
  # judged without this machine: no local toolkit path is made up; the words name the release
  [ "$(jq -r '.findings[0].fix | length' <<<"$output")" = 1 ]
  jq -e '.findings[0].notes | any(contains("its driver runs CUDA 12.2); install CUDA 12.9 on that machine (msda-doctor fetch --cuda 12.9.1)"))' <<<"$output"
}

@test "the driver's CUDA version as nvidia-smi, torch, deviceQuery and a bare driver release say it" {
  check() {
    printf '%s\n' "$1" > "$BATS_TEST_TMPDIR/d.log"
    run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/d.log"
    assert_clean_stderr
    [ "$(jq -r '.logs[0].facts.driver_cuda' <<<"$output")" = "$2" ] || { echo "$1: $(jq -c .logs[0].facts <<<"$output")" >&2; return 1; }
  }
  check "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |" 12.2
  check "Driver Version: 470.82.01" 11.4
  check "Nvidia driver version: 535.104.05" 12.2
  check "CUDA Driver Version: 12020" 12.2
  check "  CUDA Driver Version / Runtime Version          11.4 / 11.8" 11.4
  check "RuntimeError: The NVIDIA driver on your system is too old (found version 12040)." 12.4
  check "nothing about drivers" null
}

@test "driver-too-old from a log alone: the toolkit it leaves out is explained by the driver's CUDA, or by its absence" {
  printf '%s\n' "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version" > "$BATS_TEST_TMPDIR/old.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/old.log"
  assert_clean_stderr
  [ "$(finding driver-too-old | jq -r '.notes[-1]')" = \
    "Left out: a command that needs a CUDA toolkit whose SASS the driver loads: the driver's CUDA version is not known." ]
  printf '%s\n' "| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |" \
    "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version" > "$BATS_TEST_TMPDIR/old.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/old.log"
  [[ "$(finding driver-too-old | jq -r '.notes[-1]')" == \
    "Left out: a command that needs a CUDA toolkit whose SASS the driver loads: the toolkits of the log's machine are not known (its driver runs CUDA 12.2); install CUDA 12."* ]]
}

@test "'invalid device function': both readings, the other arch first when the build left the GPU out" {
  cat > "$BATS_TEST_TMPDIR/idf.log" <<'LOG'
Device 0: "Tesla T4"
  CUDA Capability Major/Minor version number:    7.5
nvcc -c ms_deform_attn_cuda.cu -gencode=arch=compute_61,code=sm_61
CUDA used to build PyTorch: 12.1
Cuda compilation tools, release 12.1, V12.1.105
RuntimeError: CUDA error: invalid device function
LOG
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/idf.log"
  [ "$(ids)" = no-kernel-image ]
  f=$(finding no-kernel-image)
  [ "$(jq -r '[.causes[] | "\(.id):\(.score)"] | join(" ")' <<<"$f")" = "no-kernel-image:1 cuda-version-mismatch:-1" ]
  jq -e '.causes[0].for == ["log_build_archs_lack_gpu_arch"] and .causes[1].against == ["torch_cuda_major_matches"]' <<<"$f"
  [ "$(jq -r '.fix[0]' <<<"$f")" = "msda-doctor build --arch sm_75" ]
  run --separate-stderr diagnose --no-probe "$BATS_TEST_TMPDIR/idf.log"
  [[ "$output" == *"The message has 2 readings, most likely first:"* ]]
  [[ "$output" == *"      2. cuda-version-mismatch: The same message comes from an extension compiled with another CUDA toolkit"* ]]
}

@test "'invalid device function': another toolkit first when the build covered the GPU and the CUDA majors differ" {
  cat > "$BATS_TEST_TMPDIR/idf2.log" <<'LOG'
GPU 0 compute capability: 8.0
CUDA used to build PyTorch: 11.8
Cuda compilation tools, release 12.1, V12.1.105
cmake --build . -- nvcc -c ms_deform_attn_cuda.cu -gencode=arch=compute_80,code=sm_80
RuntimeError: CUDA error: invalid device function
LOG
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/idf2.log"
  [ "$(ids)" = cuda-version-mismatch ]
  f=$(finding cuda-version-mismatch)
  [ "$(jq -r '"\(.matched) \([.causes[].id] | join(","))"' <<<"$f")" = "no-kernel-image cuda-version-mismatch,no-kernel-image" ]
  [[ "$(jq -r '.causes[0].cause' <<<"$f")" == *"(nvcc 12.1, torch's CUDA 11.8)"* ]]
  jq -e '.confirmed_by == ["torch_cuda_major_differs"]' <<<"$f"
}

@test "setup.py's 'Cuda is not availabel': no GPU first, unless the log shows nvcc missing" {
  run --separate-stderr diagnose --no-probe --json "$LOGS/cuda-unavailable-at-build.log"
  [ "$(jq -r '[.findings[0].causes[].id] | join(",")' <<<"$output")" = "cuda-unavailable-at-build,cuda-home-missing" ]
  jq -e '.findings[0].causes[0].for | index("hint:no_cuda_runtime")' <<<"$output"
  # the shell's "nvcc: not found" is cuda-home-missing by itself, before any reading
  printf '%s\n' '/bin/sh: 1: nvcc: not found' "NotImplementedError: Cuda is not availabel" > "$BATS_TEST_TMPDIR/sh.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/sh.log"
  [ "$(jq -r '[.findings[] | "\(.id):\(.matched)"] | join(" ")' <<<"$output")" = "cuda-home-missing:cuda-home-missing" ]
  # torch's own word for a CUDA_HOME without nvcc is a hint only: the reading decides
  cat > "$BATS_TEST_TMPDIR/no-nvcc.log" <<'LOG'
$ python setup.py build install
FileNotFoundError: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc'
Traceback (most recent call last):
  File "setup.py", line 69, in <module>
    ext_modules=get_extensions(),
  File "setup.py", line 43, in get_extensions
    raise NotImplementedError('Cuda is not availabel')
NotImplementedError: Cuda is not availabel
LOG
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/no-nvcc.log"
  [ "$(ids)" = cuda-home-missing ]
  [ "$(jq -r '.findings[0] | "\(.matched) \([.causes[] | "\(.id):\(.score)"] | join(","))"' <<<"$output")" = \
    "cuda-unavailable-at-build cuda-home-missing:1,cuda-unavailable-at-build:-1" ]
  ! jq -r '.findings[0].fix[]' <<<"$output" | grep -q CUDA_HOME
  jq -e '.findings[0].notes | any(. == "Left out: a command that needs a CUDA toolkit'"'"'s folder: the log does not say where its machine'"'"'s toolkit is.")' <<<"$output"
}

@test "a missing torch library: import order, or an extension built against another torch" {
  python_json '{"executable": "/home/kim/venv/bin/python", "version": "3.11.9", "msda_importable": true, "binaries": [],
                "torch": {"version": "2.4.1", "cuda": "12.1", "lib": "'"$BATS_TEST_TMPDIR"'/torch/lib"}}'
  mkdir -p "$BATS_TEST_TMPDIR/torch/lib"; : > "$BATS_TEST_TMPDIR/torch/lib/libc10.so"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/libc10-import-order.log"
  [ "$(jq -r '[.findings[0].causes[].id] | join(",")' <<<"$output")" = "shared-lib-not-found,torch-abi-mismatch" ]
  cat > "$BATS_TEST_TMPDIR/split.log" <<'LOG'
>>> import torch
>>> import MultiScaleDeformableAttention
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
ImportError: libtorch_cuda_cu.so: cannot open shared object file: No such file or directory
LOG
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/split.log"
  [ "$(ids)" = torch-abi-mismatch ]
  f=$(finding torch-abi-mismatch)
  [ "$(jq -r '[.causes[] | "\(.id):\(.score)"] | join(",")' <<<"$f")" = "torch-abi-mismatch:2,shared-lib-not-found:-2" ]
  [[ "$(jq -r .cause <<<"$f")" == "The extension was built against another torch: it needs libtorch_cuda_cu.so,"* ]]
}

@test "a log that matched nothing says so, even when the machine has findings; JSON keeps each finding's source" {
  gpus t4; toolkit 11.8; gxx 12 11
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" "$LOGS/clean-train.log"
  [ "$status" -eq 1 ]
  [[ "$output" == *"no known failure in $LOGS/clean-train.log"* ]]
  [[ "$output" == *"[x] host-compiler-unsupported: the host compiler is newer than nvcc supports (found by the probes on this machine)"* ]]
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/clean-train.log" "$LOGS/magma-missing.log"
  [ "$(jq -r '[.logs[].findings] | join(",")' <<<"$output")" = "0,1" ]
  [ "$(jq -r '[.findings[] | "\(.id):\(.source)"] | join(" ")' <<<"$output")" = "magma-missing:log host-compiler-unsupported:probe" ]
}

@test "facts read from this machine's files: sources, libraries on the search path, libstdc++ versions" {
  src="$BATS_TEST_TMPDIR/ops/src"
  mkdir -p "$src"; : > "$src/ms_deform_attn.cpp"; : > "$src/ms_deform_attn.cu"
  printf 'ninja: error: build.ninja:40: multiple rules generate %s/ops/build/temp.linux-x86_64-cpython-310%s/ms_deform_attn.o [-w dupbuild=err]\n' \
    "$BATS_TEST_TMPDIR" "$src" > "$BATS_TEST_TMPDIR/dup.log"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/dup.log"
  jq -e '.confirmed_by == ["source_basename_collision"]' <<<"$(finding duplicate-object-name)"
  [ "$(finding duplicate-object-name | jq -r '.fix[0]')" = "git mv $src/ms_deform_attn.cu $src/ms_deform_attn_cuda.cu" ]

  printf '    AT_DISPATCH_FLOATING_TYPES(value.type(), "ms_deform_attn_forward_cuda", ([&] {\n' > "$src/ms_deform_attn_cuda.cu"
  printf '%s/ms_deform_attn_cuda.cu(64): error: no suitable conversion function from "const at::DeprecatedTypeProperties" to "c10::ScalarType" exists\n' \
    "$src" > "$BATS_TEST_TMPDIR/type.log"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/type.log"
  jq -e '.confirmed_by | index("source_uses_tensor_type")' <<<"$(finding deprecated-torch-api)"
  # the log's source not on this machine (a log from elsewhere): unknown, neither side
  rm "$src/ms_deform_attn_cuda.cu"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/type.log"
  assert_clean_stderr
  jq -e '(.confirmed_by + .ruled_out_by) | index("source_uses_tensor_type") | not' <<<"$(finding deprecated-torch-api)"

  mkdir -p "$FAKE_ROOT/usr/lib"; : > "$FAKE_ROOT/usr/lib/libcudart.so.11.0"
  printf 'ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n' > "$BATS_TEST_TMPDIR/cudart.log"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/cudart.log"
  jq -e '.ruled_out_by == ["missing_lib_on_search_path"]' <<<"$(finding shared-lib-not-found)"

  lib="$BATS_TEST_TMPDIR/conda/lib"
  mkdir -p "$lib"
  printf 'GLIBCXX_3.4.29 { global: *; };\n' > "$BATS_TEST_TMPDIR/v.map"
  printf 'int f(void) { return 1; }\n' > "$BATS_TEST_TMPDIR/f.c"
  cc -shared -fPIC -Wl,--version-script="$BATS_TEST_TMPDIR/v.map" -o "$lib/libstdc++.so.6" "$BATS_TEST_TMPDIR/f.c"
  for want in 3.4.29 3.4.30; do
    printf "ImportError: %s/libstdc++.so.6: version \`GLIBCXX_%s' not found (required by /x/MultiScaleDeformableAttention.so)\n" \
      "$lib" "$want" > "$BATS_TEST_TMPDIR/cxx.log"
    run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$BATS_TEST_TMPDIR/cxx.log"
    f=$(finding libstdcxx-abi-mismatch)
    if [ "$want" = 3.4.29 ]; then jq -e '.ruled_out_by == ["libstdcxx_provides_required"]' <<<"$f"
    else jq -e '.confirmed_by == ["libstdcxx_older_than_required"]' <<<"$f"; fi
  done
}

@test "facts read from the installed op: no half-precision kernels, 32-bit indices" {
  gpus t4; install_op f118-sm61-ptx.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json "$LOGS/dtype-half-unsupported.log"
  jq -e '.confirmed_by == ["binary_lacks_half_kernels"]' <<<"$(finding dtype-half-unsupported)"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json "$LOGS/illegal-memory-access.log"
  jq -e '.confirmed_by | index("binary_uses_int32_indices")' <<<"$(finding illegal-memory-access)"
}

@test "the real Python probe reads torch's version, ABI and MAGMA without importing it" {
  [ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
  site="$BATS_TEST_TMPDIR/site"; torch="$site/torch"
  mkdir -p "$torch/lib" "$torch/include/ATen/cuda"
  printf 'raise SystemExit("torch was imported")\n' > "$torch/__init__.py"
  printf "from typing import Optional\n__version__ = '2.3.1+cu121'\ndebug = False\ncuda: Optional[str] = '12.1'\n" > "$torch/version.py"
  printf '#define AT_MAGMA_ENABLED() 0\n' > "$torch/include/ATen/cuda/CUDAConfig.h"
  printf 'int _ZNSt7__cxx1112basic_stringIcE1fEv(void) { return 1; }\n' > "$BATS_TEST_TMPDIR/c10.c"
  cc -shared -fPIC -o "$torch/lib/libc10.so" "$BATS_TEST_TMPDIR/c10.c"
  : > "$site/MultiScaleDeformableAttention.so"
  PYTHONPATH="$site" run --separate-stderr diagnose --python /usr/bin/python3 --root "$FAKE_ROOT" --json
  [ "$(check_status python)" = ok ]
  [ "$(jq -r '.machine.python | "\(.torch) \(.torch_cuda) \(.cxx11_abi) \(.has_magma) \(.msda_importable)"' <<<"$output")" = \
    "2.3.1+cu121 12.1 true false true" ]
  jq -e --arg p "$(realpath "$site")/MultiScaleDeformableAttention.so" '.machine.binaries | any(.path == $p)' <<<"$output"
}

@test "the Python probe names each installed framework with an MSDA op, which op it runs here and what switches it" {
  [ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
  site="$BATS_TEST_TMPDIR/site"
  mkdir -p "$site/torch/lib" "$site/transformers" "$site/kernels" "$site/mmcv" "$site/groundingdino" \
           "$site/groundingdino-0.4.0.dist-info" "$site/detrex" "$BATS_TEST_TMPDIR/cwd/msda"
  printf 'raise SystemExit("torch was imported")\n' > "$site/torch/__init__.py"
  printf "__version__ = '2.4.0'\ncuda = '12.1'\n" > "$site/torch/version.py"
  # a version in __init__.py, in version.py, only in the .dist-info's name, and none a string
  printf 'raise SystemExit("transformers was imported")\n__version__ = "5.24.0"\n' > "$site/transformers/__init__.py"
  printf '__version__ = importlib.metadata.version("kernels")\n' > "$site/kernels/__init__.py"
  : > "$site/mmcv/__init__.py"
  printf "__version__ = '2.2.0'  # the release\n" > "$site/mmcv/version.py"
  : > "$site/mmcv/_ext.cpython-311-x86_64-linux-gnu.so"
  : > "$site/groundingdino/__init__.py"
  : > "$site/detrex/__init__.py"
  # a folder named msda without __init__.py in the working directory is not msda
  cd "$BATS_TEST_TMPDIR/cwd"
  PYTHONPATH="$site" run --separate-stderr diagnose --python /usr/bin/python3 --root "$FAKE_ROOT" --json
  [ "$(jq -c '.machine.python.frameworks' <<<"$output")" = \
    '{"transformers":"5.24.0","kernels":null,"mmcv":"2.2.0","groundingdino":"0.4.0","detrex":null}' ]
  details=$(jq -r '.checks[] | select(.id == "python") | .details[]' <<<"$output")
  grep -qx 'transformers 5.24.0: runs MSDA in PyTorch (grid_sample), or a Hub build where a model is loaded with use_kernels=True (kernels (version unknown)); the msda wheel and msda.patch("transformers") switch it to msda' <<<"$details"
  grep -qx "mmcv 2.2.0: runs its own compiled MSDA op, $(realpath "$site")/mmcv/_ext.cpython-311-x86_64-linux-gnu.so (the binaries check says where it runs); the msda wheel and msda.patch(\"mmcv\") switch it to msda" <<<"$details"
  grep -qx 'groundingdino 0.4.0 without its compiled _C: it runs MSDA in PyTorch, on the CPU only; the msda wheel and msda.patch("groundingdino") switch it to msda' <<<"$details"
  grep -qx 'detrex (version unknown) without its compiled _C: its MSDA layers fail on a GPU; the msda wheel and msda.patch("detrex") switch it to msda' <<<"$details"
  # msda installed: the switch is named as there
  mkdir -p "$site/msda" && printf "__version__ = '0.1.0'\n" > "$site/msda/_version.py" && : > "$site/msda/__init__.py"
  PYTHONPATH="$site" run --separate-stderr diagnose --python /usr/bin/python3 --root "$FAKE_ROOT" --json
  [ "$(jq -r '.machine.python.frameworks.msda' <<<"$output")" = 0.1.0 ]
  details=$(jq -r '.checks[] | select(.id == "python") | .details[]' <<<"$output")
  grep -q 'msda.patch("transformers") switches it to msda (installed)$' <<<"$details"
  # mmcv without its compiled ops (mmcv-lite) is switched as well
  rm "$site/mmcv/_ext.cpython-311-x86_64-linux-gnu.so"
  PYTHONPATH="$site" run --separate-stderr diagnose --python /usr/bin/python3 --root "$FAKE_ROOT" --json
  jq -r '.checks[] | select(.id == "python") | .details[]' <<<"$output" | grep -qx 'mmcv 2.2.0 without its compiled ops (mmcv-lite, or built with no CUDA): its MultiScaleDeformableAttention fails on a GPU; msda.patch("mmcv") switches it to msda (installed)'
  grep -qx 'detrex (version unknown) without its compiled _C: its MSDA layers fail on a GPU; msda.patch("detrex") switches it to msda (installed)' <<<"$details"
}

@test "a framework's version is named whole: one character, the longest kept; an empty one is unknown" {
  python_json '{"executable": "/opt/fake/bin/python3", "version": "3.10.12", "msda_importable": false,
                "binaries": [], "torch": {"version": "2.5.1+cu121", "cuda": "12.1", "lib": "/opt/venv/lib/torch/lib"},
                "frameworks": [{"name": "detrex", "version": "1"}, {"name": "groundingdino", "version": ""}]}'
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  assert_clean_stderr
  details=$(jq -r '.checks[] | select(.id == "python") | .details[]' <<<"$output")
  grep -qx 'detrex 1 without its compiled _C: its MSDA layers fail on a GPU; the msda wheel and msda.patch("detrex") switch it to msda' <<<"$details"
  grep -qx 'groundingdino (version unknown) without its compiled _C: it runs MSDA in PyTorch, on the CPU only; the msda wheel and msda.patch("groundingdino") switch it to msda' <<<"$details"
  # the longest version the probe keeps (47 bytes) is not cut from the transformers line either
  v=0.4.0.dev20260101+g0123456789abcdef0123456789ab
  [ ${#v} -eq 47 ]
  python_json '{"executable": "/opt/fake/bin/python3", "version": "3.10.12", "msda_importable": false,
                "binaries": [], "torch": {"version": "2.5.1+cu121", "cuda": "12.1", "lib": "/opt/venv/lib/torch/lib"},
                "frameworks": [{"name": "transformers", "version": "4.57.6"}, {"name": "kernels", "version": "'"$v"'"}]}'
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  jq -r '.checks[] | select(.id == "python") | .details[]' <<<"$output" |
    grep -qxF "transformers 4.57.6: runs MSDA in PyTorch (grid_sample), or a Hub build where a model is loaded with use_kernels=True (kernels $v); the msda wheel and msda.patch(\"transformers\") switch it to msda"
}

@test "toolkit-library-not-found: the fix names the toolkit's library folder, lib64 in NVIDIA's layout, the multiarch folder in Debian's" {
  gpus t4; toolkit 12.4; gxx 12
  mkdir -p "$BATS_TEST_TMPDIR/cuda-12.4/include" "$BATS_TEST_TMPDIR/cuda-12.4/lib64/stubs"
  : > "$BATS_TEST_TMPDIR/cuda-12.4/include/cuda.h"
  lib="$BATS_TEST_TMPDIR/cuda-12.4/lib64"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/toolkit-library-not-found.log"
  fix=$(jq -r '.findings[] | select(.id == "toolkit-library-not-found") | .fix[]' <<<"$output")
  grep -qxF "export LIBRARY_PATH=$lib:$lib/stubs:\$LIBRARY_PATH" <<<"$fix" || { echo "$fix" >&2; return 1; }
  # Debian's nvidia-cuda-toolkit: no include/ beside bin/, its headers in /usr/include, its
  # libraries (libcudart.so, stubs/libcuda.so) in the multiarch folder
  [ -e /usr/include/cuda.h ] || skip "no /usr/include/cuda.h (Debian's nvidia-cuda-dev) here"
  rm -rf "$BATS_TEST_TMPDIR/cuda-12.4/include"
  lib="/usr/lib/$(uname -m)-linux-gnu"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/toolkit-library-not-found.log"
  fix=$(jq -r '.findings[] | select(.id == "toolkit-library-not-found") | .fix[]' <<<"$output")
  grep -qxF "export LIBRARY_PATH=$lib:$lib/stubs:\$LIBRARY_PATH" <<<"$fix" || { echo "$fix" >&2; return 1; }
  grep -qF "ls $lib/libcudart.so* $lib/stubs/libcudart.so*" <<<"$fix" || { echo "$fix" >&2; return 1; }
}
