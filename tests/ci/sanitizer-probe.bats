#!/usr/bin/env bats
# The Makefile probes the sanitizer options (tests/sanitizer-env) once when a single suite is
# asked for (make check-kernels, ...), so that the suite's prerequisites run with them too, and
# keeps the options a calling `make check` already probed. A target defined on the command line
# (--eval) stands in for a suite and its prerequisite: what they print is what their recipes see.
# The compiler is a stand-in whose programs fail as LeakSanitizer does under qemu-user, so that
# the probe has something to add on every machine.
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

setup() {
  QEMU_CC="$BATS_TEST_TMPDIR/qemu-cc"
  cat > "$QEMU_CC" <<'CC'
#!/bin/sh
# Writes, as the program -o names, one that fails as a sanitized program does under qemu-user.
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
printf '#!/bin/sh\necho "==1==LeakSanitizer has encountered a fatal error." >&2\nexit 1\n' > "$out"
chmod +x "$out"
CC
  chmod +x "$QEMU_CC"
}

probe_make() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "$@" make -s --no-print-directory -C "$ROOT" CC="$QEMU_CC" \
    --eval 'probe-prerequisite: ; @echo "prerequisite probed=$${MSDA_SANITIZER_PROBED:-} asan=$${ASAN_OPTIONS:-}"' \
    --eval 'check-probe: probe-prerequisite ; @echo "suite probed=$${MSDA_SANITIZER_PROBED:-} asan=$${ASAN_OPTIONS:-}"' \
    check-probe
}

@test "a suite asked for alone probes the options, for its prerequisites too, keeping the caller's" {
  run probe_make -u MSDA_SANITIZER_PROBED ASAN_OPTIONS=abort_on_error=1
  [ "$status" -eq 0 ]
  [[ "$output" == *"LeakSanitizer cannot run on this machine"* ]]
  [[ "$output" == *"prerequisite probed=1 asan=abort_on_error=1:detect_leaks=0"* ]]
  [[ "$output" == *"suite probed=1 asan=abort_on_error=1:detect_leaks=0"* ]]
}

@test "under make check a suite keeps the options make check probed" {
  run probe_make MSDA_SANITIZER_PROBED=1 ASAN_OPTIONS=given=1
  [ "$status" -eq 0 ]
  [[ "$output" != *"LeakSanitizer"* ]]
  [[ "$output" == *"prerequisite probed=1 asan=given=1"* ]]
  [[ "$output" == *"suite probed=1 asan=given=1"* ]]
}

@test "a goal that runs no test is not probed" {
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MSDA_SANITIZER_PROBED ASAN_OPTIONS=mine=1 \
    make -s --no-print-directory -C "$ROOT" CC="$QEMU_CC" --eval 'probe-other: ; @echo "probed=$${MSDA_SANITIZER_PROBED:-} asan=$${ASAN_OPTIONS:-}"' probe-other
  [ "$status" -eq 0 ]
  [ "$output" = "probed= asan=mine=1" ]
}
