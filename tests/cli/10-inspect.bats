#!/usr/bin/env bats
# inspect on binaries that nvcc built at test time: the architectures are exactly the -gencode
# sets, and the --gpu verdicts are right.
load helpers

archs_json() { doctor inspect --json "$1" | jq -r '.files[0] | "sass:" + (.sass | map(" " + .) | join("")), "ptx:" + (.ptx | map(" " + .) | join(""))'; }

@test "CUDA 13 binaries: inspect --json lists exactly the -gencode architectures" {
  for f in f13-multi.so f13-sm80.so f13-ptx-only.so f13-compressed.fatbin f13-uncompressed.fatbin f13-sm90.cubin f13-sm90a.cubin f13-sm100f.cubin; do
    want=$(cat "$(fix "${f%.*}.archs")")
    got=$(archs_json "$(fix "$f")")
    [ "$want" = "$got" ] || { echo "$f: want '$want' got '$got'" >&2; return 1; }
  done
}

@test "CUDA 11.8 binaries: inspect --json lists exactly the -gencode architectures" {
  have_cuda118 || [ -n "${MSDA_ALLOW_NO_CUDA118:-}" ] || { echo "CUDA 11.8 fixtures missing" >&2; return 1; }
  have_cuda118 || skip "CUDA 11.8 waived"
  for f in f118-multi.so f118-sm52.so f118-sm61-ptx.so f118-compressed.fatbin f118-regs40.fatbin; do
    want=$(cat "$(fix "${f%.*}.archs")")
    got=$(archs_json "$(fix "$f")")
    [ "$want" = "$got" ] || { echo "$f: want '$want' got '$got'" >&2; return 1; }
  done
}

@test "text mode prints one summary line per file" {
  run --separate-stderr doctor inspect "$(fix f13-multi.so)" "$(fix f13-ptx-only.so)"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$(fix f13-multi.so): SASS sm_75 sm_80 sm_86 sm_90; PTX compute_90" ]
  [ "${lines[1]}" = "$(fix f13-ptx-only.so): PTX compute_75" ]
  [ "${#lines[@]}" -eq 2 ]
}

@test "-v lists entries with compression and kernels with registers" {
  run --separate-stderr doctor inspect -v "$(fix f13-compressed.fatbin)"
  [ "$status" -eq 0 ]
  [[ "$output" == *"SASS sm_90, "*"compressed (zstd), 4 kernels"* ]]
  [[ "$output" == *"_Z12probe_sharedPfi: "*"launch bounds 256 threads, 1200 bytes static shared"* ]]
}

@test "JSON kernel registers equal what ptxas -v reported" {
  doctor inspect --json "$(fix f13-sm90.cubin)" > "$BATS_TEST_TMPDIR/out.json"
  while read -r arch kernel regs smem; do
    got=$(jq -r --arg k "$kernel" '.files[0].entries[0].kernels[] | select(.name | test("^_Z[0-9]+" + $k + "P")) | "\(.registers) \(.shared_bytes)"' "$BATS_TEST_TMPDIR/out.json")
    [ "$got" = "$regs $smem" ] || { echo "$arch $kernel: want '$regs $smem' got '$got'" >&2; return 1; }
  done < "$(fix f13-sm90.ptxas)"
}

@test "sm_52-only code cannot run on 6.1 (exit 1)" {
  have_cuda118 || skip "needs CUDA 11.8 fixtures (checked above)"
  run --separate-stderr doctor inspect --gpu 6.1 "$(fix f118-sm52.so)"
  [ "$status" -eq 1 ]
  [[ "$output" == *"sm_61: cannot run"*"no kernel image is available"* ]]
  run --separate-stderr doctor inspect --json --gpu p40 "$(fix f118-sm52.so)"
  [ "$status" -eq 1 ]
  [ "$(jq -r '.files[0].gpus[0] | .gpu + " " + .runs' <<<"$output")" = "Tesla P40 (sm_61) cannot-run" ]
}

@test "sm_61 SASS + compute_61 PTX runs on 8.6 through PTX JIT (exit 0)" {
  have_cuda118 || skip "needs CUDA 11.8 fixtures (checked above)"
  run --separate-stderr doctor inspect --json --gpu 8.6 --gpu 6.1 "$(fix f118-sm61-ptx.so)"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.files[0].gpus | map(.runs + ":" + .code) | join(",")' <<<"$output")" = "ptx-jit:compute_61,sass:sm_61" ]
}

