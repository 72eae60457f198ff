#!/usr/bin/env bats
# The probes against fake machines: driver API, nvidia-smi (and its cross-check), toolkits and
# host compilers, Python and torch, installed binaries; findings from the probes alone; the JSON
# fields, --list and the exit codes.
load diag_helpers

@test "a healthy H200 with nvidia-smi: every GPU fact from the driver, exit 0" {
  gpus h200; smi ok
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$status" -eq 0 ]
  assert_clean_stderr
  [ "$(jq -r '.machine.gpus[0] | "\(.name) \(.arch) \(.compute_capability) \(.multiprocessors) \(.registers_per_block) \(.memory_bytes)"' <<<"$output")" = \
    "NVIDIA H200 sm_90 9.0 132 65536 150109880320" ]
  [ "$(jq -r '.machine.driver | "\(.release) \(.cuda) \(.api_version)"' <<<"$output")" = "580.159.04 13.0 13000" ]
  [ "$(check_status gpu)" = ok ]
  [ "$(check_status nvidia-smi)" = ok ]
  [ "$(jq '.findings | length' <<<"$output")" -eq 0 ]
}

@test "nvidia-smi of a 470 driver rejects compute_cap: asked again without it, still cross-checked" {
  gpus old-driver; smi 470
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  assert_clean_stderr
  [ "$(jq -r '.machine.nvidia_smi | "\(.answered) \(.compute_cap_fallback) \(.driver)"' <<<"$output")" = "true true 470.256.02" ]
  [ "$(jq -r '.machine.nvidia_smi.gpus[0] | "\(.name)|\(.compute_capability)"' <<<"$output")" = "NVIDIA A100-SXM4-40GB|null" ]
  [ "$(check_status nvidia-smi)" = ok ]
}

@test "nvidia-smi and the driver API disagree: the mismatch is reported as a warning" {
  gpus p40
  # this nvidia-smi describes another machine (a T4) than the driver does (a P40)
  rm -f "$BIN/nvidia-smi"   # a new file, not one written through a link into tests/fakes
  printf '#!/bin/bash\nMSDA_FAKE_GPUS=%s exec %s "$@"\n' "$GPUS/t4.json" "$FAKES/nvidia-smi-ok.sh" > "$BIN/nvidia-smi"
  chmod +x "$BIN/nvidia-smi"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$(jq -r '.machine.nvidia_smi.answered' <<<"$output")" = true ]
  [ "$(check_status nvidia-smi)" = warning ]
  jq -e '.checks[] | select(.id == "nvidia-smi") | .problems | any(contains("nvidia-smi says '"'"'Tesla T4'"'"', the driver API '"'"'Tesla P40'"'"'"))' <<<"$output"
  jq -e '.checks[] | select(.id == "nvidia-smi") | .problems | any(contains("compute capability 7.5, the driver API 6.1"))' <<<"$output"
}

@test "nvidia-smi that cannot talk to the driver fails its check; the others still run" {
  gpus p40; smi no-driver
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$status" -eq 1 ]
  [ "$(check_status nvidia-smi)" = fail ]
  [ "$(check_status gpu)" = ok ]
  [ "$(jq '.checks | length' <<<"$output")" -eq 7 ]
}

@test "the toolkit's stub libcuda (cuInit 34) fails the GPU check and says why" {
  gpus stub
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$status" -eq 1 ]
  [ "$(check_status gpu)" = fail ]
  jq -e '.checks[0].problems[0] | contains("stub libcuda")' <<<"$output"
}

@test "no driver library at all: a warning, not a failure, and the machine has no GPU" {
  export MSDA_LIBCUDA=/nonexistent/libcuda.so.1
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$status" -eq 0 ]
  [ "$(check_status gpu)" = warning ]
  [ "$(jq '.machine.gpus | length' <<<"$output")" -eq 0 ]
  [ "$(jq -r '.machine.driver.loaded' <<<"$output")" = false ]
}

@test "a driver without GPUs: a warning with the hint, exit 0" {
  gpus none
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT"
  [ "$status" -eq 0 ]
  [[ "$output" == *"[!] GPUs (driver API): driver CUDA 13.0; no GPU visible"* ]]
  [[ "$output" == *"CUDA_VISIBLE_DEVICES"* ]]
  # the summary agrees with the exit status: warnings are no problem, and are counted as warnings
  [[ "$output" != *"Found problems"* ]]
  [[ "$output" == *"warning"* ]]
}

