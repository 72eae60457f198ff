#!/usr/bin/env bats
# Hostile files (issue 13): every input that once hung, gave a plausible answer for a corrupt
# file, ran in quadratic time, filled /tmp or took unbounded memory. Inputs are made here by
# tests/cli/hostile.py from the nvcc-built fixtures, so each test shows the bytes it changes.
load helpers

t() { printf '%s/%s' "$BATS_TEST_TMPDIR" "$1"; }
hostile() { python3 "$BATS_TEST_DIRNAME/hostile.py" "$@"; }

# Exit 3, one line on stderr containing $1, nothing that looks like an answer on stdout.
expect_refused() {
  local want="$1"; shift
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$@"
  [ "$status" -eq 3 ] || { echo "status $status, stdout: $output, stderr: $stderr" >&2; return 1; }
  assert_one_line_error
  [[ "$stderr" == *"$want"* ]] || { echo "stderr: $stderr (wanted: $want)" >&2; return 1; }
  [[ "$output" != *"SASS"* && "$output" != *"runs"* ]] || { echo "stdout: $output" >&2; return 1; }
}

# ---- 1. files that are not regular files ---------------------------------------------------------

@test "a FIFO is refused by type at once, not opened (it used to hang for ever)" {
  mkfifo "$(t pipe)"
  expect_refused "'$(t pipe)': a FIFO, not a regular file" "$(t pipe)"
}

@test "a link to a FIFO is refused the same way; a link to a library still works" {
  mkfifo "$(t pipe)"
  ln -s "$(t pipe)" "$(t pipe-link)"
  expect_refused "a FIFO, not a regular file" "$(t pipe-link)"
  ln -s "$(fix f13-sm80.so)" "$(t lib-link.so)"
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$(t lib-link.so)"
  [ "$status" -eq 0 ]
  [ "$output" = "$(t lib-link.so): SASS sm_80" ]
}

@test "a character device and a socket are refused by type" {
  expect_refused "'/dev/null': a character device, not a regular file" /dev/null
  python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$(t sock)"
  expect_refused "a socket, not a regular file" "$(t sock)"
}

@test "a folder holding a FIFO is still searched: the FIFO is skipped, not waited on" {
  mkdir "$(t dir)"
  mkfifo "$(t dir/pipe.so)"
  cp "$(fix f13-sm80.so)" "$(t dir/lib.so)"
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$(t dir)"
  [ "$status" -eq 0 ]
  [ "$output" = "$(t dir)/lib.so: SASS sm_80" ]
  assert_no_sanitizer_report
}

# ---- 2. cubins truncated or with corrupt headers --------------------------------------------------

@test "a truncated cubin is an error at every cut, also with --gpu (it used to say 'runs')" {
  for f in f13-sm90.cubin f13-regs40.cubin; do
    size=$(stat -c %s "$(fix $f)")
    for cut in 64 1000 $((size / 2)) $((size - 200)) $((size - 1)); do
      hostile truncate "$(fix $f)" "$(t cut.cubin)" "$cut"
      expect_refused "cubin" "$(t cut.cubin)"
      expect_refused "cubin" --gpu h100 "$(t cut.cubin)"
    done
  done
}

@test "a cubin whose section headers start past its end" {
  hostile shoff-past-end "$(fix f13-sm90.cubin)" "$(t bad.cubin)"
  expect_refused "section headers (entry size 64) at offset" --gpu h100 "$(t bad.cubin)"
}

@test "a cubin whose .nv.info section runs past its end" {
  hostile section-past-end "$(fix f13-sm90.cubin)" "$(t bad.cubin)"
  expect_refused "'.nv.info' (type 0x70000000" "$(t bad.cubin)"
}

@test "a corrupt symbol-table link is an error, not every kernel at 0 registers" {
  hostile symtab-link "$(fix f13-sm90.cubin)" "$(t bad.cubin)" shstrtab
  expect_refused "is not in its symbol table" -v "$(t bad.cubin)"
  hostile symtab-link "$(fix f13-sm90.cubin)" "$(t bad.cubin)" 0
  expect_refused "symbol table (section 3) links to section 0, which is not a string table" "$(t bad.cubin)"
  hostile symtab-link "$(fix f13-sm90.cubin)" "$(t bad.cubin)" 999
  expect_refused "links to section 999" "$(t bad.cubin)"
}

