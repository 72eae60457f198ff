#!/usr/bin/env bats
# An installed extension's host symbols against the torch that Python imports: an op built
# against another torch (torch-abi-mismatch) and a CMake build that does not link
# libtorch_python (torch-python-unlinked), confirmed or ruled out by what the files say.
load diag_helpers

# A torch lib folder (libc10.so, libtorch_cpu.so, libtorch_python.so) and an extension importing
# from it, compiled here with cc. The extension imports c10::UndefinedTensorImpl::_singleton
# (exported), at::_ops::add::call (exported) and, with `stale`, TensorImpl's
# is_contiguous_nondefault_policy_impl (not exported: a torch of another version). With `thp`
# it also imports THPVariable_Wrap(at::TensorBase); with `linked` it links libtorch_python.so; with
# `cuda` it carries device code.
make_torch_and_op() {
  local site="$BATS_TEST_TMPDIR/site" src="$BATS_TEST_TMPDIR/src" use=""
  TORCH_LIB="$site/torch/lib"
  OP="$site/MultiScaleDeformableAttention.cpython-310-x86_64-linux-gnu.so"
  mkdir -p "$TORCH_LIB" "$src"
  printf 'int _ZN3c1019UndefinedTensorImpl10_singletonE = 1;\n' > "$src/c10.c"
  printf 'int _ZN2at4_ops3add4callEv(void) { return 2; }\n' > "$src/torch_cpu.c"
  printf 'int _Z16THPVariable_WrapN2at10TensorBaseE(void) { return 3; }\n' > "$src/torch_python.c"
  cc -shared -fPIC -o "$TORCH_LIB/libc10.so" "$src/c10.c"
  cc -shared -fPIC -o "$TORCH_LIB/libtorch_cpu.so" "$src/torch_cpu.c"
  cc -shared -fPIC -o "$TORCH_LIB/libtorch_python.so" "$src/torch_python.c"
  {
    echo 'extern int _ZN3c1019UndefinedTensorImpl10_singletonE;'
    echo 'int _ZN2at4_ops3add4callEv(void);'
    echo 'int _ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE(void);'
    echo 'int _Z16THPVariable_WrapN2at10TensorBaseE(void);'
    echo 'int PyInit_MultiScaleDeformableAttention(void) {'
    echo '  return _ZN3c1019UndefinedTensorImpl10_singletonE + _ZN2at4_ops3add4callEv()'
    for what in "$@"; do
      case $what in
        stale) echo '    + _ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE()' ;;
        thp) echo '    + _Z16THPVariable_WrapN2at10TensorBaseE()' ;;
      esac
    done
    echo '  ;'
    echo '}'
  } > "$src/op.c"
  [[ " $* " == *" linked "* ]] && use="-L$TORCH_LIB -ltorch_python"
  # shellcheck disable=SC2086 # $use is two words or none
  cc -shared -fPIC -o "$OP" "$src/op.c" $use
  # with `cuda`, device code too (sm_75 and sm_90 SASS, which the H200 runs): a fatbin section
  if [[ " $* " == *" cuda "* ]]; then
    objcopy --add-section .nv_fatbin="$MSDA_FIXTURES/f13-compressed.fatbin" "$OP"
  fi
  python_json '{"executable": "/opt/venv/bin/python", "version": "3.10.12", "msda_importable": true,
                "binaries": ["'"$OP"'"],
                "torch": {"version": "2.1.2+cu121", "cuda": "12.1",
                          "lib": "'"$TORCH_LIB"'"}}'
}

symbols() { jq -c '.machine.binaries[0].host_symbols' <<<"$output"; }

@test "an op built against another torch: the missing symbol named, torch-abi-mismatch confirmed" {
  gpus h200; make_torch_and_op stale
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/torch-abi-mismatch.log"
  [ "$status" -eq 1 ]
  assert_clean_stderr
  [ "$(jq -r '"\(.torch_imported) \(.torch_missing) \(.first_missing)"' <<<"$(symbols)")" = \
    "3 1 _ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE" ]
  [ "$(check_status binaries)" = fail ]
  jq -e '.checks[] | select(.id == "binaries") | .problems | any(contains("needs 1 torch symbol that torch 2.1.2+cu121 does not export"))' <<<"$output"
  f=$(finding torch-abi-mismatch)
  jq -e '.confirmed_by | index("binary_undefined_torch_symbols")' <<<"$f"
  jq -e '.ruled_out_by | index("binary_symbols_resolved") | not' <<<"$f"
}

@test "an op whose torch symbols all resolve: the files rule the torch-abi-mismatch log out" {
  gpus h200; make_torch_and_op
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/torch-abi-mismatch.log"
  assert_clean_stderr
  [ "$(jq -r '"\(.torch_imported) \(.torch_missing) \(.first_missing)"' <<<"$(symbols)")" = "2 0 null" ]
  f=$(finding torch-abi-mismatch)
  jq -e '.ruled_out_by | index("binary_symbols_resolved")' <<<"$f"
  jq -e '.confirmed_by | length == 0' <<<"$f"
  jq -e '.checks[] | select(.id == "binaries") | .details | any(contains("its 2 torch symbols resolve against torch 2.1.2+cu121"))' <<<"$output"
}

@test "THPVariable_Wrap imported without libtorch_python.so: torch-python-unlinked confirmed" {
  gpus h200; make_torch_and_op thp
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/torch-python-unlinked.log"
  assert_clean_stderr
  [ "$(jq -r '"\(.needs_torch_python) \(.links_torch_python)"' <<<"$(symbols)")" = "true false" ]
  jq -e '.checks[] | select(.id == "binaries") | .problems | any(contains("does not link libtorch_python.so"))' <<<"$output"
  jq -e '.confirmed_by | index("binary_missing_torch_python")' <<<"$(finding torch-python-unlinked)"
  # with device code that runs here, that problem alone fails the binaries check
  make_torch_and_op thp cuda
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/torch-python-unlinked.log"
  [ "$(jq -r '.checks[] | select(.id == "binaries") | "\(.status) \(.problems | length)"' <<<"$output")" = "fail 1" ]
}

@test "the same op linked with libtorch_python.so: nothing missing, the finding ruled out" {
  gpus h200; make_torch_and_op thp linked
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json "$LOGS/torch-python-unlinked.log"
  assert_clean_stderr
  [ "$(jq -r '"\(.needs_torch_python) \(.links_torch_python) \(.torch_missing)"' <<<"$(symbols)")" = "true true 0" ]
  f=$(finding torch-python-unlinked)
  jq -e '.ruled_out_by | index("binary_links_torch_python")' <<<"$f"
  jq -e '.confirmed_by | length == 0' <<<"$f"
}

@test "no torch to check against: the symbol facts stay unknown" {
  gpus h200; make_torch_and_op stale
  python_json '{"executable": "/opt/venv/bin/python", "version": "3.10.12", "msda_importable": true,
                "binaries": ["'"$OP"'"], "torch": null}'
  run --separate-stderr diagnose "${PY[@]}" --root "$FAKE_ROOT" --json
  assert_clean_stderr
  [ "$(jq -r '"\(.torch_imported) \(.torch_missing)"' <<<"$(symbols)")" = "3 null" ]
}