@test "sm_80 SASS runs on 8.6 as SASS" {
  run --separate-stderr doctor inspect --json --gpu 8.6 "$(fix f13-sm80.so)"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.files[0].gpus[0] | .runs + ":" + .code' <<<"$output")" = "sass:sm_80" ]
}

@test "a 40-register kernel at 1024 threads: too many resources on 6.2, fits on 8.6" {
  have_cuda118 || skip "needs CUDA 11.8 fixtures (checked above)"
  run --separate-stderr doctor inspect --json --gpu tx2 --gpu 8.6 "$(fix f118-regs40.fatbin)"
  [ "$status" -eq 1 ]
  q='.files[0].gpus[] | .arch as $a | .kernels[] | select(.name | test("probe_regs")) | "\($a) \(.registers) \(.threads) \(.fits) \(.max_threads_that_fit)"'
  [ "$(jq -r "$q" <<<"$output" | tr '\n' ';')" = "sm_62 40 1024 false 800;sm_86 40 1024 true 1024;" ]
  run --separate-stderr doctor inspect --gpu tx2 "$(fix f118-regs40.fatbin)"
  [[ "$output" == *"probe_regs"*"40960 of 32768 registers per block"*"at most 800 threads fit"* ]]
}

@test "the CUDA 13 40-register cubin fits on 8.6 and has no SASS for 6.2" {
  run --separate-stderr doctor inspect --json --gpu 8.6 --gpu 6.2 "$(fix f13-regs40.cubin)"
  [ "$status" -eq 1 ]
  [ "$(jq -r '.files[0].gpus | map(.runs) | join(",")' <<<"$output")" = "sass,cannot-run" ]
}

@test "sm_90a code runs on an H100 and not on a B200" {
  run --separate-stderr doctor inspect --json --gpu h100 --gpu b200 "$(fix f13-sm90a.cubin)"
  [ "$status" -eq 1 ]
  [ "$(jq -r '.files[0].sass[0]' <<<"$output")" = "sm_90a" ]
  [ "$(jq -r '.files[0].gpus | map(.runs) | join(",")' <<<"$output")" = "sass,cannot-run" ]
}

@test "a standalone sm_100f cubin keeps its f (issue 44): family code runs on sm_103, not on sm_120" {
  run --separate-stderr doctor inspect --json --gpu sm_103 --gpu sm_120 "$(fix f13-sm100f.cubin)"
  [ "$status" -eq 1 ]
  [ "$(jq -r '.files[0].sass[0]' <<<"$output")" = "sm_100f" ]
  [ "$(jq -r '.files[0].gpus | map(.runs) | join(",")' <<<"$output")" = "sass,cannot-run" ]
}

