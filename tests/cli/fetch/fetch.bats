#!/usr/bin/env bats
# msda-doctor fetch against a synthetic redist repository on a loopback server
# (tests/cli/fetch/redist.py): success, checksum, HTTP and manifest faults, retries, resume,
# timeouts and unsafe archives. After every failure no toolkit folder may be there.
bats_require_minimum_version 1.5.0
load server

V=11.8.0
NVCC_ARCHIVE=cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-11.8.89-archive.tar.xz
CUDART_ARCHIVE=cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-11.8.89-archive.tar.xz

setup() {
  REPO="$BATS_TEST_TMPDIR/repo"
  DEST="$BATS_TEST_TMPDIR/dest"
  mkdir -p "$REPO"
}

repo() { python3 "$REDIST" make "$REPO" "$V" "$@"; }

# The fetch with short waits, no proxy from the caller's environment, and no mirror variable.
fetch() {
  run --separate-stderr env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY \
    -u MSDA_CUDA_MIRROR "$MSDA_DOCTOR" fetch --cuda "$V" --mirror "$URL" --dest "$DEST" --timeout 2 "$@"
}

# Exit CODE, one error line holding TEXT, and no toolkit folder (nor a temporary one) in DEST.
assert_failed() {
  local code=$1 text=$2
  assert_clean_stderr
  [ "$status" -eq "$code" ] || { echo "exit $status, want $code; stderr: $stderr" >&2; return 1; }
  [ "$(grep -c . <<<"$stderr")" -eq 1 ] || { echo "stderr: $stderr" >&2; return 1; }
  [[ "$stderr" == "msda-doctor: error: "*"$text"* ]] || { echo "stderr '$stderr' lacks '$text'" >&2; return 1; }
  [ ! -e "$DEST/cuda-11.8" ] || { echo "a toolkit folder was left" >&2; return 1; }
  if compgen -G "$DEST/.cuda-11.8.tmp-*" >/dev/null; then echo "a temporary folder was left" >&2; return 1; fi
}

@test "fetch: the components are downloaded, checked and merged into DEST/cuda-MAJOR.MINOR" {
  repo && serve
  fetch --json
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.components | map(.name) | join(",")' <<<"$output")" = "cuda_nvcc,cuda_cudart,cuda_cccl" ]
  [ "$(jq -r '.toolkit' <<<"$output")" = "$(cd "$DEST" && pwd -P)/cuda-11.8" ]
  [ "$(jq -r '.platform' <<<"$output")" = "linux-x86_64" ]
  [ -x "$DEST/cuda-11.8/bin/nvcc" ] && [ -f "$DEST/cuda-11.8/include/cuda.h" ]
  [ -f "$DEST/cuda-11.8/include/thrust/version.h" ] && [ -f "$DEST/cuda-11.8/nvvm/bin/cicc" ]
  [ "$(readlink "$DEST/cuda-11.8/lib/libcudart.so")" = "libcudart.so.11.0" ]
  # The downloads go once the toolkit is in place; nothing else is left beside it.
  [ "$(ls -A "$DEST")" = "cuda-11.8" ]
}

@test "fetch: build --toolkit finds the fetched toolkit and plans sm_61 with it" {
  repo && serve
  fetch
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [[ "$output" == *"msda-doctor build --toolkit $(cd "$DEST" && pwd -P)/cuda-11.8"* ]]
  run --separate-stderr env MSDA_TOOLKIT_PATHS=/nonexistent "$MSDA_DOCTOR" build --dry-run --json \
    --toolkit "$DEST/cuda-11.8" --arch sm_61 --platform x86_64 --cache "$BATS_TEST_TMPDIR/cache"
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.plan.targets[] | "\(.arch) \(.toolkit)"' <<<"$output")" = "sm_61 11.8" ]
}

@test "fetch: a second run finds the toolkit there and downloads nothing" {
  repo && serve
  fetch
  [ "$status" -eq 0 ]
  : > "$REPO/requests.log"
  fetch --json
  [ "$status" -eq 0 ]
  [ "$(jq -r '.already_present' <<<"$output")" = true ]
  [ ! -s "$REPO/requests.log" ]
}

