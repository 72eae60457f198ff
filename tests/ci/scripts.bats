#!/usr/bin/env bats
# The scripts that install or run things, run for real against fakes of what they call (issue 45:
# their mutants must be killed too): scripts/install-deps with a fake dpkg-query, apt-get,
# apt-cache, sudo and id; .ci/run with a fake make; kernels/ptx-for-old-drivers.sh with a fake
# ptxas and fatbinary; kernels/gen-fatbin-asm.sh on small files, its output read whole and
# assembled. Each fake records its arguments in $LOG.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

setup() {
  FAKE="$BATS_TEST_TMPDIR/bin"
  LOG="$BATS_TEST_TMPDIR/log"
  mkdir -p "$FAKE"
  : > "$LOG"
  export LOG
}

# fake NAME BODY: an executable NAME in $FAKE running the sh text BODY.
fake() {
  printf '#!/bin/sh\n%s\n' "$2" > "$FAKE/$1"
  chmod +x "$FAKE/$1"
}

# ---- scripts/install-deps ----------------------------------------------------------------------

# A PATH of the fakes and only the real tools install-deps needs, so that the machine's own
# dpkg, apt and cross compiler are out of sight. INSTALLED: the packages dpkg reports installed
# ("all": every one).
deps_env() {
  local t
  for t in bash env uname cat; do ln -sf "$(command -v "$t")" "$FAKE/$t"; done
  # never the real tee: install-deps writes an apt source with it, and the tests may run as root
  fake tee 'echo "tee $*" >> "$LOG"; cat > /dev/null'
  fake dpkg-query 'for p; do :; done
case " $INSTALLED " in *" all "*|*" $p "*) printf "install ok installed" ;; *) exit 1 ;; esac'
  fake apt-get 'echo "apt-get $*" >> "$LOG"; [ "${APT_FAILS:-}" != "$1$2$3$4" ] || exit 100'
  fake apt-cache 'echo "apt-cache $*" >> "$LOG"; [ -z "${NO_CANDIDATE:-}" ] && echo "  Candidate: 11.8.89~11.8.0-5"; exit 0'
  fake sudo 'echo "sudo $1" >> "$LOG"; exec "$@"'
  fake id 'echo "${FAKE_UID:-1000}"'
  fake add-apt-repository 'echo "add-apt-repository $*" >> "$LOG"'
  # a Debian 12 unless a test says otherwise (install-deps reads MSDA_OS_RELEASE's file)
  printf 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_CODENAME=bookworm\n' \
    > "$BATS_TEST_TMPDIR/debian-os-release"
  printf 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_CODENAME=jammy\n' > "$BATS_TEST_TMPDIR/ubuntu-os-release"
  export MSDA_OS_RELEASE=$BATS_TEST_TMPDIR/debian-os-release
}

install_deps() {  # install_deps [ARGS...]: with deps_env's PATH
  run --separate-stderr env PATH="$FAKE" "$ROOT/scripts/install-deps" "$@"
}

@test "install-deps: anything but --test is a usage error, exit 2, nothing installed" {
  deps_env
  INSTALLED=all install_deps --tests
  [ "$status" -eq 2 ]
  [ "$stderr" = "usage: scripts/install-deps [--test]" ]
  [ ! -s "$LOG" ]
}

@test "install-deps: everything installed: says nothing, exits 0, calls no apt" {
  deps_env
  INSTALLED=all install_deps
  [ "$status" -eq 0 ]
  [ -z "$output$stderr" ]
  [ ! -s "$LOG" ]
  # --test too, the cross compiler there
  fake aarch64-linux-gnu-gcc 'exit 0'
  fake x86_64-linux-gnu-gcc 'exit 0'
  INSTALLED=all install_deps --test
  [ "$status" -eq 0 ]
  [ -z "$output$stderr" ]
  [ ! -s "$LOG" ]
}