@test "a Python that cannot be run is an error of its own check; every other check still runs" {
  gpus t4
  run --separate-stderr diagnose --python /nonexistent/python3 --root "$FAKE_ROOT" --json
  [ "$status" -eq 1 ]
  [ "$(check_status python)" = error ]
  [ "$(check_status gpu)" = ok ]
  [ "$(jq -r '.machine.python' <<<"$output")" = null ]
}

@test "driver older than the toolkit (550 vs CUDA 13.0): driver-too-old from the probes alone" {
  gpus old-driver-h100; smi ok; toolkit 13.0; gxx 13
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$status" -eq 1 ]
  [ "$(ids)" = driver-too-old ]
  f=$(finding driver-too-old)
  [ "$(jq -r .source <<<"$f")" = probe ]
  [[ "$(jq -r .cause <<<"$f")" == *"550.144.03 supports CUDA 12.4, older than the CUDA 13.0 toolkit here, which needs driver 580.65.06"* ]]
  # no toolkit here writes SASS that a CUDA 12.4 driver loads: the command is left out, the words
  # name the release to fetch (the newest 12.x targeting sm_90: 12.x SASS loads from driver 12.0)
  [ "$(jq -r '.fix | length' <<<"$f")" = 1 ]
  jq -e '.notes | any(. == "Left out: a command that needs a CUDA toolkit whose SASS the driver loads: no toolkit installed here is one (the driver runs CUDA 12.4); install CUDA 12.9 (msda-doctor fetch --cuda 12.9.1), then build again.")' <<<"$f"
  [ "$(check_status toolkits)" = fail ]
}

@test "driver-too-old's nvidia-smi command only where nvidia-smi is installed; else the words say why" {
  gpus old-driver-h100; smi ok; toolkit 13.0; toolkit 12.4; gxx 13
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$(finding driver-too-old | jq -r '.fix[0]')" = "nvidia-smi --query-gpu=driver_version --format=csv,noheader" ]
  rm "$BIN/nvidia-smi"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  f=$(finding driver-too-old)
  jq -e '.fix | all(startswith("nvidia-smi") | not)' <<<"$f"
  jq -e '.notes | any(startswith("Left out: a command that needs nvidia-smi: nvidia-smi is not installed here"))' <<<"$f"
}

@test "driver-too-old proposes an installed toolkit whose SASS the driver loads, by its real folder" {
  gpus old-driver-h100; smi ok; toolkit 13.0; toolkit 12.4; toolkit 11.8; gxx 13
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$(ids)" = driver-too-old ]
  # the newest of those the 550 driver (CUDA 12.4) loads and that target sm_90: 12.4, not 11.8
  [ "$(finding driver-too-old | jq -r '.fix[1]')" = "msda-doctor build --toolkit $BATS_TEST_TMPDIR/cuda-12.4 --arch sm_90" ]
}

@test "gcc newer than nvcc accepts: host-compiler-unsupported, with the older g++ to use" {
  gpus t4; toolkit 11.8; gxx 12 11
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$status" -eq 1 ]
  [ "$(ids)" = host-compiler-unsupported ]
  [[ "$(finding host-compiler-unsupported | jq -r .cause)" == "nvcc 11.8 accepts host gcc up to 11, and the default g++ here is gcc 12"* ]]
  [ "$(finding host-compiler-unsupported | jq -r '.fix[0]')" = "sudo apt-get install gcc-11 g++-11" ]
  jq -e '.checks[] | select(.id == "toolkits") | .problems | any(endswith("use -ccbin '"$BIN"'/g++-11"))' <<<"$output"
}

@test "the same gcc within the limit: no finding" {
  gpus t4; toolkit 11.8; gxx 11
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$status" -eq 0 ]
  [ "$(ids)" = "" ]
}

@test "torch built for CUDA 13.0 on a driver of CUDA 12.2: the Python check fails and says so; torch of 12.1 does not" {
  gpus p40
  python_json '{"executable": "/opt/venv/bin/python", "version": "3.12.3", "msda_importable": false, "binaries": [],
                "torch": {"version": "2.9.0+cu130", "cuda": "13.0", "lib": "/opt/venv/lib/torch/lib"}}'
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  assert_clean_stderr
  [ "$(check_status python)" = fail ]
  [ "$(jq -c '.checks[] | select(.id == "python") | .problems' <<<"$output")" = \
    '["torch is built for CUDA 13.0 but the driver supports CUDA 12.2"]' ]
  python_json '{"executable": "/opt/venv/bin/python", "version": "3.12.3", "msda_importable": false, "binaries": [],
                "torch": {"version": "2.5.1+cu121", "cuda": "12.1", "lib": "/opt/venv/lib/torch/lib"}}'
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$(check_status python)" = ok ]
}

