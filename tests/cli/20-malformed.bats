#!/usr/bin/env bats
# Malformed and random inputs: one clear line on stderr, a documented non-zero exit (3), no
# sanitizer report, no hang.
load helpers

t() { printf '%s/%s' "$BATS_TEST_TMPDIR" "$1"; }

expect_input_error() {
  run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$@"
  [ "$status" -eq 3 ] || { echo "status $status, stderr: $stderr" >&2; return 1; }
  assert_one_line_error
}

@test "a missing file" {
  expect_input_error "$(t nothing-here.so)"
  [[ "$stderr" == *"cannot open"*"No such file or directory"* ]]
}

@test "an empty file" {
  : > "$(t empty.so)"
  expect_input_error "$(t empty.so)"
  [[ "$stderr" == *"empty file"* ]]
}

@test "a text file is of no known kind" {
  echo "hello" > "$(t hello.txt)"
  expect_input_error "$(t hello.txt)"
  [[ "$stderr" == *"not an ELF file, fatbin, cubin or wheel"* ]]
}

@test "random bytes" {
  for i in 1 2 3 4 5 6 7 8; do
    head -c $((i * 997)) /dev/urandom > "$(t random.bin)"
    printf 'XX' | dd of="$(t random.bin)" bs=1 conv=notrunc 2>/dev/null  # never a valid magic
    expect_input_error "$(t random.bin)"
  done
}

@test "a truncated shared object" {
  size=$(stat -c %s "$(fix f13-multi.so)")
  for cut in 16 64 1000 $((size / 3)) $((size / 2)) $((size - 100)); do
    head -c "$cut" "$(fix f13-multi.so)" > "$(t trunc.so)"
    run --separate-stderr timeout 60 "$MSDA_DOCTOR" inspect "$(t trunc.so)"
    # Cutting the section headers off leaves an ELF that cannot be read: error 3. A cut that
    # keeps them but loses the data they point to is also error 3.
    [ "$status" -eq 3 ] || { echo "cut $cut: status $status: $output $stderr" >&2; return 1; }
    assert_one_line_error
  done
}

@test "a truncated fatbin" {
  size=$(stat -c %s "$(fix f13-uncompressed.fatbin)")
  for cut in 8 20 100 $((size / 2)) $((size - 1)); do
    head -c "$cut" "$(fix f13-uncompressed.fatbin)" > "$(t trunc.fatbin)"
    expect_input_error "$(t trunc.fatbin)"
  done
}

@test "a compressed PTX entry declaring 2^63 bytes uncompressed is refused, not reported (issue 44)" {
  python3 - "$(t huge-ptx.fatbin)" <<'PY'
import struct, sys
container = struct.pack('<IHHQ', 0xBA55ED50, 1, 16, 64 + 64)
# kind 1 (PTX), header 64, payload 64, compressed 64, ISA 9.0, sm 90, LZ4 flag, 2^63 uncompressed
entry = struct.pack('<HHIQIIHHIIIQQQ', 1, 0x101, 64, 64, 64, 0, 0, 9, 90, 0, 0, 0x2011, 0, 1 << 63)
open(sys.argv[1], 'wb').write(container + entry + b'\x33' * 64)
PY
  expect_input_error "$(t huge-ptx.fatbin)"
  [[ "$stderr" == *"fatbin entry at offset 16: implausible uncompressed size 9223372036854775808"* ]]
  run --separate-stderr "$MSDA_DOCTOR" inspect --json "$(t huge-ptx.fatbin)"
  [ "$status" -eq 3 ]
  [[ "$output" != *"-9223372036854775808"* ]]
}

@test "a fatbin with a corrupted magic, a huge size, a zero header size" {
  cp "$(fix f13-uncompressed.fatbin)" "$(t bad.fatbin)"
  printf '\x50\xed\x55\xba\x01\x00\x10\x00\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$(t bad.fatbin)" bs=1 conv=notrunc 2>/dev/null
  expect_input_error "$(t bad.fatbin)"
  [[ "$stderr" == *"truncated fatbin container"* ]]
  printf '\x50\xed\x55\xba\x01\x00\x00\x00' | dd of="$(t bad.fatbin)" bs=1 conv=notrunc 2>/dev/null
  expect_input_error "$(t bad.fatbin)"
  [[ "$stderr" == *"header size"* ]]
}

@test "a fatbin entry whose payload size points outside its container" {
  cp "$(fix f13-uncompressed.fatbin)" "$(t bad.fatbin)"
  # first entry header starts at 16; payload_size at +8
  printf '\xff\xff\xff\xff\xff\xff\xff\x7f' | dd of="$(t bad.fatbin)" bs=1 seek=24 conv=notrunc 2>/dev/null
  expect_input_error "$(t bad.fatbin)"
  [[ "$stderr" == *"runs past its container"* ]]
}