@test "install-deps: the missing build packages installed through sudo, after apt-get update" {
  deps_env
  INSTALLED="make gcc g++ pkg-config libcurl4-openssl-dev libjansson-dev libelf-dev libarchive-dev libssl-dev ca-certificates" \
    install_deps
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(cat "$LOG")" = "sudo apt-get
apt-get -o DPkg::Lock::Timeout=600 update -q
sudo apt-get
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends libzstd-dev liblz4-dev" ]
  [ "$stderr" = "install-deps: installing libzstd-dev liblz4-dev
install-deps: done" ]
}

@test "install-deps: as root, apt-get without sudo; a failing apt-get fails the script" {
  deps_env
  FAKE_UID=0 INSTALLED="make" install_deps
  [ "$status" -eq 0 ]
  if grep -q sudo "$LOG"; then return 1; fi
  [ "$(grep -c '^apt-get .* install ' "$LOG")" -eq 1 ]
  : > "$LOG"
  FAKE_UID=0 INSTALLED="make" APT_FAILS="-oDPkg::Lock::Timeout=600install-y" install_deps
  [ "$status" -ne 0 ]
  [[ "$stderr" != *"install-deps: done"* ]]
}

@test "install-deps: not root and no sudo: exit 1 naming what is missing" {
  deps_env
  rm "$FAKE/sudo"
  INSTALLED=all-but-these install_deps
  [ "$status" -eq 1 ]
  [[ "$stderr" == "install-deps: need root (or sudo) to install: make gcc"* ]]
  [ ! -s "$LOG" ]
}

@test "install-deps: --test adds the test packages, the cross compiler when its command is missing" {
  deps_env
  local host cross
  host=$(uname -m)
  if [ "$host" = aarch64 ]; then cross=gcc-x86-64-linux-gnu; else cross=gcc-aarch64-linux-gnu; fi
  # every build package and every --test one but bats installed, nvidia-cuda-toolkit too
  INSTALLED="make gcc g++ pkg-config libcurl4-openssl-dev libjansson-dev libelf-dev libarchive-dev libssl-dev libzstd-dev liblz4-dev ca-certificates check jq zip python3 python3-venv python3-dev qemu-user clang libclang-rt-14-dev shellcheck valgrind libc6-dev-arm64-cross libc6-dev-amd64-cross nvidia-cuda-toolkit g++-11" \
    install_deps --test
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(grep ' install ' "$LOG")" = "apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends bats $cross" ]
}

@test "install-deps: on Ubuntu, multiverse is enabled by add-apt-repository, no apt source written" {
  deps_env
  export MSDA_OS_RELEASE=$BATS_TEST_TMPDIR/ubuntu-os-release
  NO_CANDIDATE=1 INSTALLED="make gcc g++ pkg-config libcurl4-openssl-dev libjansson-dev libelf-dev libarchive-dev libssl-dev libzstd-dev liblz4-dev ca-certificates" \
    install_deps --test
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"enabling Ubuntu's multiverse component"* ]]
  [[ "$stderr" == *"apt offers no nvidia-cuda-toolkit on Ubuntu 22.04.4 LTS: enable"* ]]
  grep -qx 'add-apt-repository -y multiverse' "$LOG"
  if grep -q '^tee ' "$LOG"; then return 1; fi
}

@test "install-deps: nvidia-cuda-toolkit that apt cannot offer: exit 1 saying which component to enable" {
  deps_env
  NO_CANDIDATE=1 INSTALLED="make gcc g++ pkg-config libcurl4-openssl-dev libjansson-dev libelf-dev libarchive-dev libssl-dev libzstd-dev liblz4-dev ca-certificates" \
    install_deps --test
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"install-deps: apt offers no nvidia-cuda-toolkit on "* ]]
  [ "$(grep -c 'update -q' "$LOG")" -eq 2 ]
  # on Debian, the non-free component written as an apt source first (through the fake tee)
  grep -qx 'tee /etc/apt/sources.list.d/msda-doctor-nonfree.sources' "$LOG"
  if grep -q 'add-apt-repository' "$LOG"; then return 1; fi
  if grep -q ' install ' "$LOG"; then return 1; fi
  # offered: installed with the rest
  : > "$LOG"
  INSTALLED="make gcc g++ pkg-config libcurl4-openssl-dev libjansson-dev libelf-dev libarchive-dev libssl-dev libzstd-dev liblz4-dev ca-certificates" \
    install_deps --test
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(grep -c 'update -q' "$LOG")" -eq 1 ]
  grep -q ' install .* nvidia-cuda-toolkit g++-11' "$LOG"
}

@test "install-deps: without dpkg-query or apt-get, exit 1 and the list to install by hand" {
  deps_env
  rm "$FAKE/dpkg-query"
  install_deps
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"it has no dpkg-query or apt-get"*"make gcc g++"* ]]
  deps_env
  rm "$FAKE/apt-get"
  install_deps
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"it has no dpkg-query or apt-get"* ]]
}

# ---- .ci/run --------------------------------------------------------------------------------------

