#!/usr/bin/env bats
# fetch's safety rules at their edges (issue 45): for each rule, the nearest input on each side
# of it, so that a rule made looser or stricter by one step fails here. Symlink targets in an
# archive (absolute against relative; one level out of the toolkit against zero), a download kept
# from an earlier run whose bytes changed (checked by its sha256, never trusted by its name or
# size), a connection cut with retries left (resumed in the same run), and redirects (to plain
# http on a host that is not loopback: refused before connecting; to https on loopback:
# followed). Against the loopback server of tests/cli/fetch/redist.py, as fetch.bats.
bats_require_minimum_version 1.5.0
load server

V=11.8.0
NVCC_FILE=cuda_nvcc-$HOST_PLATFORM-11.8.89-archive.tar.xz
NVCC_ARCHIVE=cuda_nvcc/$HOST_PLATFORM/$NVCC_FILE
CUDART_TOP=cuda_cudart-$HOST_PLATFORM-11.8.89-archive
CUDART_ARCHIVE=cuda_cudart/$HOST_PLATFORM/$CUDART_TOP.tar.xz

setup() {
  REPO="$BATS_TEST_TMPDIR/repo"
  DEST="$BATS_TEST_TMPDIR/dest"
  TK="$DEST/cuda/11.8/$HOST_PLATFORM"
  DL="$DEST/cuda/11.8/.$HOST_PLATFORM.download"
  mkdir -p "$REPO"
}

# The second server of the redirect tests (https), stopped with the first.
teardown() {
  local pid
  for pid in ${SERVER_PID:-} ${TLS_PID:-}; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

repo() { python3 "$REDIST" make "$REPO" "$V" "$@"; }

# The fetch with short waits, no proxy or CA variable from the caller's environment and no
# mirror variable; VAR=VALUE words before the options go into its environment.
fetch() {
  local vars=()
  while [[ "${1:-}" == *=* && "$1" != -* ]]; do vars+=("$1"); shift; done
  run --separate-stderr env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY \
    -u SSL_CERT_FILE -u SSL_CERT_DIR -u CURL_CA_BUNDLE -u MSDA_CUDA_MIRROR "${vars[@]}" \
    "$MSDA_DOCTOR" fetch --cuda "$V" --mirror "$URL" --dest "$DEST" --timeout 2 "$@"
}

assert_fetched() {
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "exit $status, want 0; stderr: $stderr" >&2; return 1; }
  [ -x "$TK/bin/nvcc" ] || { echo "no $TK/bin/nvcc" >&2; return 1; }
}

# How many times the server was asked for PATH.
requests_for() { grep -c "^$1 " "$REPO/requests.log" || true; }

# --- symlink targets: absolute (refused) against relative (kept) --------------------------------

@test "boundary: a symlink member whose target is absolute is refused, even one that names a toolkit file" {
  repo --link lib/alias=/libcudart.so.11.0
  serve
  fetch
  assert_failed 3 "symlink '$CUDART_TOP/lib/alias' -> '/libcudart.so.11.0' points outside the toolkit"
}

@test "boundary: the same symlink with a relative target is kept as written" {
  # one character from the absolute one, and unlike the archive's own lib/libcudart.so link it
  # begins with a '.', the character just below '/'
  repo --link lib/alias=./libcudart.so.11.0
  serve
  fetch
  assert_fetched
  [ "$(readlink "$TK/lib/alias")" = ./libcudart.so.11.0 ]
  [ "$(realpath "$TK/lib/alias")" = "$(realpath "$TK/lib/libcudart.so.11.0")" ]
}

# --- member names: "./top/..." (as `tar -C DIR -c .` writes them) is the same member as "top/..." --

@test "boundary: an archive whose member names begin with './' unpacks as the same toolkit" {
  repo --dot-names
  serve
  fetch
  assert_fetched
  [ -f "$TK/include/cuda.h" ] && [ "$(readlink "$TK/lib/libcudart.so")" = libcudart.so.11.0 ]
  [ ! -e "$TK/.$CUDART_TOP" ] && [ ! -e "$TK/$CUDART_TOP" ]
}

# --- member names at PATH_MAX: 4096 bytes (refused as a name) against 4095 (read, then refused) ---