@test "fetch: a wrong sha256 exits 6, names the component and both sums, and removes the file" {
  repo && serve
  good=$(sha256sum "$REPO/$NVCC_ARCHIVE" | cut -d' ' -f1)
  bad=$(printf '%064d' 0)
  jq --arg s "$bad" '.cuda_nvcc["linux-x86_64"].sha256 = $s' "$REPO/redistrib_$V.json" > "$REPO/m" &&
    mv "$REPO/m" "$REPO/redistrib_$V.json"
  fetch
  assert_failed 6 "sha256 mismatch for cuda_nvcc"
  [[ "$stderr" == *"expected $bad"* && "$stderr" == *"got $good"* ]]
  [ -z "$(find "$DEST" -name 'cuda_nvcc*')" ]
  # diagnose knows the message as the finding checksum-mismatch.
  run --separate-stderr "$MSDA_DOCTOR" diagnose --no-probe --json - <<<"$stderr"
  jq -e '.findings | any(.id == "checksum-mismatch")' <<<"$output" >/dev/null
}

@test "fetch: a manifest that is not there exits 5 naming the URL and HTTP 404" {
  repo && serve
  fetch --cuda 11.7.0
  assert_failed 5 "redistrib_11.7.0.json': HTTP 404"
  fetch --cuda 11.8
  assert_failed 5 "redistrib_11.8.json': HTTP 404 (NVIDIA names manifests by release: 11.8.0, ...)"
}

@test "fetch: an archive that is not there exits 5, without retrying a 404" {
  repo && serve
  faults "{\"$CUDART_ARCHIVE\": \"404\"}"
  fetch --retries 3
  assert_failed 5 "HTTP 404"
  [ "$(grep -c "^$CUDART_ARCHIVE " "$REPO/requests.log")" -eq 1 ]
}

@test "fetch: a manifest that is not JSON exits 3" {
  repo && serve
  echo '<html>not json' > "$REPO/redistrib_$V.json"
  fetch
  assert_failed 3 "is not JSON"
}

@test "fetch: a manifest without a required component or field exits 3 naming it" {
  repo && serve
  jq 'del(.cuda_nvcc)' "$REPO/redistrib_$V.json" > "$REPO/m" && cp "$REPO/redistrib_$V.json" "$REPO/full"
  mv "$REPO/m" "$REPO/redistrib_$V.json"
  fetch
  assert_failed 3 "has no 'cuda_nvcc'"
  jq 'del(.cuda_cudart["linux-x86_64"].sha256)' "$REPO/full" > "$REPO/redistrib_$V.json"
  fetch
  assert_failed 3 "'cuda_cudart' for linux-x86_64 has no 'sha256'"
  jq '.cuda_cccl["linux-x86_64"].relative_path = "../../etc/passwd.tar.xz"' "$REPO/full" > "$REPO/redistrib_$V.json"
  fetch
  assert_failed 3 "'cuda_cccl' for linux-x86_64 has no usable 'relative_path'"
}

@test "fetch: a platform the manifest lacks for a required component is named" {
  repo && serve
  fetch --platform linux-aarch64
  assert_failed 2 "has no 'cuda_nvcc' for linux-aarch64"
  fetch --platform linux-mips
  assert_failed 2 "unknown platform 'linux-mips'"
}

@test "fetch: HTTP 500 is retried and then succeeds" {
  repo && serve
  faults "{\"redistrib_$V.json\": \"500:1\", \"$NVCC_ARCHIVE\": \"500:2\"}"
  fetch --retries 2
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(grep -c "^$NVCC_ARCHIVE " "$REPO/requests.log")" -eq 3 ]
  [ -x "$DEST/cuda-11.8/bin/nvcc" ]
}

@test "fetch: retries are bounded; HTTP 500 throughout exits 5" {
  repo && serve
  faults "{\"$NVCC_ARCHIVE\": \"500:99\"}"
  fetch --retries 1
  assert_failed 5 "HTTP 500 (after 2 attempts)"
  [ "$(grep -c "^$NVCC_ARCHIVE " "$REPO/requests.log")" -eq 2 ]
}

