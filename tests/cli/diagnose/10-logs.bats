#!/usr/bin/env bats
# Log analysis alone (--no-probe): every fixture log yields exactly the findings of its .expect,
# root cause first; clean logs yield none; logs are streams (stdin, CRLF, ANSI, noise, long lines).
load diag_helpers

@test "every fixture log gives the findings of its .expect, in order" {
  local failed=0 log name want got
  for log in "$LOGS"/*.log; do
    name=$(basename "$log" .log)
    want=$(grep -v '^[[:space:]]*$' "$LOGS/$name.expect" | tr -d '\r' | paste -sd' ')
    run --separate-stderr diagnose --no-probe --json "$log"
    assert_clean_stderr
    got=$(ids)
    if [ "$got" != "$want" ]; then echo "$name: want '$want' got '$got'" >&2; failed=1; fi
    if [ -n "$want" ] && [ "$status" -ne 1 ]; then echo "$name: exit $status with findings" >&2; failed=1; fi
    if [ -z "$want" ] && [ "$status" -ne 0 ]; then echo "$name: exit $status without findings" >&2; failed=1; fi
  done
  [ "$failed" -eq 0 ]
}

@test "every finding ID has its own fixture log that yields it first" {
  for id in $(diagnose --list --json | jq -r '.findings[].id'); do
    run --separate-stderr diagnose --no-probe --json "$LOGS/$id.log"
    [ "$(jq -r '.findings[0].id' <<<"$output")" = "$id" ] || { echo "$id: $(ids)" >&2; return 1; }
  done
}

@test "clean build and training logs give no finding and exit 0" {
  run --separate-stderr diagnose --no-probe "$LOGS/clean-build.log" "$LOGS/clean-train.log"
  [ "$status" -eq 0 ]
  assert_clean_stderr
  [[ "$output" == *"No issues found!"* ]]
}

@test "'-' reads standard input, with the same findings as the file" {
  run --separate-stderr bash -c '"$MSDA_DOCTOR" diagnose --no-probe --json - < "$1"' _ "$LOGS/multi-failure.log"
  [ "$status" -eq 1 ]
  [ "$(ids)" = "host-compiler-unsupported module-not-built" ]
  [ "$(jq -r '.findings[0].log.file' <<<"$output")" = "-" ]
}

@test "several failures in one log: the root cause first, with its line" {
  run --separate-stderr diagnose --no-probe --json "$LOGS/unknown-cuda-arch.log"
  [ "$(ids)" = "unsupported-gpu-arch no-kernel-image" ]
  first=$(jq -r '.findings[0].log.line' <<<"$output")
  line=$(grep -n -m1 "^ValueError: Unknown CUDA arch" "$LOGS/unknown-cuda-arch.log" | cut -d: -f1)
  [ "$first" = "$line" ]
}

@test "a CRLF log with ANSI colours matches, and the evidence line is clean" {
  run --separate-stderr diagnose --no-probe --json "$LOGS/deprecated-torch-api.log"
  [ "$(ids)" = "deprecated-torch-api" ]
  ev=$(jq -r '.findings[0].evidence[0]' <<<"$output")
  [[ "$ev" != *$'\e'* && "$ev" != *$'\r'* ]]
  run --separate-stderr diagnose --no-probe --json "$LOGS/tx2-too-many-resources.log"
  [[ "$(jq -r '.findings[0].evidence[0]' <<<"$output")" != *$'\r'* ]]
}

@test "binary noise, NUL bytes and a 3 MB line around a failure: found, the long line counted" {
  log="$BATS_TEST_TMPDIR/noisy.log"
  { head -c 200000 /dev/urandom; printf '\n'
    head -c 3000000 /dev/zero | tr '\0' 'a'; printf 'no kernel image is available for execution on the device\n'
    printf '\x1b[1;31mRuntimeError: CUDA error: an illegal memory access was encountered\x1b[0m\r\n'
    head -c 100000 /dev/urandom; } > "$log"
  run --separate-stderr diagnose --no-probe --json "$log"
  assert_clean_stderr
  # the failure at the end of the over-long line is beyond what is kept of it: not matched
  [ "$(ids)" = "illegal-memory-access" ]
  [ "$(jq '.logs[0].long_lines >= 1' <<<"$output")" = true ]
  [ "$(jq '.logs[0].bytes' <<<"$output")" -eq "$(stat -c %s "$log")" ]
}

@test "a failure split from its line end by a read boundary is still found" {
  log="$BATS_TEST_TMPDIR/boundary.log"
  # 65536-byte reads: put the message across the first boundary, an ANSI code across it too
  { head -c 65500 /dev/zero | tr '\0' 'x'; printf '\n'; printf 'ab\x1b[3'; printf '1mtoo many resources requested for launch\n'; } > "$log"
  run --separate-stderr diagnose --no-probe --json "$log"
  [ "$(ids)" = "launch-out-of-resources" ]
}

@test "placeholders the log fills: the file of a checksum mismatch, the gcc limit, the im2col step" {
  run --separate-stderr diagnose --no-probe --json "$LOGS/md5-mismatch.log"
  [ "$(ids)" = "checksum-mismatch" ]
  [ "$(finding checksum-mismatch | jq -r '.fix[0]')" = "md5sum /home/wei/bevformer_tensorrt/build/cub_ext-prefix/src/cub-1.8.0.zip" ]
  run --separate-stderr diagnose --no-probe --json "$LOGS/host-compiler-unsupported.log"
  [[ "$(finding host-compiler-unsupported | jq -r '.fix[0]')" == "sudo apt-get install gcc-11 g++-11" ]]
  run --separate-stderr diagnose --no-probe --json "$LOGS/im2col-step-divisibility.log"
  # "im2col_step(%d)9664": batch 96, step 64; 48 is the largest divisor of 96 not above 64
  [[ "$(finding im2col-step-divisibility | jq -r '.fix[0]')" == *"self.im2col_step = 48/"* ]]
}

@test "a value neither the log nor the machine gives leaves its command out, and a note says so" {
  printf 'RuntimeError: CUDA error: no kernel image is available for execution on the device\n' > "$BATS_TEST_TMPDIR/bare.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/bare.log"
  # {gpu_arch|arch}: no GPU known, so every architecture
  [ "$(finding no-kernel-image | jq -r '.fix[0]')" = "msda-doctor build --arch all" ]
  # TORCH_CUDA_ARCH_LIST="{gpu_cc}+PTX" has no value: left out, said in words
  ! finding no-kernel-image | jq -r '.fix[]' | grep -q TORCH_CUDA_ARCH_LIST
  finding no-kernel-image | jq -e '.notes | any(. == "Left out: a command that needs the GPU'"'"'s compute capability: the log does not give it (it is judged without this machine).")'
  ! grep -qE '<[a-z_]+>' <<<"$output"
  run --separate-stderr diagnose --no-probe "$BATS_TEST_TMPDIR/bare.log"
  ! grep -qE '<[a-z_]+>' <<<"$output"
  [[ "$output" == *"! Left out: a command that needs the GPU's compute capability"* ]]
}

@test "the GPU a log names fills the placeholders when nothing is probed" {
  run --separate-stderr diagnose --no-probe --json "$LOGS/p40-no-kernel-image.log"
  [ "$(finding no-kernel-image | jq -r '.fix[0]')" = "msda-doctor build --arch sm_61" ]
  [ "$(jq -r '.logs[0].facts | "\(.gpu_name) \(.compute_capability) \(.host)"' <<<"$output")" = "Tesla P40 6.1 p40-node" ]
  jq -e '.findings[0].evidence | any(. == "the log says: GPU Tesla P40, sm_61")' <<<"$output"
}

@test "an unreadable log is exit 3 with one error line; the other logs are still read" {
  run --separate-stderr diagnose --no-probe --json /nonexistent.log "$LOGS/magma-missing.log"
  [ "$status" -eq 3 ]
  [ "$stderr" = "msda-doctor: error: cannot open '/nonexistent.log': No such file or directory" ]
  [ "$(ids)" = "magma-missing" ]
}

@test "a directory given as a log is exit 3" {
  run --separate-stderr diagnose --no-probe "$BATS_TEST_TMPDIR"
  [ "$status" -eq 3 ]
  [[ "$stderr" == "msda-doctor: error: cannot read '$BATS_TEST_TMPDIR'"* ]]
}

# Bytes that are not UTF-8 (man page, DESCRIPTION): U+FFFD in the JSON string, the raw bytes in
# its KEY_base64 sibling (an array beside an array, null for the strings that were UTF-8).
@test "a Latin-1 byte in the evidence line: the evidence is kept, its bytes in evidence_base64" {
  printf 'RuntimeError: CUDA error: no kernel image is available for execution on the device (caf\xe9)\n' > "$BATS_TEST_TMPDIR/latin1.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/latin1.log"
  [ "$status" -eq 1 ]
  iconv -f UTF-8 -t UTF-8 <<<"$output" >/dev/null
  f=$(finding no-kernel-image)
  [ "$(jq -r '.evidence[0]' <<<"$f")" = "$BATS_TEST_TMPDIR/latin1.log:1: RuntimeError: CUDA error: no kernel image is available for execution on the device (caf"$'\uFFFD'")" ]
  [ "$(jq -r '.evidence_base64[0]' <<<"$f" | base64 -d | od -An -tx1)" = \
    "$(printf '%s:1: RuntimeError: CUDA error: no kernel image is available for execution on the device (caf\xe9)' "$BATS_TEST_TMPDIR/latin1.log" | od -An -tx1)" ]
  [ "$(jq -r '.evidence_base64 | length' <<<"$f")" = "$(jq -r '.evidence | length' <<<"$f")" ]
  [ "$(jq -r '.evidence_base64[1:] | map(select(. != null)) | length' <<<"$f")" = 0 ]
  run --separate-stderr diagnose --no-probe "$BATS_TEST_TMPDIR/latin1.log"
  [[ "$output" == *'on the device (caf\xE9)'* ]]
}

@test "a log whose file name is not UTF-8: its findings and logs are kept, the name in file_base64" {
  name=$(printf 'train-\xff\xfe.log')
  cp "$LOGS/p40-no-kernel-image.log" "$BATS_TEST_TMPDIR/$name"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/$name"
  [ "$status" -eq 1 ]
  iconv -f UTF-8 -t UTF-8 <<<"$output" >/dev/null
  [ "$(ids)" = no-kernel-image ]
  [ "$(jq -r '.logs | length' <<<"$output")" = 1 ]
  [ "$(jq -r '.logs[0].file' <<<"$output")" = "$BATS_TEST_TMPDIR/train-"$'\uFFFD\uFFFD'".log" ]
  [ "$(jq -r '.logs[0].file_base64' <<<"$output" | base64 -d)" = "$BATS_TEST_TMPDIR/$name" ]
  [ "$(jq -r '.findings[0].log.file_base64' <<<"$output" | base64 -d)" = "$BATS_TEST_TMPDIR/$name" ]
  jq -e '.findings[0].evidence_base64[0] != null' <<<"$output"
  run --separate-stderr diagnose --no-probe "$BATS_TEST_TMPDIR/$name"
  [[ "$output" == *"- Log $BATS_TEST_TMPDIR/train-\\xFF\\xFE.log: "* ]]
  ! grep -q $'\xff' <<<"$output"
}

@test "GroundingDINO's and detrex's missing _C: the note names msda.patch for that framework, no other log gets it" {
  printf '%s\n' '/opt/venv/lib/python3.10/site-packages/groundingdino/models/GroundingDINO/ms_deform_attn.py:31: UserWarning: Failed to load custom C++ ops. Running on CPU mode Only!' \
    '  warnings.warn("Failed to load custom C++ ops. Running on CPU mode Only!")' > "$BATS_TEST_TMPDIR/gdino.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/gdino.log"
  [ "$(ids)" = cpu-only-build ]
  jq -r '.findings[0].notes[]' <<<"$output" | grep -q '^groundingdino.s compiled `_C` holds .*`import msda; msda.patch("groundingdino")`'
  printf '%s\n' 'Traceback (most recent call last):' \
    '  File "/work/detrex/detrex/layers/multi_scale_deform_attn.py", line 98, in forward' \
    '    output = _C.ms_deform_attn_forward(' "NameError: name '_C' is not defined" > "$BATS_TEST_TMPDIR/detrex.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/detrex.log"
  [ "$(ids)" = cpu-only-build ]
  jq -r '.findings[0].notes[]' <<<"$output" | grep -q 'msda.patch("detrex")'
  # the same message from an extension that is neither: no switch named
  printf '%s\n' 'File "/src/mynet/ops/deform.py", line 12, in forward' "NameError: name '_C' is not defined" \
    > "$BATS_TEST_TMPDIR/other.log"
  run --separate-stderr diagnose --no-probe --json "$BATS_TEST_TMPDIR/other.log"
  [ "$(ids)" = cpu-only-build ]
  if jq -r '.findings[0].notes[]' <<<"$output" | grep -q 'msda.patch'; then return 1; fi
}