@test "torch built with CUDA 12.1, nvcc 13.0: cuda-version-mismatch, pointing at a 12.x toolkit" {
  gpus h100; toolkit 13.0; toolkit 12.4; gxx 13
  python_json '{"executable": "/opt/venv/bin/python", "version": "3.12.3", "msda_importable": false, "binaries": [],
                "torch": {"version": "2.5.1+cu121", "cuda": "12.1",
                          "lib": "/opt/venv/lib/torch/lib"}}'
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$(ids)" = cuda-version-mismatch ]
  f=$(finding cuda-version-mismatch)
  [ "$(jq -r '.fix[0]' <<<"$f")" = "export CUDA_HOME=$BATS_TEST_TMPDIR/cuda-12.4 PATH=$BATS_TEST_TMPDIR/cuda-12.4/bin:\$PATH" ]
  # no libc10.so nor CUDAConfig.h under that lib folder: the ABI and MAGMA unknown, not "no"
  [ "$(jq -r '.machine.python | "\(.torch) \(.torch_cuda) \(.torch_lib) \(.cxx11_abi) \(.has_magma)"' <<<"$output")" = \
    "2.5.1+cu121 12.1 /opt/venv/lib/torch/lib null null" ]
  [ "$(check_status python)" = fail ]
}

@test "two different GPUs: each judged; an sm_52 binary runs on neither" {
  gpus two-gpus; install_op f118-sm52.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json
  [ "$status" -eq 1 ]
  [ "$(jq -r '[.machine.gpus[].arch] | join(",")' <<<"$output")" = "sm_61,sm_75" ]
  [ "$(jq -r '[.machine.binaries[0].gpus[].runs] | join(",")' <<<"$output")" = "cannot-run,cannot-run" ]
  [ "$(ids)" = no-kernel-image ]
  jq -e '.findings[0].confirmed_by | index("multiple_gpus") | not' <<<"$output"
}

@test "sm_61 SASS with compute_61 PTX on P40 + T4: SASS on one, PTX JIT on the other, no finding" {
  gpus two-gpus; install_op f118-sm61-ptx.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json
  [ "$status" -eq 0 ]
  [ "$(jq -r '[.machine.binaries[0].gpus[] | "\(.runs):\(.code)"] | join(",")' <<<"$output")" = "sass:sm_61,ptx-jit:compute_61" ]
  [ "$(check_status binaries)" = warning ]
}

@test "seventeen GPUs, one more than the machine's table: the first sixteen are judged, the driver's count kept" {
  # sixteen P40s, then a T4 that does not fit in the table (MD_DIAG_MAX_GPUS) and must not be read
  jq '.devices = ([range(16) as $i | .devices[0] | .pci_bus_id = "0000:\($i + 16):00.0"]
                  + [.devices[0] | .name = "Tesla T4" | .cc = "7.5" | .pci_bus_id = "0000:AF:00.0"])' \
    "$GPUS/p40.json" > "$BATS_TEST_TMPDIR/seventeen.json"
  export MSDA_FAKE_GPUS="$BATS_TEST_TMPDIR/seventeen.json"
  install_op f13-sm80.so   # one SASS, sm_80: no-kernel-image on each P40, built for another GPU
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json
  assert_clean_stderr
  [ "$status" -eq 1 ]
  [ "$(ids)" = no-kernel-image ]
  [ "$(jq '.machine.gpus | length' <<<"$output")" -eq 16 ]
  [ "$(jq -r '[.machine.gpus[] | "\(.name) \(.arch)"] | unique | join(",")' <<<"$output")" = "Tesla P40 sm_61" ]
  [ "$(jq '.machine.binaries[0].gpus | length' <<<"$output")" -eq 16 ]
  [ "$(jq -r '.checks[] | select(.id == "gpu") | .summary' <<<"$output")" = "17 GPUs, driver CUDA 12.2" ]
}