@test "a cubin corrupted inside a fatbin is an error for the fatbin" {
  cp "$(fix f13-uncompressed.fatbin)" "$(t bad.fatbin)"
  python3 - "$(t bad.fatbin)" <<'PY'
import struct, sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
i = d.find(b"\x7fELF")            # the first cubin of the fatbin
struct.pack_into("<Q", d, i + 0x28, 1 << 40)   # e_shoff
open(p, "wb").write(d)
PY
  expect_refused "truncated or corrupt cubin" "$(t bad.fatbin)"
}

@test "a host ELF whose section header table is cut is an error" {
  size=$(stat -c %s "$(fix f13-multi.so)")
  hostile truncate "$(fix f13-multi.so)" "$(t cut.so)" $((size - 100))
  expect_refused "section headers at offset" "$(t cut.so)"
}

@test "the unmodified cubins still read as before" {
  run --separate-stderr "$MSDA_DOCTOR" inspect -v "$(fix f13-sm90.cubin)"
  [ "$status" -eq 0 ]
  [[ "$output" == *"_Z10probe_regsPfPKfi: 40 registers"* ]]
  assert_no_sanitizer_report
}

# ---- 3. time linear in the number of kernel sections ----------------------------------------------

@test "a cubin of 200000 kernel sections reads in seconds (it took minutes, quadratic)" {
  hostile many-kernels "$(t many.cubin)" 200000
  # 30 s under the sanitizers; the quadratic reader needed 80 s in the release build
  run --separate-stderr timeout 30 "$MSDA_DOCTOR" inspect -v "$(t many.cubin)"
  [ "$status" -eq 0 ] || { echo "status $status" >&2; return 1; }
  [ "$(grep -c ': 0 registers' <<<"$output")" -eq 200000 ]
  assert_no_sanitizer_report
}

# ---- 4. stored wheel members under the sanitizers -------------------------------------------------

@test "a wheel with stored (uncompressed) and empty stored members" {
  hostile stored-wheel "$(t stored.whl)" "$(fix f13-sm80.so)"
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$(t stored.whl)"
  [ "$status" -eq 0 ] || { echo "status $status: $stderr" >&2; return 1; }
  [ "$output" = "$(t stored.whl)!pkg/lib.so: SASS sm_80" ]
  assert_no_sanitizer_report
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect --json -v "$(t stored.whl)"
  [ "$status" -eq 0 ]
  assert_no_sanitizer_report
}

# ---- 5. zip bombs and TMPDIR ----------------------------------------------------------------------

@test "a member whose header announces more than the default 2 GiB limit is refused unread" {
  hostile lying-size-wheel "$(t bomb.whl)" 1000 3000000000
  mkdir "$(t tmp)"
  TMPDIR="$(t tmp)" expect_refused \
    "'$(t bomb.whl)!pkg/big.so': member of 3000000000 bytes is over the 2147483648-byte limit" "$(t bomb.whl)"
}

@test "a zip bomb over MSDA_MAX_MEMBER_SIZE is refused, named, and leaves nothing in TMPDIR" {
  hostile zero-member-wheel "$(t bomb.whl)" 300000000
  [ "$(stat -c %s "$(t bomb.whl)")" -lt 1000000 ]
  mkdir "$(t tmp)"
  TMPDIR="$(t tmp)" MSDA_MAX_MEMBER_SIZE=100M expect_refused \
    "'$(t bomb.whl)!pkg/big.so': member of 300000000 bytes is over the 104857600-byte limit" "$(t bomb.whl)"
  [ -z "$(ls -A "$(t tmp)")" ]
}

@test "a member that inflates past the limit although its headers say less is cut off" {
  hostile lying-size-wheel "$(t lie.whl)" 3000000 1000
  mkdir "$(t tmp)"
  TMPDIR="$(t tmp)" MSDA_MAX_MEMBER_SIZE=1M expect_refused \
    "'$(t lie.whl)!pkg/big.so': member inflates past the 1048576-byte limit" "$(t lie.whl)"
  [ -z "$(ls -A "$(t tmp)")" ]
}

