#!/usr/bin/env bats
# The portable release of this CPU (make release-host: dist/msda-doctor-VERSION-linux-CPU.tar.gz
# and the tool's wheel): glibc floor and libraries read with the project's own ELF code
# (tools/release-tool.c check), what the tarball and the wheel hold, the wheel installed by pip
# into a fresh virtual environment, and build from a folder outside the checkout, dry and real.
# Run by make check-release, which sets MSDA_DIST, MSDA_RELEASE_TOOL, MSDA_VERSION, HOST_CPU's
# build cache MSDA_BUILD_CACHE and MSDA_DOCTOR_DEBIAN (the build linked against Debian's -dev
# libraries, which must fail the check).
bats_require_minimum_version 1.5.0
ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
load ../cli/host-cpu

setup() {
  TARBALL="$MSDA_DIST/msda-doctor-$MSDA_VERSION-linux-$HOST_CPU.tar.gz"
  WHEEL="$MSDA_DIST/msda_doctor-$MSDA_VERSION-py3-none-manylinux_2_17_$HOST_CPU.manylinux2014_$HOST_CPU.whl"
  [ -f "$TARBALL" ] && [ -f "$WHEEL" ]
  # The tarball unpacked, in a folder that is not the checkout.
  UNPACKED="$BATS_TEST_TMPDIR/unpacked"
  mkdir -p "$UNPACKED"
  tar -xzf "$TARBALL" -C "$UNPACKED"
  TOOL="$UNPACKED/msda-doctor-$MSDA_VERSION-linux-$HOST_CPU/bin/msda-doctor"
}

@test "release: the binary needs glibc 2.17 at most and only glibc's libraries" {
  run --separate-stderr "$MSDA_RELEASE_TOOL" check "$TOOL" "$HOST_CPU"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [[ "$output" =~ highest\ glibc\ symbol\ version\ GLIBC_2\.([0-9]+)(\.[0-9]+)?,\ needs ]]
  [ "${BASH_REMATCH[1]}" -le 17 ]
  local lib
  for lib in ${output##*, needs }; do
    case "$lib" in libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|librt.so.1|ld-linux-*) ;;
      *) echo "links $lib" >&2; return 1 ;; esac
  done
}

@test "release: the check refuses the build linked against Debian's libraries, naming why" {
  run --separate-stderr "$MSDA_RELEASE_TOOL" check "$MSDA_DOCTOR_DEBIAN" "$HOST_CPU"
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"needs glibc newer than 2.17"* || "$stderr" == *"which is not one of glibc's libraries"* ]]
  run --separate-stderr "$MSDA_RELEASE_TOOL" check "$TOOL" "$FOREIGN_CPU"
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"not an ELF file for $FOREIGN_CPU"* ]]
}

@test "release: the tarball holds the binary, the man page and every bundled library's notice" {
  local top="$UNPACKED/msda-doctor-$MSDA_VERSION-linux-$HOST_CPU"
  [ -x "$top/bin/msda-doctor" ]
  grep -q '^\.TH' "$top/share/man/man1/msda-doctor.1"
  [ -f "$top/share/doc/msda-doctor/NOTICES/NOTICE.md" ]
  # every library release/static-deps.list bundles (its NAME column, which names the folder)
  local lib libs
  libs=$(awk '!/^#/ && NF { print $1 }' "$ROOT/release/static-deps.list")
  [ "$(echo "$libs" | wc -w)" -ge 9 ]
  for lib in $libs; do
    [ -n "$(find "$top/share/doc/msda-doctor/NOTICES/$lib" -type f 2>/dev/null)" ] || { echo "no notice for $lib" >&2; return 1; }
  done
  run "$TOOL" --version
  [ "$status" -eq 0 ]
  [[ "$output" == *"$MSDA_VERSION"* ]]
}

@test "release: the wheel carries the binary as an executable script; pip installs it and it runs" {
  # the zip entry's Unix mode (the high 16 bits of its external attributes), as zipinfo shows it
  run python3 -c 'import stat, sys, zipfile; print(stat.filemode(zipfile.ZipFile(sys.argv[1]).getinfo(sys.argv[2]).external_attr >> 16))' \
      "$WHEEL" "msda_doctor-$MSDA_VERSION.data/scripts/msda-doctor"
  [ "$status" -eq 0 ]
  [[ "$output" == -rwxr-xr-x* ]]
  python3 -m venv "$BATS_TEST_TMPDIR/venv"
  run "$BATS_TEST_TMPDIR/venv/bin/pip" install --no-index --no-cache-dir -q "$WHEEL"
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
  [ -x "$BATS_TEST_TMPDIR/venv/bin/msda-doctor" ]
  cmp "$BATS_TEST_TMPDIR/venv/bin/msda-doctor" "$TOOL"
  [ -f "$BATS_TEST_TMPDIR/venv/share/man/man1/msda-doctor.1" ]
  run "$BATS_TEST_TMPDIR/venv/bin/msda-doctor" --version
  [ "$status" -eq 0 ]
  [[ "$output" == *"$MSDA_VERSION"* ]]
  # diagnose from the installed tool, with its probes: a report, exit 0 or 1, never a crash.
  run --separate-stderr "$BATS_TEST_TMPDIR/venv/bin/msda-doctor" diagnose --json
  [ "$status" -le 1 ] || { echo "exit $status: $stderr" >&2; return 1; }
  jq -e '.findings | type == "array"' <<<"$output" >/dev/null
}

@test "release: build --dry-run from a folder outside the checkout plans on the sources built in" {
  cd "$BATS_TEST_TMPDIR"
  run --separate-stderr "$TOOL" build --arch sm_90 --platform "$HOST_CPU" --dry-run --json --cache "$BATS_TEST_TMPDIR/cache"
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [ "$(jq -r .source.embedded <<<"$output")" = true ]
  [ "$(jq '[.plan.targets[] | select(.sm == 90)] | length' <<<"$output")" -ge 1 ]
}

@test "release: a real one-architecture build from a folder outside the checkout writes a wheel with sm_90 code" {
  command -v nvcc >/dev/null || skip "no nvcc on PATH"
  cd "$BATS_TEST_TMPDIR"
  # The test build cache: what check-kernels compiled is reused (the keys leave the folder out).
  run --separate-stderr "$TOOL" build --arch sm_90 --platform "$HOST_CPU" --cache "$MSDA_BUILD_CACHE" \
      --out "$BATS_TEST_TMPDIR/dist"
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  local wheel
  wheel=$(compgen -G "$BATS_TEST_TMPDIR/dist/msda-*_$HOST_CPU.whl")
  run --separate-stderr "$TOOL" inspect --gpu sm_90 "$wheel"
  [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr" >&2; return 1; }
  [[ "$output" == *"SASS sm_90"* ]]
}