@test "cuDNN whose folder holds only the fully versioned file (no soname link): found, named by that file" {
  lib="$FAKE_ROOT/usr/lib/x86_64-linux-gnu"
  mkdir -p "$lib"; : > "$lib/libcudnn.so.8.9.7"
  gpus t4
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  assert_clean_stderr
  [ "$(check_status cudnn)" = warning ]
  jq -e --arg d "$lib" '.checks[] | select(.id == "cudnn") | .problems
    | any(startswith($d + "/libcudnn.so.8.9.7 has no unversioned libcudnn.so beside it"))' <<<"$output"
  jq -e '.checks[] | select(.id == "cudnn") | .hints | any(contains("(or install libcudnn8-dev)"))' <<<"$output"
  # beside a soname link, the link names it (libcudnn.so.8, not the file it points to)
  ln -s libcudnn.so.8.9.7 "$lib/libcudnn.so.8"
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  jq -e '.checks[] | select(.id == "cudnn") | .hints | any(startswith("sudo ln -s libcudnn.so.8 "))' <<<"$output"
}

@test "an installed msda wheel runs on an H200 as SASS" {
  gpus h200; smi ok
  [ -e "$MSDA_FIXTURES/f13-multi.so" ] || skip "no CUDA 13 fixture"
  wheel="$BATS_TEST_TMPDIR/dist/msda-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
  mkdir -p "$BATS_TEST_TMPDIR/dist/msda"
  cp "$MSDA_FIXTURES/f13-multi.so" "$BATS_TEST_TMPDIR/dist/msda/libmsda.so"
  (cd "$BATS_TEST_TMPDIR/dist" && zip -q "$wheel" msda/libmsda.so)
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$BATS_TEST_TMPDIR/dist" --json
  [ "$status" -eq 0 ]
  [ "$(jq -r '.machine.binaries[] | select(.path | endswith("!msda/libmsda.so")) | "\(.kind) \(.gpus[0].runs) \(.gpus[0].code)"' <<<"$output")" = \
    "msda-wheel sass sm_90" ]
  [ "$(check_status binaries)" = ok ]
}

@test "the probed driver judges the binaries: CUDA 13.0 sm_80 SASS does not load on driver 470, 11.8's does" {
  gpus old-driver; smi 470; install_op f13-sm80.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json
  [ "$status" -eq 1 ]
  [ "$(jq -r '.machine.binaries[0].gpus[0].runs' <<<"$output")" = cannot-run ]
  jq -e '.checks[] | select(.id == "binaries") | .problems |
         any(contains("with driver 470.256.02 (CUDA 11.4): sm_80 SASS from CUDA 13.0 needs driver >= 580.65.06 (CUDA 13.0)"))' <<<"$output"
  install_op f118-sm80.fatbin
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json
  [ "$(jq -r '.machine.binaries[0].gpus[0] | "\(.runs) \(.code)"' <<<"$output")" = "sass sm_80" ]
  jq -e '.checks[] | select(.id == "binaries") | .details | any(contains("(sm_80 SASS from CUDA 11.8)"))' <<<"$output"
}

@test "binaries the Python probe finds on sys.path are inspected too" {
  gpus p40; install_op f118-sm61-ptx.so
  python_json '{"executable": "/opt/py/bin/python3", "version": "3.10.12", "msda_importable": true,
                "binaries": ["'"$OPS"'/MultiScaleDeformableAttention.cpython-310-x86_64-linux-gnu.so"], "torch": null}'
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  [ "$(jq -r '.machine.binaries[0] | "\(.kind) \(.sass | join(",")) \(.ptx | join(","))"' <<<"$output")" = "extension sm_61 compute_61" ]
}

