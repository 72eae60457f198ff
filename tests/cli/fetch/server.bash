# The loopback server both fetch suites use (redist.py serve): start, stop, and the checks of a
# clean run; and the redist platforms of this host and of the other CPU, so that the suites are
# the same on x86_64 and aarch64 hosts. Loaded by fetch.bats and wheels.bats; $REPO is the
# folder it serves.

# Paths from this file's own folder, so that suites elsewhere (08-exit-codes.bats) load it too.
SERVER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REDIST="$SERVER_DIR/redist.py"
ROOT="$(cd "$SERVER_DIR/../../.." && pwd)"
# shellcheck source=../host-cpu.bash
source "$SERVER_DIR/../host-cpu.bash"

# The platform a machine of `uname -m` CPU fetches by default (recipes/redist.json).
redist_platform() { jq -r --arg cpu "$1" '.host_platforms[$cpu][0]' "$ROOT/recipes/redist.json"; }
HOST_PLATFORM=$(redist_platform "$HOST_CPU")
FOREIGN_PLATFORM=$(redist_platform "$FOREIGN_CPU")
# The manylinux machine of the host platform's compiler wheels.
HOST_WHEEL_MACHINE=$(jq -r --arg p "$HOST_PLATFORM" '.wheels.platforms[$p]' "$ROOT/recipes/redist.json")

# Starts the server on a free port (it picks one and writes it down) into $URL. serve --tls CERT
# KEY serves https with that certificate instead.
serve() {
  rm -f "$BATS_TEST_TMPDIR/port"
  python3 "$REDIST" serve "$REPO" "$BATS_TEST_TMPDIR/port" "$@" 3>&- &
  SERVER_PID=$!
  for _ in $(seq 100); do
    [ -s "$BATS_TEST_TMPDIR/port" ] && break
    sleep 0.05
  done
  [ -s "$BATS_TEST_TMPDIR/port" ] || { echo "the server did not start" >&2; return 1; }
  URL="http$([ "${1:-}" = --tls ] && echo s)://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/port")"
}

teardown() {
  if [ -n "${SERVER_PID:-}" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}

faults() { printf '%s\n' "$1" > "$REPO/faults.json"; }

# Exit CODE, one error line holding TEXT, and no toolkit folder (nor a temporary one) in DEST.
assert_failed() {
  local code=$1 text=$2
  assert_clean_stderr
  [ "$status" -eq "$code" ] || { echo "exit $status, want $code; stderr: $stderr" >&2; return 1; }
  [ "$(grep -c . <<<"$stderr")" -eq 1 ] || { echo "stderr: $stderr" >&2; return 1; }
  [[ "$stderr" == "msda-doctor: error: "*"$text"* ]] || { echo "stderr '$stderr' lacks '$text'" >&2; return 1; }
  if compgen -G "$DEST/cuda/*/*" >/dev/null || compgen -G "$DEST/cuda/*/.*.tmp-*" >/dev/null; then
    echo "a toolkit or temporary folder was left: $(ls -AR "$DEST")" >&2
    return 1
  fi
}

assert_clean_stderr() {
  if grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' <<<"$stderr"; then echo "$stderr" >&2; return 1; fi
}