# set_fatbin_section FILE OFFSET SIZE: points FILE's .nv_fatbin section header at OFFSET, SIZE
# bytes (OFFSET "-": kept), and extends FILE sparsely to cover it when OFFSET is given.
set_fatbin_section() {
  python3 - "$@" <<'PY'
import os, struct, sys
p, offset, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = bytearray(open(p, "rb").read())
shoff, = struct.unpack_from("<Q", d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3a)
stroff, = struct.unpack_from("<Q", d, shoff + shstrndx * shentsize + 0x18)
for i in range(shnum):
    h = shoff + i * shentsize
    name, = struct.unpack_from("<I", d, h)
    if d[stroff + name:stroff + name + 11] == b".nv_fatbin\0":
        if offset != "-":
            struct.pack_into("<Q", d, h + 0x18, int(offset))   # sh_offset
        struct.pack_into("<Q", d, h + 0x20, size)              # sh_size
open(p, "wb").write(d)
if offset != "-":
    os.truncate(p, int(offset) + size)   # sparse: no disk, and zeros when read
PY
}

@test "an ELF whose .nv_fatbin section points outside the file" {
  cp "$(fix f13-sm80.so)" "$(t bad.so)"
  set_fatbin_section "$(t bad.so)" - $((1 << 40))
  expect_input_error "$(t bad.so)"
}

@test "an ELF whose .nv_fatbin section is a 4 GiB hole of zeros is refused at once (issue 44)" {
  cp "$(fix f13-sm80.so)" "$(t hole.so)"
  local size
  size=$(stat -c %s "$(t hole.so)")
  set_fatbin_section "$(t hole.so)" $(((size + 4095) / 4096 * 4096)) $((4 << 30))
  # Before: 20 s and 4.2 GB of memory, then exit 0. Now the reader stops 64 KiB into the hole.
  start=$SECONDS
  run --separate-stderr timeout 20 "$MSDA_DOCTOR" inspect "$(t hole.so)"
  [ "$status" -eq 3 ] || { echo "status $status, stderr: $stderr" >&2; return 1; }
  assert_one_line_error
  [[ "$stderr" == *"more than 65536 zero bytes at offset 0 where a fatbin container should start (4294967296 bytes declared)"* ]]
  [ $((SECONDS - start)) -lt 10 ]
}

@test "a zip whose central directory declares more entries than it holds is corrupt (issue 44)" {
  python3 - "$BATS_TEST_TMPDIR" <<'PY'
import io, struct, sys, zipfile
b = io.BytesIO()
with zipfile.ZipFile(b, "w") as z:
    z.writestr("a.txt", "x")
    z.writestr("b.txt", "y")
good = bytes(b.getvalue())
end = good.rfind(b"PK\x05\x06")
for n in (3, 1000, 65535):
    d = bytearray(good)
    struct.pack_into("<HH", d, end + 8, n, n)
    open(f"{sys.argv[1]}/count{n}.whl", "wb").write(d)
# zip64: a record declaring 2**63 entries and its locator before the classic record, whose
# counts are saturated to say "see zip64"
cd_size, cd_off = struct.unpack_from("<II", good, end + 12)
rec = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, 1 << 63, 1 << 63, cd_size, cd_off)
loc = struct.pack("<IIQI", 0x07064B50, 0, end, 1)
classic = bytearray(good[end:])
struct.pack_into("<HH", classic, 8, 0xFFFF, 0xFFFF)
open(f"{sys.argv[1]}/count-zip64.whl", "wb").write(good[:end] + rec + loc + classic)
open(f"{sys.argv[1]}/count2.whl", "wb").write(good)
PY
  for n in 3 1000 65535 9223372036854775808; do
    f=$(t count$n.whl)
    [ "$n" = 9223372036854775808 ] && f=$(t count-zip64.whl)
    expect_input_error "$f"
    [[ "$stderr" == *"'$f' is a corrupt zip archive: its central directory declares $n entries, 2 found"* ]] ||
      { echo "$stderr" >&2; return 1; }
  done
  # the same archive with its true count is read
  run --separate-stderr "$MSDA_DOCTOR" inspect "$(t count2.whl)"
  [ "$status" -eq 0 ]
  [[ "$output" == *"no CUDA device code"* ]]
}

@test "a corrupt wheel" {
  head -c 300 /dev/urandom > "$(t junk)"
  { printf 'PK\x03\x04'; cat "$(t junk)"; } > "$(t bad.whl)"
  expect_input_error "$(t bad.whl)"
  [[ "$stderr" == *"corrupt"* ]]
}

@test "good and bad files together: the good are listed, exit 3" {
  echo nope > "$(t nope.txt)"
  run --separate-stderr "$MSDA_DOCTOR" inspect "$(fix f13-sm80.so)" "$(t nope.txt)"
  [ "$status" -eq 3 ]
  [ "$output" = "$(fix f13-sm80.so): SASS sm_80" ]
  assert_one_line_error
}