@test "a cubin's arch-specific bit in e_flags makes its a, in both ABIs (issue 44)" {
  # What cuobjdump reads, and all that NVIDIA's own assembler records (flashinfer's fmhaSm100a
  # cubins; CUDA 12.9's ABI-7 sm_90a ones in sgl-kernel): bit 0x8 from ABI 8, 0x800 up to ABI 7,
  # the latter with the e_flags of a real ABI-7 sm_90a cubin (0x005a0d5a) and its plain sm_90
  # twin (0x005a055a).
  python3 - "$(fix f13-sm90.cubin)" "$BATS_TEST_TMPDIR" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
flags, = struct.unpack_from("<I", d, 0x30)
for name, abi, f in (("abi8a", 8, flags | 0x8), ("abi7a", 7, 0x005A0D5A), ("abi7", 7, 0x005A055A)):
    x = bytearray(d)
    x[8] = abi                      # EI_ABIVERSION
    struct.pack_into("<I", x, 0x30, f)
    open(f"{sys.argv[2]}/{name}.cubin", "wb").write(x)
PY
  for want in abi8a:sm_90a abi7a:sm_90a abi7:sm_90; do
    run --separate-stderr doctor inspect --json "$BATS_TEST_TMPDIR/${want%%:*}.cubin"
    [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
    [ "$(jq -r '.files[0].sass | join(",")' <<<"$output")" = "${want#*:}" ] || { echo "$want: $output" >&2; return 1; }
  done
}

@test "code that is there but does not apply is named with its rule, not denied (issue 44)" {
  # sm_90a: arch-specific, runs only on sm_90; on sm_89 and sm_100 the text says it is there and why
  run --separate-stderr doctor inspect --gpu sm_89 --gpu sm_100 --gpu sm_90 "$(fix f13-sm90a.cubin)"
  [ "$status" -eq 1 ]
  [[ "${lines[1]}" == "  sm_89: cannot run: no SASS that runs here (sm_8x up to sm_89), no PTX up to compute_89; sm_90a SASS is there, but arch-specific code runs only on sm_90 "* ]]
  [[ "${lines[2]}" == "  sm_100: cannot run: no SASS that runs here (sm_10x up to sm_100), no PTX up to compute_100; sm_90a SASS is there, but arch-specific code runs only on sm_90 "* ]]
  [[ "${lines[3]}" == "  sm_90: runs (sm_90a SASS"* ]]
  # sm_100f: family code, on sm_10x from sm_100
  run --separate-stderr doctor inspect --gpu sm_120 "$(fix f13-sm100f.cubin)"
  [[ "${lines[1]}" == *"; sm_100f SASS is there, but family code runs only on sm_10x from sm_100 "* ]]
  # plain code keeps the plain wording
  run --separate-stderr doctor inspect --gpu sm_75 "$(fix f13-sm80.so)"
  [[ "$output" == *"sm_75: cannot run: no SASS sm_7x up to sm_75, no PTX up to compute_75 ("* ]]
}

@test "a verdict names three of the codes that are there but do not apply, in the file's order, no more" {
  run --separate-stderr doctor inspect --gpu sm_89 "$(fix f13-variants.fatbin)"
  [ "$status" -eq 1 ]
  [[ "${lines[1]}" == *"compute_89; sm_90a SASS is there, but arch-specific code runs only on sm_90; sm_100a SASS is there, but arch-specific code runs only on sm_100; sm_100f SASS is there, but family code runs only on sm_10x from sm_100 (\"no kernel image"* ]] ||
    { echo "$output" >&2; return 1; }
  [[ "${lines[1]}" != *sm_120a* ]]
}

@test "entries name the section that holds them: .nv_fatbin in a library, __nv_relfatbin in an -rdc object (issue 44)" {
  run --separate-stderr doctor inspect --json "$(fix f13-sm80.so)"
  [ "$(jq -r '[.files[0].entries[].section] | unique | join(",")' <<<"$output")" = ".nv_fatbin" ]
  run --separate-stderr doctor inspect -v "$(fix f13-sm80.so)"
  [[ "${lines[1]}" == "  .nv_fatbin container 0: "* ]]
  command -v nvcc >/dev/null || skip "no nvcc to make an -rdc object"
  printf '__global__ void k(float *x) { x[threadIdx.x] *= 2.f; }\n' > "$BATS_TEST_TMPDIR/k.cu"
  nvcc -rdc=true -arch=sm_90 -c "$BATS_TEST_TMPDIR/k.cu" -o "$BATS_TEST_TMPDIR/k.o"
  run --separate-stderr doctor inspect --json "$BATS_TEST_TMPDIR/k.o"
  [ "$(jq -r '[.files[0].entries[].section] | unique | join(",")' <<<"$output")" = "__nv_relfatbin" ]
  # a fatbin file has no section
  run --separate-stderr doctor inspect --json "$(fix f13-compressed.fatbin)"
  [ "$(jq -r '[.files[0].entries[].section] | unique | join(",")' <<<"$output")" = "" ]
}

@test "an unknown --gpu is a usage error" {
  run --separate-stderr doctor inspect --gpu p41 "$(fix f13-sm80.so)"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"unknown GPU or architecture 'p41'"* ]]
}

@test "a plain ELF file has no CUDA device code and that is not an error" {
  run --separate-stderr doctor inspect /bin/true
  [ "$status" -eq 0 ]
  [ "$output" = "/bin/true: no CUDA device code" ]
}

@test "a directory is searched: files with GPU code are listed, others skipped" {
  d="$BATS_TEST_TMPDIR/tree"
  mkdir -p "$d/a/b"
  cp "$(fix f13-sm80.so)" "$d/a/b/lib1.so"
  cp "$(fix f13-compressed.fatbin)" "$d/a/k.fatbin"
  cp /bin/true "$d/a/plain"
  echo hello > "$d/README"
  run --separate-stderr doctor inspect --json "$d"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.files | map(.path | sub(".*/tree/"; "")) | join(",")' <<<"$output")" = "a/b/lib1.so,a/k.fatbin" ]
  [ "$(jq -r '.skipped' <<<"$output")" = 2 ]
}

