#!/usr/bin/env bats
# `msda-doctor build --arch all` end to end: two wheels, byte-identical on rebuild, RECORD
# right, glibc floor 2.17, pip-installable, the other CPU's library run under qemu, verify. The
# host's wheel is the native one, the other CPU's the foreign one, on x86_64 and aarch64 alike.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
load ../host-cpu

setup_file() {
  export OUT1="$BATS_FILE_TMPDIR/dist1" OUT2="$BATS_FILE_TMPDIR/dist2"
  export CACHE="$ROOT/build/msda-cache"
  ( cd "$ROOT" && "$MSDA_DOCTOR" build --arch all --platform x86_64,aarch64 --out "$OUT1" --cache "$CACHE" \
      > "$BATS_FILE_TMPDIR/build1.log" 2>&1 ) || { cat "$BATS_FILE_TMPDIR/build1.log" >&2; return 1; }
  ( cd "$ROOT" && "$MSDA_DOCTOR" build --arch all --platform x86_64,aarch64 --out "$OUT2" --cache "$CACHE" \
      > "$BATS_FILE_TMPDIR/build2.log" 2>&1 ) || { cat "$BATS_FILE_TMPDIR/build2.log" >&2; return 1; }
  export VERSION=$(cat "$ROOT/VERSION")
  export NATIVE=$(wheel_for "$OUT1" "$HOST_CPU") FOREIGN=$(wheel_for "$OUT1" "$FOREIGN_CPU")
}

# Every real architecture that the toolkits build finds can target, from their own nvcc.
toolkit_archs() {
  ( cd "$ROOT" && "$MSDA_DOCTOR" build --dry-run --json --arch all --platform "$HOST_CPU" --cache "$CACHE" ) |
    jq -r '.plan.toolkits[].nvcc' | while read -r nvcc; do "$nvcc" --list-gpu-code; done | grep -E '^sm_[0-9]+$' | sort -u
}

@test "inspect of both wheels lists every SASS architecture the toolkits here target, sm_88 included" {
  want=$(toolkit_archs)
  [ -n "$want" ]
  if nvcc --list-gpu-code 2>/dev/null | grep -qx sm_88; then grep -qx sm_88 <<<"$want"; fi
  for w in "$NATIVE" "$FOREIGN"; do
    got=$("$MSDA_DOCTOR" inspect --json "$w" | jq -r '.files[].sass[]' | sort -u)
    if [ "$got" != "$want" ]; then
      echo "$(basename "$w"):" >&2; diff <(echo "$want") <(echo "$got") >&2; return 1
    fi
  done
}

@test "the wheels carry PTX of the newest architecture, of the newest toolkit's oldest, and for old drivers" {
  newest_toolkit=$( ( cd "$ROOT" && "$MSDA_DOCTOR" build --dry-run --json --arch all --platform "$HOST_CPU" --cache "$CACHE" ) |
                    jq -r '.plan.toolkits[0].nvcc')
  oldest=$("$newest_toolkit" --list-gpu-code | grep -E '^sm_[0-9]+$' | sed 's/sm_//' | sort -n | head -n 1)
  newest=$(toolkit_archs | sed 's/sm_//' | sort -n | tail -n 1)
  # kernels/libmsda.json's PTX for old drivers, for its architectures a toolkit here targets.
  old=$(jq -r '.old_driver_ptx.sm[]' "$ROOT/kernels/libmsda.json" | while read -r sm; do
          if toolkit_archs | grep -qx "sm_$sm"; then echo "$sm"; fi; done)
  [ -n "$old" ]
  for w in "$NATIVE" "$FOREIGN"; do
    got=$("$MSDA_DOCTOR" inspect --json "$w" | jq -r '.files[].ptx[]' | sort -u | tr '\n' ' ')
    # shellcheck disable=SC2086
    [ "$got" = "$(printf 'compute_%s\n' "$oldest" "$newest" $old | sort -u | tr '\n' ' ')" ] ||
      { echo "$(basename "$w"): PTX $got" >&2; return 1; }
    # The old drivers' PTX declares the recipe's ISA (lowered); the rest a newer one.
    "$MSDA_DOCTOR" inspect --json -v "$w" |
      jq -e --arg isa "$(jq -r '.old_driver_ptx.isa' "$ROOT/kernels/libmsda.json")" \
            --argjson sms "$(jq -c '.old_driver_ptx.sm' "$ROOT/kernels/libmsda.json")" \
        '[.files[].entries[] | select(.kind == "ptx")] | map(select(.sm as $s | $sms | index($s))) as $old
         | ($old | length > 0 and all(.ptx_isa == $isa)) and (map(select(.ptx_isa == $isa)) | length == ($old | length))' >/dev/null
  done
}