# A symlink member whose whole name, top folder included, is LENGTH bytes.
long_member() { local n=$(($1 - ${#CUDART_TOP} - 1 - 4)); printf 'lib/%*s' "$n" '' | tr ' ' n; }

@test "boundary: a member name of 4096 bytes is refused as longer than 4095 bytes, and nothing is left" {
  repo --link "$(long_member 4096)=x"
  serve
  fetch
  assert_failed 3 "$CUDART_TOP.tar.xz': a member name longer than 4095 bytes"
}

@test "boundary: a member name of 4095 bytes is read, and refused only for the path it would have" {
  repo --link "$(long_member 4095)=x"
  serve
  fetch
  assert_failed 3 "$CUDART_TOP.tar.xz': member '$CUDART_TOP/lib/nnnnnnnn"
  [[ "$stderr" != *"a member name longer than"* ]]
}

# --- symlinks that climb: one level out (refused) against zero levels out (kept) -----------------

@test "boundary: a symlink that climbs exactly one level out of the toolkit is refused" {
  # lib/up -> ../../include: lib/.. is the toolkit, one more .. is DEST/cuda/11.8, outside it
  repo --link lib/up=../../include
  serve
  fetch
  assert_failed 3 "symlink '$CUDART_TOP/lib/up' -> '../../include' points outside the toolkit"
  [ ! -e "$DEST/cuda/11.8/include" ]
}

@test "boundary: a symlink that climbs to the toolkit's top and stays inside is kept" {
  # lib/up -> ../include: up to the toolkit's own folder, zero levels out
  repo --link lib/up=../include
  serve
  fetch
  assert_fetched
  [ "$(readlink "$TK/lib/up")" = ../include ]
  [ "$(realpath "$TK/lib/up")" = "$(realpath "$TK/include")" ]
  [ -f "$TK/lib/up/cuda.h" ]
}

# --- a download kept from an earlier run: its sha256 decides, not its name or size ---------------

# An earlier run that downloaded and checked cuda_nvcc, then failed on cuda_cudart: the checked
# archive stays in the download folder under its final name, for the next run.
kept_download() {
  faults "{\"$CUDART_ARCHIVE\": \"404\"}"
  fetch --retries 0
  assert_failed 5 "HTTP 404"
  [ -f "$DL/$NVCC_FILE" ] || { ls -la "$DL" >&2; return 1; }
  cmp "$DL/$NVCC_FILE" "$REPO/$NVCC_ARCHIVE"
  rm -f "$REPO/faults.json"
  : > "$REPO/requests.log"
}

# The file's byte at the middle, changed: same size, other bytes.
tamper() {
  local file=$1 size
  size=$(stat -c %s "$file")
  python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))' \
    "$file" $((size / 2))
  [ "$(stat -c %s "$file")" -eq "$size" ]
  if cmp -s "$file" "$REPO/$NVCC_ARCHIVE"; then echo "$file: not changed" >&2; return 1; fi
}

# The toolkit's ptxas is the one of the repository's archive (the filler of redist.py).
assert_good_ptxas() {
  tar -xJOf "$REPO/$NVCC_ARCHIVE" "${NVCC_FILE%.tar.xz}/bin/ptxas" | cmp - "$TK/bin/ptxas"
}

@test "boundary: a kept download whose sum still matches is used as it is, not fetched again" {
  repo
  serve
  kept_download
  fetch --retries 0
  assert_fetched
  [ "$(requests_for "$NVCC_ARCHIVE")" -eq 0 ] || { cat "$REPO/requests.log" >&2; return 1; }
  [ "$(requests_for "$CUDART_ARCHIVE")" -eq 1 ]
  assert_good_ptxas
}

@test "boundary: a kept download changed since (same size, other bytes) is fetched again, whole" {
  repo
  serve
  kept_download
  tamper "$DL/$NVCC_FILE"
  fetch --retries 0
  assert_fetched
  # fetched again from its first byte, not resumed from the changed file
  [ "$(grep "^$NVCC_ARCHIVE " "$REPO/requests.log")" = "$NVCC_ARCHIVE -" ] || { cat "$REPO/requests.log" >&2; return 1; }
  assert_good_ptxas
}

@test "boundary: a kept partial download of full length with other bytes is refused by its sum and removed" {
  repo
  serve
  # An earlier run cut part way: its .part stays for a resume ...
  faults "{\"$NVCC_ARCHIVE\": \"cut:1\"}"
  fetch --retries 0
  assert_failed 5 "$NVCC_FILE"
  [ -f "$DL/$NVCC_FILE.part" ]
  rm -f "$REPO/faults.json"
  # ... and is now as long as the archive, with other bytes: nothing is left to ask for.
  cp "$REPO/$NVCC_ARCHIVE" "$DL/$NVCC_FILE.part"
  tamper "$DL/$NVCC_FILE.part"
  : > "$REPO/requests.log"
  fetch --retries 0
  assert_failed 6 "sha256 mismatch for cuda_nvcc"
  [ ! -e "$DL/$NVCC_FILE.part" ]
  [ ! -e "$DL/$NVCC_FILE" ]
  [ "$(requests_for "$NVCC_ARCHIVE")" -eq 0 ]
  # The bad bytes are gone, so the next run downloads the archive whole and succeeds.
  fetch --retries 0
  assert_fetched
  [ "$(grep "^$NVCC_ARCHIVE " "$REPO/requests.log")" = "$NVCC_ARCHIVE -" ]
  assert_good_ptxas
}

# --- a connection cut with retries left: resumed in the same run ---------------------------------

@test "boundary: a connection cut part way with a retry left resumes with a Range request in the same run" {
  repo
  serve
  size=$(stat -c %s "$REPO/$NVCC_ARCHIVE")
  faults "{\"$NVCC_ARCHIVE\": \"cut:1\"}"
  fetch --retries 1 --json
  assert_fetched
  # the first request cut after half the body, the retry asks for the rest only
  [ "$(grep "^$NVCC_ARCHIVE " "$REPO/requests.log")" = "$NVCC_ARCHIVE -
$NVCC_ARCHIVE bytes=$((size / 2))-" ] || { cat "$REPO/requests.log" >&2; return 1; }
  assert_good_ptxas
  [ ! -e "$DL" ]
}

# --- redirects ------------------------------------------------------------------------------------

@test "boundary: a 302 to plain http:// on a host that is not loopback is refused before connecting" {
  repo
  serve
  # 192.0.2.1 (TEST-NET-1) must never be contacted: a connection there would hang or fail
  # with a connect error, which the message would then name.
  faults "{\"$NVCC_ARCHIVE\": \"redirect:http://192.0.2.1/$NVCC_ARCHIVE\"}"
  fetch --retries 2
  assert_failed 5 "cannot download '$URL/$NVCC_ARCHIVE': HTTP 302 redirects to http://192.0.2.1/$NVCC_ARCHIVE (plain http), which is not followed: only https may follow"
  [[ "$stderr" != *onnect* && "$stderr" != *"timed out"* ]]
  # refused, not retried: a connection tried there would have failed as a transient error and
  # been retried, each retry asking the loopback server again
  [ "$(requests_for "$NVCC_ARCHIVE")" -eq 1 ]
}

@test "boundary: a 302 to https:// on loopback is followed, its certificate checked" {
  repo
  serve
  # the same repository served over https by a second server, with the test's own certificate
  local certs="$BATS_TEST_TMPDIR/certs" tls_repo="$BATS_TEST_TMPDIR/tls-repo"
  mkdir -p "$certs" "$tls_repo"
  cp -a "$REPO/." "$tls_repo/"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$certs/key.pem" -out "$certs/loopback.pem" 2>/dev/null
  python3 "$REDIST" serve "$tls_repo" "$BATS_TEST_TMPDIR/tls-port" --tls "$certs/loopback.pem" "$certs/key.pem" 3>&- &
  TLS_PID=$!
  for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/tls-port" ] && break; sleep 0.05; done
  [ -s "$BATS_TEST_TMPDIR/tls-port" ]
  faults "{\"$NVCC_ARCHIVE\": \"redirect:https://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/tls-port")/$NVCC_ARCHIVE\"}"
  fetch SSL_CERT_FILE="$certs/loopback.pem" --retries 0
  assert_fetched
  [ "$(requests_for "$NVCC_ARCHIVE")" -eq 1 ]
  [ "$(grep -c "^$NVCC_ARCHIVE " "$tls_repo/requests.log")" -eq 1 ]
  assert_good_ptxas
}

@test "an archive corrupt inside but matching its published sum: exit 3 naming the member, no sanitizer report" {
  # The member's name outlived its string in libarchive (freed when the entry was renamed), so
  # the error read freed memory: a heap-use-after-free under ASan, a garbage name otherwise.
  repo
  python3 - "$REPO/redistrib_$V.json" "$REPO/$NVCC_ARCHIVE" "$HOST_PLATFORM" <<'PY'
import hashlib, json, os, sys
manifest, archive, platform = sys.argv[1:4]
with open(archive, "r+b") as f:   # one byte in the middle of the compressed stream
    f.seek(os.path.getsize(archive) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0xFF]))
m = json.load(open(manifest))
m["cuda_nvcc"][platform]["sha256"] = hashlib.sha256(open(archive, "rb").read()).hexdigest()
json.dump(m, open(manifest, "w"), indent=1)
PY
  serve
  fetch --retries 0
  assert_failed 3 "cannot read member 'cuda_nvcc-$HOST_PLATFORM-11.8.89-archive/"
}
