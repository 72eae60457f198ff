#!/usr/bin/env bats
# fetch over https from the loopback server with a self-signed certificate: which CA store
# fetch checks the server against (SSL_CERT_FILE, SSL_CERT_DIR, CURL_CA_BUNDLE, else the
# system's, src/lib/fetch/fetch_ca.h), and the one-line error when the one named is not there.
bats_require_minimum_version 1.5.0
load server

V=11.8.0

setup() {
  REPO="$BATS_TEST_TMPDIR/repo"
  DEST="$BATS_TEST_TMPDIR/dest"
  CERTS="$BATS_TEST_TMPDIR/certs"
  mkdir -p "$REPO" "$CERTS"
  python3 "$REDIST" make "$REPO" "$V"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$BATS_TEST_TMPDIR/key.pem" -out "$CERTS/loopback.pem" 2>/dev/null
  serve --tls "$CERTS/loopback.pem" "$BATS_TEST_TMPDIR/key.pem"
}

# The fetch with the caller's CA and proxy variables gone, then VAR=VALUE... set.
fetch_with() {
  run --separate-stderr env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY \
    -u SSL_CERT_FILE -u SSL_CERT_DIR -u CURL_CA_BUNDLE -u MSDA_CUDA_MIRROR "$@" \
    "$MSDA_DOCTOR" fetch --cuda "$V" --mirror "$URL" --dest "$DEST" --timeout 5 --retries 0
}

assert_fetched() {
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
  compgen -G "$DEST/cuda/11.8/*/bin/nvcc" >/dev/null
}

assert_refused() {
  local text=$1
  assert_clean_stderr
  [ "$status" -eq 5 ] || { echo "exit $status, want 5: $stderr" >&2; return 1; }
  [ "$(grep -c . <<<"$stderr")" -eq 1 ] && [[ "$stderr" == "msda-doctor: error: "*"$text"* ]] ||
    { echo "stderr: $stderr" >&2; return 1; }
  ! compgen -G "$DEST/cuda/*/*" >/dev/null
}

@test "https: SSL_CERT_FILE names the bundle the server is checked against" {
  [[ "$URL" == https://* ]]
  fetch_with SSL_CERT_FILE="$CERTS/loopback.pem"
  assert_fetched
}

@test "https: SSL_CERT_DIR names a folder of hashed certificates" {
  openssl rehash "$CERTS" 2>/dev/null || c_rehash "$CERTS" >/dev/null
  fetch_with SSL_CERT_DIR="$CERTS"
  assert_fetched
}

@test "https: CURL_CA_BUNDLE serves when OpenSSL's variables are not set" {
  fetch_with CURL_CA_BUNDLE="$CERTS/loopback.pem"
  assert_fetched
}

@test "https: the system's store does not know the test's certificate, and the failure says so" {
  fetch_with
  assert_refused "certificate"
}

@test "https: a CA variable naming nothing is a one-line error that names it, before any transfer" {
  fetch_with SSL_CERT_FILE="$BATS_TEST_TMPDIR/nowhere.pem"
  assert_refused "SSL_CERT_FILE is '$BATS_TEST_TMPDIR/nowhere.pem', which is not a readable file"
  fetch_with SSL_CERT_DIR="$CERTS/loopback.pem"
  assert_refused "SSL_CERT_DIR is '$CERTS/loopback.pem', which is not a readable folder"
}