# The kernels a SASS image of ARCH from TOOLKIT carries, one name a line.
image_kernels() {
  "$MSDA_DOCTOR" inspect --json -v "$NATIVE" |
    jq -r --arg arch "$1" --arg tk "$2" '.files[].entries[] | select(.kind == "sass" and .arch == $arch
      and .toolkit == $tk) | .kernels[].name' | sort -u
}

@test "each image carries the mixed 16-bit backward only where its strategy mixes (the f32 buffer's goes all through the buffer)" {
  # sm_61: no 16-bit atomics, both types' backward through the f32 buffer; sm_75: f16's atomics
  # mix, bf16's do not; sm_86: both mix (kernels/libmsda.json per_arch, recipes/architectures.json).
  sm61=$(image_kernels sm_61 11.8) sm75=$(image_kernels sm_75 13.0) sm86=$(image_kernels sm_86 13.0)
  [ -n "$sm61" ]
  [ -n "$sm75" ]
  [ -n "$sm86" ]
  for k in msda_backward_f16_buffer_v4 msda_backward_bf16_buffer_v4 msda_forward_f16_v8 msda_forward_bf16_v8; do
    grep -qx "$k" <<<"$sm61"
  done
  run grep -cE '^msda_backward_(softmax_)?b?f16(c32)?_v[0-9]+$' <<<"$sm61"
  [ "$output" = 0 ]
  grep -qx msda_backward_f16_v8 <<<"$sm75"
  grep -qx msda_backward_f16c32_v8 <<<"$sm75"
  grep -qx msda_backward_bf16_buffer_v4 <<<"$sm75"
  run grep -cE '^msda_backward_(softmax_)?bf16(c32)?_v[0-9]+$' <<<"$sm75"
  [ "$output" = 0 ]
  grep -qx msda_backward_bf16_v8 <<<"$sm86"
  grep -qx msda_backward_softmax_bf16c32_v8 <<<"$sm86"
}

@test "no image carries a kernel of one element a lane: such problems are staged through msda_restride" {
  for image in "sm_61 11.8" "sm_75 13.0" "sm_86 13.0"; do
    # shellcheck disable=SC2086 # arch and toolkit, two words
    kernels=$(image_kernels $image)
    [ -n "$kernels" ]
    grep -qx msda_restride <<<"$kernels"
    grep -qx msda_forward_f32_v4 <<<"$kernels"
    run grep -cE '_v1$' <<<"$kernels"
    [ "$output" = 0 ]
  done
}

@test "an architecture the table lacks is built with the safe defaults and a note" {
  grep -q 'not in recipes/architectures.json, built with the safe defaults' "$BATS_FILE_TMPDIR/build1.log"
}

@test "the wheel's Python package carries the VERSION file's version" {
  for w in "$NATIVE" "$FOREIGN"; do
    v=$(python3 -c "import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read('msda/_version.py').decode())" "$w")
    [[ "$v" == *"__version__ = \"$VERSION\""* ]] || { echo "$v" >&2; return 1; }
  done
}

@test "both wheels are written, with the manylinux_2_17 tags" {
  [ -f "$NATIVE" ] && [ -f "$FOREIGN" ]
  [ "$(ls "$OUT1" | wc -l)" -eq 2 ]
}