@test "a wheel: every shared object inside is read without unpacking" {
  w="$BATS_TEST_TMPDIR/msda-0.1.0-py3-none-manylinux_2_17_x86_64.whl"
  python3 - "$w" "$(fix f13-multi.so)" "$(fix f13-sm80.so)" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.write(sys.argv[2], "msda/libmsda.so")
    z.write(sys.argv[3], "msda/sub/libother.so.1")
    z.writestr("msda/__init__.py", "")
    z.writestr("msda-0.1.0.dist-info/RECORD", "")
PY
  run --separate-stderr doctor inspect "$w"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$w!msda/libmsda.so: SASS sm_75 sm_80 sm_86 sm_90; PTX compute_90" ]
  [ "${lines[1]}" = "$w!msda/sub/libother.so.1: SASS sm_80" ]
  [ "${#lines[@]}" -eq 2 ]
}

@test "a wheel member named only by a suffix (.so, .cubin, .fatbin) is not code; one letter before it is" {
  # the nearest names on each side of the suffix rule, each holding real device code
  w="$BATS_TEST_TMPDIR/odd-0.1.0-py3-none-any.whl"
  python3 - "$w" "$(fix f13-sm80.so)" "$(fix f13-sm90.cubin)" "$(fix f13-compressed.fatbin)" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for member, source in ((".so", 2), (".cubin", 3), (".fatbin", 4), ("a.so", 2), ("b.cubin", 3), ("c.fatbin", 4)):
        z.write(sys.argv[source], member)
PY
  run --separate-stderr doctor inspect "$w"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$w!a.so: SASS sm_80" ]
  [ "${lines[1]}" = "$w!b.cubin: SASS sm_90" ]
  [ "${lines[2]}" = "$w!c.fatbin: SASS sm_75 sm_90; PTX compute_90" ]
  [ "${#lines[@]}" -eq 3 ]
}

# ---- what each entry asks of a driver (issue 39) ----------------------------------------------

@test "each entry names the toolkit that wrote it and the oldest driver that loads it" {
  run --separate-stderr doctor inspect --json "$(fix f13-sm90.cubin)"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.files[0].entries[0] | "\(.toolkit) \(.cubin_abi) \(.needs_cuda) \(.min_driver)"' <<<"$output")" = "13.0 8 13.0 580.65.06" ]
  run --separate-stderr doctor inspect --json "$(fix f13-compressed.fatbin)"
  [ "$(jq -r '.files[0].entries[] | select(.kind == "ptx") | "\(.ptx_isa) \(.toolkit) \(.needs_cuda)"' <<<"$output")" = "9.0 null 13.0" ]
  run --separate-stderr doctor inspect -v "$(fix f13-sm80.so)"
  [[ "$output" == *"SASS sm_80, "*", CUDA 13.0, needs driver >= 580.65.06 (CUDA 13.0)"* ]]
}

@test "CUDA 11.8 entries: SASS loads from driver 450.80.02 (CUDA 11.0), its PTX (ISA 7.8) from CUDA 11.8" {
  have_cuda118 || skip "needs CUDA 11.8 fixtures (checked above)"
  run --separate-stderr doctor inspect --json "$(fix f118-sm61-ptx.so)"
  [ "$status" -eq 0 ]
  [ "$(jq -r '[.files[0].entries[] | "\(.kind):\(.toolkit):\(.ptx_isa):\(.cubin_abi):\(.needs_cuda):\(.min_driver)"] | unique | join(",")' <<<"$output")" = \
    "ptx:null:7.8:null:11.8:520,sass:11.8:null:7:11.0:450.80.02" ]
  run --separate-stderr doctor inspect -v "$(fix f118-compressed.fatbin)"
  [[ "$output" == *"SASS sm_61, "*"compressed (lz4), 4 kernels, CUDA 11.8, needs driver >= 450.80.02 (CUDA 11.0)"* ]]
  [[ "$output" == *"PTX compute_70, "*"ISA 7.8, needs driver >= 520 (CUDA 11.8)"* ]]
}

@test "--gpu without --driver names the driver the chosen code needs" {
  run --separate-stderr doctor inspect --gpu a100 "$(fix f13-sm80.so)"
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "  A100 (sm_80): runs (sm_80 SASS from CUDA 13.0), which needs driver >= 580.65.06 (CUDA 13.0)" ]
}