@test "JSON: the documented fields, and nothing else at the top" {
  gpus p40; smi ok; install_op f118-sm52.so
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --search "$OPS" --json "$LOGS/p40-no-kernel-image.log"
  [ "$(jq -r 'keys_unsorted | join(",")' <<<"$output")" = "checks,findings,logs,machine" ]
  [ "$(jq -r '.checks[0] | keys_unsorted | join(",")' <<<"$output")" = "id,name,status,summary,problems,hints,details" ]
  [ "$(jq -r '[.checks[].id] | join(",")' <<<"$output")" = "gpu,nvidia-smi,jetson,toolkits,python,binaries,cudnn" ]
  jq -e '[.checks[].status] | all(IN("ok", "warning", "fail", "error", "skipped"))' <<<"$output"
  [ "$(jq -r '.findings[0] | keys_unsorted | join(",")' <<<"$output")" = \
    "id,severity,title,cause,evidence,fix,notes,source,judged_on,matched,causes,log,gpu,confirmed_by,ruled_out_by,ambiguous_with" ]
  [ "$(jq -r '.findings[0].log | keys_unsorted | join(",")' <<<"$output")" = "file,line,count" ]
  [ "$(jq -r '.machine | keys_unsorted | join(",")' <<<"$output")" = \
    "probed,gpus,driver,nvidia_smi,jetson,toolkits,host_compiler,python,binaries,cudnn,nccl" ]
  [ "$(jq -r '.logs[0] | keys_unsorted | join(",")' <<<"$output")" = \
    "file,lines,bytes,long_lines,findings,origin,foreign,facts,compared" ]
  [ "$(jq -r '.logs[0].facts | keys_unsorted | join(",")' <<<"$output")" = \
    "host,gpu_name,compute_capability,torch_version,torch_cuda,nvcc_version,gcc_version,driver_version,driver_cuda,build_archs,torch_cuda_arch_list" ]
  [ "$(jq -r '.machine.python | keys_unsorted | join(",")' <<<"$output")" = \
    "python,executable,version,torch,torch_cuda,torch_lib,cxx11_abi,has_magma,msda_importable,frameworks" ]
}

@test "--list: every check and every finding ID of the knowledge base" {
  run --separate-stderr diagnose --list --json
  [ "$status" -eq 0 ]
  [ "$(jq -r '[.findings[].id] | sort | join(",")' <<<"$output")" = \
    "$(jq -r '[.signatures[].id] | sort | join(",")' "$ROOT/recipes/signatures.json")" ]
  [ "$(jq '.findings | length' <<<"$output")" -eq "$(jq '.signatures | length' "$ROOT/recipes/signatures.json")" ]
  [ "$(jq -r '[.checks[].id] | join(",")' <<<"$output")" = "gpu,nvidia-smi,jetson,toolkits,python,binaries,cudnn" ]
  run --separate-stderr diagnose --list
  [[ "$output" == *"  no-kernel-image "* && "$output" == *"  nvidia-smi "* ]]
}

@test "usage errors: an unknown option, a missing value, standard input twice" {
  run --separate-stderr diagnose --frob
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"unknown option '--frob'"* && "$stderr" == *"Try 'msda-doctor diagnose --help'"* ]]
  run --separate-stderr diagnose --python
  [ "$status" -eq 2 ]
  run --separate-stderr diagnose --no-probe - -
  [ "$status" -eq 2 ]
}

@test "--no-probe: no checks, an empty machine" {
  run --separate-stderr diagnose --no-probe --json "$LOGS/clean-train.log"
  [ "$status" -eq 0 ]
  [ "$(jq '.checks | length' <<<"$output")" -eq 0 ]
  [ "$(jq -r '.machine.probed' <<<"$output")" = false ]
}

@test "on a terminal: UTF-8 marks and colour; NO_COLOR gives plain ASCII again" {
  command -v script >/dev/null || skip "no script(1) to make a terminal"
  gpus h200
  run script -qec "$MSDA_DOCTOR diagnose ${PY[*]} --root $FAKE_ROOT" /dev/null
  [[ "$output" == *$'\e[32m[\xe2\x9c\x93]\e[0m GPUs (driver API)'* ]]
  run env NO_COLOR=1 script -qec "$MSDA_DOCTOR diagnose ${PY[*]} --root $FAKE_ROOT" /dev/null
  [[ "$output" == *"[v] GPUs (driver API)"* ]]
  ! LC_ALL=C grep -q $'[\x80-\xff\x1b]' <<<"$output"
}

@test "no Python on PATH: the check is skipped, and the CLI words the option that names one as its hint" {
  gpus t4
  run --separate-stderr diagnose --root "$FAKE_ROOT"
  assert_clean_stderr
  [[ "$output" == *"Python and torch: no python3 on PATH"$'\n'"    ! name one with --python PATH"* ]]
  run --separate-stderr diagnose --root "$FAKE_ROOT" --json
  [ "$(check_status python)" = skipped ]
  jq -e '.checks[] | select(.id == "python") | .hints == ["name one with --python PATH"]' <<<"$output" >/dev/null
  # the binaries found nowhere: the same way, the option that adds folders is the CLI's hint
  jq -e '.checks[] | select(.id == "binaries") | .summary == "none found (no Python probed)"
         and (.hints | index("add folders with --search DIR"))' <<<"$output" >/dev/null
}