@test "a second build with nothing changed compiles nothing and writes byte-identical wheels" {
  grep -q '^Compiled 0, ' "$BATS_FILE_TMPDIR/build2.log"
  for w in "$OUT1"/*.whl; do cmp "$w" "$OUT2/$(basename "$w")"; done
}

@test "RECORD lists every file with its sha256 and size (checked with Python's zipfile)" {
  for w in "$NATIVE" "$FOREIGN"; do
    python3 - "$w" <<'PY'
import base64, csv, hashlib, io, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
record = [n for n in names if n.endswith(".dist-info/RECORD")]
assert len(record) == 1 and names[-1] == record[0], "RECORD must be last"
rows = list(csv.reader(io.StringIO(z.read(record[0]).decode())))
listed = {r[0] for r in rows}
assert listed == set(names), (listed ^ set(names))
for path, digest, size in rows:
    if path == record[0]:
        assert digest == "" and size == ""
        continue
    data = z.read(path)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == want and int(size) == len(data), path
assert names == sorted(names[:-3]) + names[-3:], "entries sorted, dist-info last"
PY
  done
}

@test "no GLIBC symbol version above 2.17 in either library (objdump)" {
  for pair in "$NATIVE:objdump" "$FOREIGN:$FOREIGN_OBJDUMP"; do
    w=${pair%%:*} tool=${pair##*:}
    d="$BATS_TEST_TMPDIR/$(basename "$w")"
    mkdir -p "$d" && (cd "$d" && python3 -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extract('msda/libmsda.so')" "$w")
    top=$("$tool" -T "$d/msda/libmsda.so" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n 1)
    [ -n "$top" ]
    python3 -c "import sys; v=tuple(map(int, sys.argv[1][6:].split('.'))); sys.exit(0 if v <= (2,17) else 1)" "$top" ||
      { echo "$w needs $top" >&2; return 1; }
  done
}

@test "inspect reads the wheels: the same code in both, and the GPUs it runs on" {
  run --separate-stderr "$MSDA_DOCTOR" inspect --json --gpu p40 --gpu tx2 --gpu h100 --gpu rtx5090 "$NATIVE" "$FOREIGN"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.files | length' <<<"$output")" -eq 2 ]
  [ "$(jq -c '.files[0].sass' <<<"$output")" = "$(jq -c '.files[1].sass' <<<"$output")" ]
  [ "$(jq -c '.files[0].ptx' <<<"$output")" = "$(jq -c '.files[1].ptx' <<<"$output")" ]
  [ "$(jq -r '[.files[].gpus[].runs] | unique | join(",")' <<<"$output")" = "sass" ]
}

@test "verify passes on this CPU's wheel here (CPU; GPUs where present)" {
  run --separate-stderr "$MSDA_DOCTOR" verify --json "$NATIVE"
  [ "$status" -eq 0 ] || { echo "$output $stderr" >&2; return 1; }
  [ "$(jq -r '.passed' <<<"$output")" = true ]
  [ "$(jq -r '.devices[0].dtypes | map(.dtype + ":" + (.passed|tostring)) | join(",")' <<<"$output")" = "f32:true,f64:true,f16:true,bf16:true" ]
  # The deterministic backward is a GPU check: null for the CPU, a number under the tolerance
  # for every GPU (this wheel's library is ABI 4).
  [ "$(jq -r '.devices[0].dtypes | map(.deterministic_backward_error) | unique | join(",")' <<<"$output")" = "" ]
  [ "$(jq -r '[.devices[1:][].dtypes[] | select((.deterministic_backward_error // 1) > .tolerance)] | length' \
        <<<"$output")" -eq 0 ]
}

@test "verify refuses the other CPU's wheel, saying where to run it" {
  run --separate-stderr "$MSDA_DOCTOR" verify "$FOREIGN"
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"is for $FOREIGN_CPU, this machine is $HOST_CPU"* ]]
}

@test "verify catches a damaged wheel" {
  bad="$BATS_TEST_TMPDIR/msda-$VERSION-py3-none-manylinux_2_17_$HOST_CPU.whl"
  python3 - "$NATIVE" "$bad" <<'PY'
import sys, zipfile
src, dst = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED)
for info in src.infolist():
    data = src.read(info)
    if info.filename == "msda/__init__.py":
        data += b"\n# changed\n"
    dst.writestr(info, data)
dst.close()
PY
  run --separate-stderr "$MSDA_DOCTOR" verify "$bad"
  [ "$status" -eq 1 ]
  [[ "$output" == *"[FAIL] RECORD"*"msda/__init__.py"* ]]
}

@test "the other CPU's library runs its CPU path under qemu" {
  d="$BATS_TEST_TMPDIR/foreign"
  mkdir -p "$d" && (cd "$d" && python3 -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extract('msda/libmsda.so')" "$FOREIGN")
  "$FOREIGN_CC" -std=c11 -Wall -Wextra -Werror -O1 -I"$ROOT/kernels" -o "$d/smoke" \
    "$ROOT/tests/cross/cpu_smoke.c" -L"$d/msda" -lmsda -lm
  run env QEMU_LD_PREFIX="$FOREIGN_SYSROOT" LD_LIBRARY_PATH="$d/msda" "$FOREIGN_QEMU" "$d/smoke"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"3 passed, 0 failed"* ]]
}

@test "pip installs this CPU's wheel into a fresh virtual environment; it works without torch" {
  venv="$BATS_TEST_TMPDIR/venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --no-index --no-deps "$NATIVE"
  run "$venv/bin/python" -c '
import importlib.util, msda
assert importlib.util.find_spec("torch") is None
info = msda.library_info()
print(info.version, " ".join(info.arch_names))
'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == "0.1.0 "* && " $output " == *" sm_61 "* && " $output " == *" sm_90 "* && " $output " == *" compute_121 "* ]]
  # without torch the op says what is missing instead of failing obscurely
  run "$venv/bin/python" -c 'import msda; msda.ms_deform_attn(None, None, None, None, None)'
  [ "$status" -ne 0 ]
  [[ "$output" == *"torch"* ]]
}