@test "--driver 535: CUDA 13.0 sm_80 SASS does not load on an A100, and the verdict says why" {
  run --separate-stderr doctor inspect --gpu a100 --driver 535 "$(fix f13-sm80.so)"
  [ "$status" -eq 1 ]
  [ "${lines[1]}" = '  A100 (sm_80) with driver 535 (CUDA 12.2): cannot run: sm_80 SASS from CUDA 13.0 needs driver >= 580.65.06 (CUDA 13.0) ("device kernel image is invalid")' ]
  run --separate-stderr doctor inspect --json --gpu a100 --driver 535.104.05 "$(fix f13-sm80.so)"
  [ "$(jq -r '.files[0].gpus[0] | "\(.runs) \(.driver) \(.driver_cuda) \(.passed_over.code) \(.passed_over.toolkit) \(.passed_over.min_driver)"' <<<"$output")" = \
    "cannot-run 535.104.05 12.2 sm_80 13.0 580.65.06" ]
  run --separate-stderr doctor inspect --gpu a100 --driver 580 "$(fix f13-sm80.so)"
  [ "$status" -eq 0 ]
}

@test "--driver 535: of sm_80 SASS from 11.8 and 13.0, the 11.8 one runs" {
  have_cuda118 || skip "needs CUDA 11.8 fixtures (checked above)"
  run --separate-stderr doctor inspect --gpu a100 --driver 535 "$(fix f118-sm80.fatbin)"
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "  A100 (sm_80) with driver 535 (CUDA 12.2): runs (sm_80 SASS from CUDA 11.8), which needs driver >= 450.80.02 (CUDA 11.0)" ]
  run --separate-stderr doctor inspect --gpu a100 --driver 535 "$(fix fmixed-sm80.fatbin)"
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "  A100 (sm_80) with driver 535 (CUDA 12.2): sm_80 SASS from CUDA 13.0 needs driver >= 580.65.06 (CUDA 13.0); runs the CUDA 11.8 sm_80 SASS" ]
  run --separate-stderr doctor inspect --json --gpu a100 --driver 580 "$(fix fmixed-sm80.fatbin)"
  [ "$(jq -r '.files[0].gpus[0] | "\(.runs) \(.toolkit) \(.passed_over)"' <<<"$output")" = "sass 13.0 null" ]
}

@test "--driver r32: a TX2 runs lowered PTX (ISA 6.5), not the 11.8 SASS; r35 runs the SASS, with a note" {
  have_cuda118 || skip "needs CUDA 11.8 fixtures (checked above)"
  run --separate-stderr doctor inspect --gpu tx2 --driver r32 "$(fix f118-sm62-ptx65.fatbin)"
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "  Jetson TX2 (sm_62) with driver r32 (CUDA 10.2): sm_62 SASS from CUDA 11.8 needs driver >= 450.80.02 (CUDA 11.0); runs only through PTX JIT (compute_61 PTX of ISA 6.5 compiled by the driver at load time)" ]
  run --separate-stderr doctor inspect --json --gpu tx2 --driver r32 "$(fix f118-sm62-ptx65.fatbin)"
  [ "$(jq -r '.files[0].gpus[0] | "\(.runs) \(.code) \(.ptx_isa) \(.needs_cuda) \(.min_driver)"' <<<"$output")" = "ptx-jit compute_61 6.5 10.2 440.33" ]
  run --separate-stderr doctor inspect --gpu tx2 --driver r35 "$(fix f118-sm62-ptx65.fatbin)"
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == *"with driver r35 (CUDA 11.4): runs (sm_62 SASS from CUDA 11.8)"* ]]
  [[ "${lines[2]}" == *"minor-version compatibility, which NVIDIA documents for discrete GPUs only" ]]
  run --separate-stderr doctor inspect --gpu tx2 --driver r32 "$(fix f118-sm61-ptx.so)"
  [ "$status" -eq 1 ]
  [[ "$output" == *"cannot run: sm_61 SASS from CUDA 11.8 needs driver >= 450.80.02 (CUDA 11.0)"* ]]
}

@test "a bad --driver, or --driver without --gpu, is a usage error" {
  for bad in 5x 99 r99 cuda 535.x; do
    run --separate-stderr doctor inspect --gpu a100 --driver "$bad" "$(fix f13-sm80.so)"
    [ "$status" -eq 2 ] || { echo "--driver $bad: status $status" >&2; return 1; }
    [[ "$stderr" == "msda-doctor: error: --driver: "* ]] || { echo "$stderr" >&2; return 1; }
    [ "$(printf '%s\n' "$stderr" | grep -c 'error:')" -eq 1 ]
  done
  run --separate-stderr doctor inspect --driver 535 "$(fix f13-sm80.so)"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"--driver needs --gpu"* ]]
}