@test ".ci/run: make check in the repository's root, from anywhere, its status its own" {
  fake make 'echo "$PWD $*" >> "$LOG"; exit "${MAKE_STATUS:-0}"'
  cd "$BATS_TEST_TMPDIR"
  run env PATH="$FAKE:$PATH" "$ROOT/.ci/run"
  [ "$status" -eq 0 ]
  [ "$(cat "$LOG")" = "$ROOT check" ]
  run env PATH="$FAKE:$PATH" MAKE_STATUS=3 "$ROOT/.ci/run"
  [ "$status" -eq 3 ]
}

# ---- kernels/ptx-for-old-drivers.sh ----------------------------------------------------------------

ptx_fakes() {
  fake ptxas 'echo "ptxas $*" >> "$LOG"; cp "$2" "$BATS_TEST_TMPDIR/seen.ptx"; [ -z "${PTXAS_FAILS:-}" ] || exit 1; : > "$4"'
  fake fatbinary 'echo "fatbinary $*" >> "$LOG"; echo fatbin > "${1#--create=}"'
  printf '//\n// Generated by NVIDIA NVVM Compiler\n.version 9.0\n.target sm_62\n.address_size 64\n// .version 1.0 in a comment\n' \
    > "$BATS_TEST_TMPDIR/in.ptx"
}

lower() {  # lower ARGS...: ptx-for-old-drivers.sh with the fakes first on PATH
  run --separate-stderr env PATH="$FAKE:$PATH" sh "$ROOT/kernels/ptx-for-old-drivers.sh" "$@"
}

@test "ptx-for-old-drivers.sh: the PTX's .version lowered, checked by ptxas, packed by fatbinary, nothing left" {
  ptx_fakes
  local out="$BATS_TEST_TMPDIR/out.fatbin"
  lower 6.5 62 -o "$out" "$BATS_TEST_TMPDIR/in.ptx"
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(cat "$LOG")" = "ptxas -arch=sm_62 $out.lowered.ptx -o $out.check.cubin -O0
fatbinary --create=$out -64 --image3=kind=ptx,sm=62,file=$out.lowered.ptx" ]
  [ "$(sed -n 3p "$BATS_TEST_TMPDIR/seen.ptx")" = ".version 6.5" ]
  [ "$(grep -c '^\.version' "$BATS_TEST_TMPDIR/seen.ptx")" -eq 1 ]
  [ "$(cat "$out")" = fatbin ]
  [ ! -e "$out.lowered.ptx" ]
  [ ! -e "$out.check.cubin" ]
}

@test "ptx-for-old-drivers.sh: PTX that needs a newer ISA fails, exit 1, no fatbin" {
  ptx_fakes
  PTXAS_FAILS=1 lower 6.5 62 -o "$BATS_TEST_TMPDIR/out.fatbin" "$BATS_TEST_TMPDIR/in.ptx"
  [ "$status" -eq 1 ]
  [ "$stderr" = "ptx-for-old-drivers.sh: the compute_62 PTX needs a newer ISA than 6.5 (see ptxas above)" ]
  [ ! -e "$BATS_TEST_TMPDIR/out.fatbin" ]
  if grep -q fatbinary "$LOG"; then return 1; fi
  [ ! -e "$BATS_TEST_TMPDIR/out.fatbin.lowered.ptx" ]
}

@test "ptx-for-old-drivers.sh: a PTX without .version, exit 1; bad arguments, exit 2; no tool called" {
  ptx_fakes
  echo ".target sm_62" > "$BATS_TEST_TMPDIR/bare.ptx"
  lower 6.5 62 -o "$BATS_TEST_TMPDIR/out.fatbin" "$BATS_TEST_TMPDIR/bare.ptx"
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"no .version line in"* ]]
  lower 6.5 62 -o "$BATS_TEST_TMPDIR/out.fatbin"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *usage* ]]
  lower 6.5 62 -x "$BATS_TEST_TMPDIR/out.fatbin" "$BATS_TEST_TMPDIR/in.ptx"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *usage* ]]
  lower 65 62 -o "$BATS_TEST_TMPDIR/out.fatbin" "$BATS_TEST_TMPDIR/in.ptx"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"bad ISA '65'"* ]]
  lower 6.5 sm_62 -o "$BATS_TEST_TMPDIR/out.fatbin" "$BATS_TEST_TMPDIR/in.ptx"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"bad SM 'sm_62'"* ]]
  [ ! -s "$LOG" ]
}

# ---- kernels/gen-fatbin-asm.sh ------------------------------------------------------------------------

gen() {  # gen ARGS...
  run --separate-stderr sh "$ROOT/kernels/gen-fatbin-asm.sh" "$@"
}