@test "fetch: a connection cut mid-file exits 5 and the next run resumes with a Range request" {
  repo && serve
  faults "{\"$NVCC_ARCHIVE\": \"cut:1\"}"
  fetch --retries 0
  assert_failed 5 "cuda_nvcc-linux-x86_64-11.8.89-archive.tar.xz"
  part=$(find "$DEST" -name '*.tar.xz.part')
  have=$(stat -c %s "$part")
  [ "$have" -gt 0 ]
  fetch --retries 0 --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.components[0].resumed_from' <<<"$output")" -eq "$have" ]
  grep -qx "$NVCC_ARCHIVE bytes=$have-" "$REPO/requests.log"
  [ -x "$DEST/cuda-11.8/bin/nvcc" ]
}

@test "fetch: a server that ignores the Range request gets the file again from the start" {
  repo && serve
  faults "{\"$NVCC_ARCHIVE\": \"cut:1\"}"
  fetch --retries 0
  [ "$status" -eq 5 ]
  faults "{\"$NVCC_ARCHIVE\": \"norange\"}"
  fetch --retries 0
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ -x "$DEST/cuda-11.8/bin/nvcc" ]
}

@test "fetch: a stalled transfer times out and exits 5" {
  repo && serve
  faults "{\"$NVCC_ARCHIVE\": \"stall\"}"
  SECONDS=0
  fetch --retries 0 --timeout 1
  assert_failed 5 "cuda_nvcc-linux-x86_64-11.8.89-archive.tar.xz"
  [ "$SECONDS" -lt 15 ]
}

@test "fetch: nothing listens: exits 5 after the bounded retries" {
  repo
  URL="http://127.0.0.1:9"
  fetch --retries 1
  assert_failed 5 "after 2 attempts"
}

@test "fetch: an archive member with '..' is refused and nothing is left" {
  repo --evil dotdot && serve
  fetch
  assert_failed 3 "has a '..' in its path"
  [ ! -e "$BATS_TEST_TMPDIR/escaped" ] && [ ! -e "$DEST/escaped" ]
}

@test "fetch: an archive member with an absolute path is refused and nothing is left" {
  repo --evil absolute && serve
  fetch
  assert_failed 3 "has an absolute path"
  [ ! -e /tmp/msda-fetch-escaped ]
}

@test "fetch: a symlink pointing outside the toolkit is refused and nothing is left" {
  repo --evil symlink && serve
  fetch
  assert_failed 3 "points outside the toolkit"
}

@test "fetch: a hard link to a file outside the archive is refused" {
  repo --evil hardlink && serve
  fetch
  assert_failed 3 "has an absolute path"
}

@test "fetch: an unwritable destination exits 3 and downloads nothing" {
  repo && serve
  touch "$BATS_TEST_TMPDIR/file"
  DEST="$BATS_TEST_TMPDIR/file/sub"
  fetch
  assert_failed 3 "cannot create"
  [ ! -e "$REPO/requests.log" ]
}

@test "fetch: a read-only destination exits 3 (not as root, who may write anywhere)" {
  [ "$(id -u)" -ne 0 ] || skip "root ignores the mode"
  repo && serve
  mkdir -p "$DEST" && chmod 555 "$DEST"
  fetch
  chmod 755 "$DEST"
  assert_failed 3 "cannot create"
}

@test "fetch: plain http:// to a host other than loopback is refused before any transfer" {
  URL="http://example.com/redist"
  fetch
  assert_failed 2 "plain http:// only to loopback"
  URL="ftp://127.0.0.1/redist"
  fetch
  assert_failed 2 "only https:// URLs"
}

@test "fetch: MSDA_CUDA_MIRROR gives the mirror when --mirror is not given" {
  repo && serve
  run --separate-stderr env -u http_proxy -u HTTP_PROXY MSDA_CUDA_MIRROR="$URL/" "$MSDA_DOCTOR" fetch --cuda "$V" \
    --dest "$DEST" --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.manifest' <<<"$output")" = "$URL/redistrib_$V.json" ]
}