@test "a CUDA 12.4 cubin: its toolkit from e_version, 12.x SASS from driver 525.60.13 on" {
  cubin="$BATS_TEST_DIRNAME/../fixtures/toolkits/f124-sm80.cubin"
  run --separate-stderr doctor inspect --json "$cubin"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.files[0].entries[0] | "\(.toolkit) \(.cubin_abi) \(.needs_cuda) \(.min_driver)"' <<<"$output")" = "12.4 7 12.0 525.60.13" ]
  run --separate-stderr doctor inspect --gpu a100 --driver 470 "$cubin"
  [ "$status" -eq 1 ]
  [ "${lines[1]}" = '  A100 (sm_80) with driver 470 (CUDA 11.4): cannot run: sm_80 SASS from CUDA 12.4 needs driver >= 525.60.13 (CUDA 12.0) ("device kernel image is invalid")' ]
  run --separate-stderr doctor inspect --gpu a100 --driver 525 "$cubin"
  [ "$status" -eq 0 ]
  [[ "${lines[1]}" == *"runs (sm_80 SASS from CUDA 12.4), which needs driver >= 525.60.13 (CUDA 12.0)" ]]
}

# Bytes that are not UTF-8 (man page, DESCRIPTION): U+FFFD in the JSON string, the raw bytes in
# its KEY_base64 sibling, \xNN in the text.
@test "a file whose name is not UTF-8: its path is in the JSON, with the raw bytes in path_base64" {
  name=$(printf 'sm90-\xe9\xff.cubin')
  cp "$(fix f13-sm90.cubin)" "$BATS_TEST_TMPDIR/$name"
  run --separate-stderr doctor inspect --json "$BATS_TEST_TMPDIR/$name"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.files[0].sass | join(" ")' <<<"$output")" = sm_90 ]
  [ "$(jq -r '.files[0].path' <<<"$output")" = "$BATS_TEST_TMPDIR/sm90-"$'\uFFFD\uFFFD'".cubin" ]
  [ "$(jq -r '.files[0].path_base64' <<<"$output" | base64 -d)" = "$BATS_TEST_TMPDIR/$name" ]
  iconv -f UTF-8 -t UTF-8 <<<"$output" >/dev/null
  run --separate-stderr doctor inspect "$BATS_TEST_TMPDIR/$name"
  [ "${lines[0]}" = "$BATS_TEST_TMPDIR/sm90-\\xE9\\xFF.cubin: SASS sm_90" ]
  # an unreadable one: the error line and the JSON's error entry carry the name too
  printf 'not a binary' > "$BATS_TEST_TMPDIR/$name"
  run --separate-stderr doctor inspect --json "$BATS_TEST_TMPDIR/$name"
  [ "$(jq -r '.files[0].path_base64' <<<"$output" | base64 -d)" = "$BATS_TEST_TMPDIR/$name" ]
  [[ "$stderr" == *'sm90-\xE9\xFF.cubin'* ]]
}

@test "a kernel name with a byte that is not UTF-8: carried in kernels[].name and name_base64" {
  python3 - "$(fix f13-sm90.cubin)" "$BATS_TEST_TMPDIR/latin1.cubin" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
assert b"probe_free" in data
open(sys.argv[2], "wb").write(data.replace(b"probe_free", b"probe_fr\xe9e"))  # same length: symbols and sections agree
PY
  run --separate-stderr doctor inspect -v --json "$BATS_TEST_TMPDIR/latin1.cubin"
  [ "$status" -eq 0 ]
  k=$(jq -c '.files[0].entries[0].kernels[] | select(.name_base64)' <<<"$output")
  [ "$(jq -r .name <<<"$k")" = "_Z10probe_fr"$'\uFFFD'"ePfPKfi" ]
  [ "$(jq -r .name_base64 <<<"$k" | base64 -d | od -An -c | tr -s ' ')" = "$(printf '_Z10probe_fr\xe9ePfPKfi' | od -An -c | tr -s ' ')" ]
  [ "$(jq '[.files[0].entries[0].kernels[] | select(.name_base64 | not)] | length' <<<"$output")" = 3 ]
  run --separate-stderr doctor inspect -v "$BATS_TEST_TMPDIR/latin1.cubin"
  [[ "$output" == *'    _Z10probe_fr\xE9ePfPKfi: '* ]]
}