@test "wheel members are spooled under TMPDIR (it used to be ignored)" {
  hostile stored-wheel "$(t stored.whl)" "$(fix f13-sm80.so)"
  TMPDIR="$(t no-such-dir)" expect_refused \
    "'$(t stored.whl)!pkg/lib.so': cannot create a temporary file in '$(t no-such-dir)'" "$(t stored.whl)"
}

@test "a member of exactly the limit is read; one byte more is refused" {
  hostile stored-wheel "$(t stored.whl)" "$(fix f13-sm80.so)"
  size=$(stat -c %s "$(fix f13-sm80.so)")
  MSDA_MAX_MEMBER_SIZE=$size run --separate-stderr "$MSDA_DOCTOR" inspect "$(t stored.whl)"
  [ "$status" -eq 0 ]
  MSDA_MAX_MEMBER_SIZE=$((size - 1)) expect_refused "over the $((size - 1))-byte limit" "$(t stored.whl)"
}

# ---- 6. libelf's "no error" -----------------------------------------------------------------------

@test "a file with ELF magic but no valid header says what is wrong, not 'no error'" {
  hostile elf-magic-junk "$(t junk.so)"
  expect_refused "corrupt ELF file: not a valid ELF header (class, byte order or version)" "$(t junk.so)"
  [[ "$stderr" != *"no error"* ]]
}

@test "no message in the sources takes libelf's error text unchecked" {
  # elf_errmsg(-1) says "no error" when libelf has none; md_elf_why gives a fallback instead.
  run grep -rn --include='*.c' 'elf_errmsg(-1)' "$BATS_TEST_DIRNAME/../../src"
  [ "$status" -eq 1 ] || { echo "$output" >&2; return 1; }
}

# ---- 7. bounded memory ----------------------------------------------------------------------------

@test "a fatbin of more than 65536 entries is refused; 65536 are read" {
  hostile many-ptx "$(t many.fatbin)" 65537
  expect_refused "more than 65536 code entries in one file" --json "$(t many.fatbin)"
  hostile many-ptx "$(t ok.fatbin)" 65536
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$(t ok.fatbin)"
  [ "$status" -eq 0 ]
  [ "$output" = "$(t ok.fatbin): PTX compute_90" ]
}

@test "1M PTX entries with --json add under 300 MB to a one-entry file's peak (they took 1.8 GB)" {
  hostile many-ptx "$(t huge.fatbin)" 1000000
  # Peak resident memory of the child, sanitizer shadow included, less the same command's peak on
  # a one-entry file: under qemu-user the emulator's own memory counts too (about 150 MB).
  peak_of() {
    python3 - "$MSDA_DOCTOR" "$1" <<'PY'
import resource, subprocess, sys
r = subprocess.run([sys.argv[1], "inspect", "--json", sys.argv[2]], capture_output=True, text=True)
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(r.returncode, peak_kb, r.stderr.strip())
PY
  }
  hostile many-ptx "$(t one.fatbin)" 1
  read -r _ base_kb _ <<<"$(peak_of "$(t one.fatbin)")"
  run peak_of "$(t huge.fatbin)"
  read -r rc peak_kb message <<<"$output"
  [ "$rc" -eq 3 ] || { echo "$output" >&2; return 1; }
  [[ "$message" == *"more than 65536 code entries"* ]]
  [ $((peak_kb - base_kb)) -lt 300000 ] || { echo "peak $peak_kb kB, one entry $base_kb kB" >&2; return 1; }
}

# ---- fuzz regressions -----------------------------------------------------------------------------

@test "every input the GPU-code and wheel fuzz targets once crashed on is read without a sanitizer report" {
  shopt -s nullglob
  inputs=("$BATS_TEST_DIRNAME"/../fuzz/regressions/{devcode,wheel}/*)
  [ "${#inputs[@]}" -gt 0 ] || skip "no fuzz regression inputs yet (make fuzz found no crash)"
  for f in "${inputs[@]}"; do
    MSDA_MAX_MEMBER_SIZE=16M run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect -v --json "$f"
    [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || { echo "$f: status $status" >&2; return 1; }
    assert_no_sanitizer_report
  done
}