@test "fetch: usage errors: no --cuda, a bad version, a bad --retries" {
  run --separate-stderr "$MSDA_DOCTOR" fetch
  [ "$status" -eq 2 ] && [[ "$stderr" == *"no --cuda VERSION given"* ]]
  URL="http://127.0.0.1:9"
  fetch --cuda '11.8/../x'
  assert_failed 2 "is not a CUDA version"
  DEST=""
  fetch
  assert_failed 2 "the destination folder is empty"
  run --separate-stderr "$MSDA_DOCTOR" fetch --cuda 11.8.0 --retries many
  [ "$status" -eq 2 ] && [[ "$stderr" == *"--retries needs a count"* ]]
}

# build --fetch: a fake CUDA 13.0 (sm_75 and newer) here, the synthetic 12.9.1 on the mirror.
build_fetch() {
  local fake="$BATS_TEST_TMPDIR/cuda-13.0"
  mkdir -p "$fake/bin" "$BATS_TEST_TMPDIR/src"
  printf '#!/bin/sh\ncase "$1" in\n  --version) echo "Cuda compilation tools, release 13.0, V13.0.88" ;;\n  --list-gpu-code) for c in sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_110 sm_103 sm_120 sm_121; do echo $c; done ;;\n  *) exit 1 ;;\nesac\n' \
    > "$fake/bin/nvcc"
  chmod +x "$fake/bin/nvcc"
  local root
  root="$(cd "$BATS_TEST_DIRNAME/../../.." && pwd)"
  ln -sfn "$root/kernels" "$BATS_TEST_TMPDIR/src/kernels" && ln -sfn "$root/wheels" "$BATS_TEST_TMPDIR/src/wheels"
  run --separate-stderr env -u http_proxy -u HTTP_PROXY MSDA_CUDA_MIRROR="$URL" MSDA_TOOLKIT_PATHS="$fake" \
    XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache" "$MSDA_DOCTOR" build --dry-run --json --platform x86_64 \
    --source "$BATS_TEST_TMPDIR/src" --cache "$BATS_TEST_TMPDIR/bc" "$@"
}

@test "build --arch all names the fetch that adds the architectures no toolkit here targets" {
  URL="http://127.0.0.1:9"
  build_fetch --arch all
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.plan.fetch[] | "\(.cuda) \(.archs | join(","))"' <<<"$output")" = \
    "12.9.1 sm_50,sm_52,sm_53,sm_60,sm_61,sm_62,sm_70,sm_72" ]
  jq -e '.plan.notes | any(contains("no toolkit here targets them; add them with: msda-doctor fetch --cuda 12.9.1"))' \
    <<<"$output" >/dev/null
  [ ! -e "$BATS_TEST_TMPDIR/cache" ]
}

@test "build --fetch fetches the release the plan names into the cache, then plans with it" {
  V=12.9.1 repo && serve
  build_fetch --fetch --arch all
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [[ "$stderr" == *"fetching CUDA 12.9.1 for 8 architectures that no toolkit here targets"* ]]
  [ -x "$BATS_TEST_TMPDIR/cache/msda-doctor/cuda-12.9/bin/nvcc" ]
  [ "$(jq -r '.plan.targets[] | select(.arch == "sm_61") | .toolkit' <<<"$output")" = 12.9 ]
  [ "$(jq -r '.plan.targets[] | select(.arch == "sm_90") | .toolkit' <<<"$output")" = 13.0 ]
  [ "$(jq '.plan.fetch | length' <<<"$output")" -eq 0 ]
  # A list that no toolkit here targets is fetched for too, and once fetched found in the cache.
  : > "$REPO/requests.log"
  build_fetch --fetch --arch sm_61
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.plan.targets[] | "\(.arch) \(.toolkit)"' <<<"$output")" = "sm_61 12.9" ]
}

@test "build --fetch with nothing to fetch from exits 5 and leaves no toolkit" {
  repo && serve
  build_fetch --fetch --arch sm_61
  assert_clean_stderr
  [ "$status" -eq 5 ] || { echo "exit $status: $stderr" >&2; return 1; }
  [[ "$stderr" == *"redistrib_12.9.1.json': HTTP 404"* ]]
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/cache/msda-doctor" | grep -v '^\.cuda-12.9-linux-x86_64.download$' || true)" ]
}