@test "gen-fatbin-asm.sh: two images of two parts, the table in the order given, and it assembles" {
  cd "$BATS_TEST_TMPDIR"
  printf 'a' > a0; printf 'bb' > a1; printf 'ccc' > b0; printf 'dddd' > b1
  gen out.S 2 13000 13000 0 a0 a1 11000 11080 65 b0 b1
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  cat > want.S <<'EOF'
/* Generated by kernels/gen-fatbin-asm.sh: do not edit. */
    .section .nv_fatbin,"a"
    .balign 64
.Lmsda_fatbin_0_0:
    .incbin "a0"
.Lmsda_fatbin_0_0_end:
    .balign 64
.Lmsda_fatbin_0_1:
    .incbin "a1"
.Lmsda_fatbin_0_1_end:
    .balign 64
.Lmsda_fatbin_1_0:
    .incbin "b0"
.Lmsda_fatbin_1_0_end:
    .balign 64
.Lmsda_fatbin_1_1:
    .incbin "b1"
.Lmsda_fatbin_1_1_end:
    .section .data.rel.ro.msda_fatbin_table,"aw"
    .balign 8
.Lmsda_blobs_0:
    .8byte .Lmsda_fatbin_0_0
    .8byte .Lmsda_fatbin_0_0_end - .Lmsda_fatbin_0_0
    .8byte .Lmsda_fatbin_0_1
    .8byte .Lmsda_fatbin_0_1_end - .Lmsda_fatbin_0_1
.Lmsda_blobs_1:
    .8byte .Lmsda_fatbin_1_0
    .8byte .Lmsda_fatbin_1_0_end - .Lmsda_fatbin_1_0
    .8byte .Lmsda_fatbin_1_1
    .8byte .Lmsda_fatbin_1_1_end - .Lmsda_fatbin_1_1
    .globl msda_fatbin_table
    .hidden msda_fatbin_table
    .type msda_fatbin_table, %object
msda_fatbin_table:
    .4byte 13000
    .4byte 13000
    .4byte 0
    .4byte 2
    .8byte .Lmsda_blobs_0
    .4byte 11000
    .4byte 11080
    .4byte 65
    .4byte 2
    .8byte .Lmsda_blobs_1
    .size msda_fatbin_table, 48
    .section .rodata.msda_fatbin_count,"a"
    .balign 4
    .globl msda_fatbin_table_count
    .hidden msda_fatbin_table_count
    .type msda_fatbin_table_count, %object
msda_fatbin_table_count:
    .4byte 2
    .size msda_fatbin_table_count, 4
    .section .note.GNU-stack,"",%progbits
EOF
  diff want.S out.S
  [ -z "$(ls ./*.tmp 2>/dev/null)" ]
  cc -c -o out.o out.S
}

@test "gen-fatbin-asm.sh: each malformed call, exit 2 with its reason and no output" {
  cd "$BATS_TEST_TMPDIR"
  printf 'a' > a0; : > empty
  gen out.S
  [ "$status" -eq 2 ]
  [[ "$stderr" == *usage* ]]
  gen out.S x 13000 13000 0 a0
  [ "$status" -eq 2 ]
  [ "$stderr" = "gen-fatbin-asm.sh: 'x' is not a number" ]
  gen out.S 0
  [ "$status" -eq 2 ]
  [ "$stderr" = "gen-fatbin-asm.sh: PARTS must be at least 1" ]
  gen out.S 1
  [ "$status" -eq 2 ]
  [ "$stderr" = "gen-fatbin-asm.sh: no fatbin given" ]
  gen out.S 1 13000 13000 0
  [ "$status" -eq 2 ]
  [[ "$stderr" == "gen-fatbin-asm.sh: arguments come in groups of 4"* ]]
  gen out.S 1 13000 13000 0 a0 13000
  [ "$status" -eq 2 ]
  [[ "$stderr" == "gen-fatbin-asm.sh: arguments come in groups of 4"* ]]
  gen out.S 1 13000 13000 0 empty
  [ "$status" -eq 2 ]
  [ "$stderr" = "gen-fatbin-asm.sh: missing or empty fatbin: empty" ]
  gen out.S 1 13000 13000 0 missing
  [ "$status" -eq 2 ]
  gen out.S 1 13000 x13 0 a0
  [ "$status" -eq 2 ]
  [ "$stderr" = "gen-fatbin-asm.sh: 'x13' is not a number" ]
  gen out.S 1 13000 13000 0 'a"0'
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"unsupported file name"* ]]
  [ ! -e out.S ]
  [ -z "$(ls ./*.rows.tmp ./*.blobs.tmp 2>/dev/null)" ]
}
