#!/usr/bin/env bats
# msda-doctor fetch against a synthetic redist repository on a loopback server
# (tests/cli/fetch/redist.py): success, checksum, HTTP and manifest faults, retries, resume,
# timeouts and unsafe archives, two platforms of one version side by side. After every failure
# no toolkit folder may be there. The fetch's default platform is this host's ($HOST_PLATFORM).
bats_require_minimum_version 1.5.0
load server

V=11.8.0
NVCC_FILE=cuda_nvcc-$HOST_PLATFORM-11.8.89-archive.tar.xz
NVCC_ARCHIVE=cuda_nvcc/$HOST_PLATFORM/$NVCC_FILE
CUDART_ARCHIVE=cuda_cudart/$HOST_PLATFORM/cuda_cudart-$HOST_PLATFORM-11.8.89-archive.tar.xz

setup() {
  REPO="$BATS_TEST_TMPDIR/repo"
  DEST="$BATS_TEST_TMPDIR/dest"
  TK="$DEST/cuda/11.8/$HOST_PLATFORM"
  mkdir -p "$REPO"
}

# DEST as fetch gives it in its output: canonical.
real_dest() { cd "$DEST" && pwd -P; }

repo() { python3 "$REDIST" make "$REPO" "$V" "$@"; }

# The fetch with short waits, no proxy from the caller's environment, and no mirror variable.
fetch() {
  run --separate-stderr env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY \
    -u MSDA_CUDA_MIRROR "$MSDA_DOCTOR" fetch --cuda "$V" --mirror "$URL" --dest "$DEST" --timeout 2 "$@"
}

@test "fetch: the components are downloaded, checked and merged into DEST/cuda/MAJOR.MINOR/PLATFORM" {
  repo && serve
  fetch --json
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.components | map(.name) | join(",")' <<<"$output")" = "cuda_nvcc,cuda_cudart,cuda_cccl" ]
  [ "$(jq -r '.toolkit' <<<"$output")" = "$(real_dest)/cuda/11.8/$HOST_PLATFORM" ]
  [ "$(jq -r '.platform' <<<"$output")" = "$HOST_PLATFORM" ]
  [[ "$(jq -r '.components[0].url' <<<"$output")" == "$URL/$NVCC_ARCHIVE" ]]
  [ -x "$TK/bin/nvcc" ] && [ -f "$TK/include/cuda.h" ]
  [ -f "$TK/include/thrust/version.h" ] && [ -f "$TK/nvvm/bin/cicc" ]
  [ "$(readlink "$TK/lib/libcudart.so")" = "libcudart.so.11.0" ]
  # The downloads go once the toolkit is in place; nothing else is left beside it.
  [ "$(ls -A "$DEST")" = cuda ] && [ "$(ls -A "$DEST/cuda")" = 11.8 ] && [ "$(ls -A "$DEST/cuda/11.8")" = "$HOST_PLATFORM" ]
}

@test "fetch: two platforms of one version are two toolkits side by side, each downloaded whole" {
  repo && serve
  fetch
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  : > "$REPO/requests.log"
  fetch --platform "$FOREIGN_PLATFORM" --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '"\(.already_present) \(.platform) \(.toolkit)"' <<<"$output")" = \
    "false $FOREIGN_PLATFORM $(real_dest)/cuda/11.8/$FOREIGN_PLATFORM" ]
  [ "$(grep -c "/$FOREIGN_PLATFORM/" "$REPO/requests.log")" -eq 3 ] && ! grep -q "/$HOST_PLATFORM/" "$REPO/requests.log"
  [ -x "$TK/bin/nvcc" ] && [ -x "$DEST/cuda/11.8/$FOREIGN_PLATFORM/bin/nvcc" ]
  [ "$(ls -A "$DEST/cuda/11.8" | sort)" = "$(printf '%s\n' "$HOST_PLATFORM" "$FOREIGN_PLATFORM" | sort)" ]
  # Now each is there.
  fetch --platform "$FOREIGN_PLATFORM" --json
  [ "$status" -eq 0 ] && [ "$(jq -r '.already_present' <<<"$output")" = true ]
}

@test "fetch: an interrupted fetch of one platform keeps its download apart from the other's" {
  repo && serve
  foreign_nvcc="cuda_nvcc/$FOREIGN_PLATFORM/cuda_nvcc-$FOREIGN_PLATFORM-11.8.89-archive.tar.xz"
  faults "{\"$foreign_nvcc\": \"cut:1\"}"
  fetch --retries 0 --platform "$FOREIGN_PLATFORM"
  assert_failed 5 "cuda_nvcc-$FOREIGN_PLATFORM-11.8.89-archive.tar.xz"
  part="$DEST/cuda/11.8/.$FOREIGN_PLATFORM.download/cuda_nvcc-$FOREIGN_PLATFORM-11.8.89-archive.tar.xz.part"
  have=$(stat -c %s "$part")
  # The host's fetch meanwhile neither takes nor removes the other platform's partial file.
  fetch --retries 0
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(stat -c %s "$part")" -eq "$have" ]
  [ "$(ls -A "$DEST/cuda/11.8" | sort)" = "$(printf '%s\n' ".$FOREIGN_PLATFORM.download" "$HOST_PLATFORM" | sort)" ]
  fetch --retries 0 --platform "$FOREIGN_PLATFORM" --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.components[0].resumed_from' <<<"$output")" -eq "$have" ]
  [ "$(ls -A "$DEST/cuda/11.8" | sort)" = "$(printf '%s\n' "$HOST_PLATFORM" "$FOREIGN_PLATFORM" | sort)" ]
}

@test "fetch: --list names each version and platform; --remove takes one platform, or every one" {
  repo && serve
  fetch && fetch --platform "$FOREIGN_PLATFORM"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  list() { run --separate-stderr "$MSDA_DOCTOR" fetch --dest "$DEST" "$@"; }
  list --list --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.dir' <<<"$output")" = "$DEST" ]
  # The host's first: it is the one build and diagnose take; the other CPU's does not run here.
  [ "$(jq -r '.toolkits[] | "\(.version) \(.platform) \(.nvcc) \(.runs_here) \(.path)"' <<<"$output")" = \
    "11.8 $HOST_PLATFORM true true $DEST/cuda/11.8/$HOST_PLATFORM
11.8 $FOREIGN_PLATFORM true false $DEST/cuda/11.8/$FOREIGN_PLATFORM" ]
  list --list
  [ "$status" -eq 0 ] && [ "$(grep -c '^CUDA 11.8 ' <<<"$output")" -eq 2 ]
  [[ "$(grep -- "$FOREIGN_PLATFORM" <<<"$output")" == *"(does not run on this machine)" ]]
  [[ "$(grep -- "$HOST_PLATFORM" <<<"$output")" != *"does not run"* ]]
  list --list --platform "$FOREIGN_PLATFORM" --json
  [ "$(jq -r '.toolkits[].platform' <<<"$output")" = "$FOREIGN_PLATFORM" ]
  list --list --platform linux-aarch64
  [ "$status" -eq 0 ] && [ "$output" = "No fetched toolkit for linux-aarch64 in $DEST" ]
  list --list --platform linux-mips
  [ "$status" -eq 2 ] && [[ "$stderr" == *"unknown platform 'linux-mips' (linux-x86_64, linux-sbsa or linux-aarch64)"* ]]

  list --remove 11.8.0 --platform "$FOREIGN_PLATFORM"
  [ "$status" -eq 0 ] && [ "$output" = "Removed CUDA 11.8 for $FOREIGN_PLATFORM: $DEST/cuda/11.8/$FOREIGN_PLATFORM" ]
  [ ! -e "$DEST/cuda/11.8/$FOREIGN_PLATFORM" ] && [ -x "$TK/bin/nvcc" ]
  list --remove 11.8 --platform "$FOREIGN_PLATFORM"
  [ "$status" -eq 2 ] && [[ "$stderr" == *"CUDA 11.8 for $FOREIGN_PLATFORM is not in '$DEST'"* ]]
  fetch --platform "$FOREIGN_PLATFORM"
  list --remove 11.8 --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.removed[] | "\(.version) \(.platform) \(.path)"' <<<"$output" | sort)" = \
    "$(printf '11.8 %s %s/cuda/11.8/%s\n' "$HOST_PLATFORM" "$DEST" "$HOST_PLATFORM" "$FOREIGN_PLATFORM" "$DEST" \
       "$FOREIGN_PLATFORM" | sort)" ]
  # Nothing of CUDA 11.8 is left, nor the folders that held it.
  [ -z "$(ls -A "$DEST")" ]
}

@test "fetch: build --toolkit finds the fetched toolkit and plans sm_61 with it" {
  repo && serve
  fetch
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [[ "$output" == *"msda-doctor build --toolkit $(real_dest)/cuda/11.8/$HOST_PLATFORM"* ]]
  run --separate-stderr env MSDA_TOOLKIT_PATHS=/nonexistent "$MSDA_DOCTOR" build --dry-run --json \
    --toolkit "$TK" --arch sm_61 --platform "$HOST_CPU" --cache "$BATS_TEST_TMPDIR/cache"
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

@test "fetch: on a terminal each download draws a progress line that ends at its size, 100 %; elsewhere none" {
  repo && serve
  # script(1) runs fetch on a terminal of its own (stderr included) and prints what it showed
  command -v script >/dev/null || skip "no script(1) (util-linux)"
  local cmd
  cmd=$(printf '%q ' env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u MSDA_CUDA_MIRROR \
    "$MSDA_DOCTOR" fetch --cuda "$V" --mirror "$URL" --dest "$DEST" --timeout 2)
  run script -qec "$cmd" /dev/null
  stderr=$output assert_clean_stderr   # the terminal had both streams
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
  local name re cr=$'\r' nl=$'\n'
  for name in cuda_nvcc cuda_cudart cuda_cccl; do
    # the last state of the line: done / total MiB, 100 %, then the line ends
    re="$name +([0-9]+\.[0-9]) / ([0-9]+\.[0-9]) MiB +100%[^$cr$nl]*$cr?$nl"
    [[ "$output" =~ $re ]] || { echo "no finished progress line for $name in: $output" >&2; return 1; }
    [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
  done
  [[ "$output" =~ cuda_nvcc\ +0\.2\ /\ 0\.2\ MiB ]]   # 192 KiB of filler
  # not on a terminal: no progress at all, stderr stays empty
  rm -rf "$DEST"
  fetch
  [ "$status" -eq 0 ] && [ -z "$stderr" ]
}

@test "fetch: a wrong sha256 exits 6, names the component and both sums, and removes the file" {
  repo && serve
  good=$(sha256sum "$REPO/$NVCC_ARCHIVE" | cut -d' ' -f1)
  bad=$(printf '%064d' 0)
  jq --arg s "$bad" --arg p "$HOST_PLATFORM" '.cuda_nvcc[$p].sha256 = $s' "$REPO/redistrib_$V.json" > "$REPO/m" &&
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
  jq --arg p "$HOST_PLATFORM" 'del(.cuda_cudart[$p].sha256)' "$REPO/full" > "$REPO/redistrib_$V.json"
  fetch
  assert_failed 3 "'cuda_cudart' for $HOST_PLATFORM has no 'sha256'"
  jq --arg p "$HOST_PLATFORM" '.cuda_cccl[$p].relative_path = "../../etc/passwd.tar.xz"' "$REPO/full" \
    > "$REPO/redistrib_$V.json"
  fetch
  assert_failed 3 "'cuda_cccl' for $HOST_PLATFORM has no usable 'relative_path'"
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
  [ -x "$TK/bin/nvcc" ]
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
  assert_failed 5 "$NVCC_FILE"
  part=$(find "$DEST" -name '*.tar.xz.part')
  have=$(stat -c %s "$part")
  [ "$have" -gt 0 ]
  fetch --retries 0 --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.components[0].resumed_from' <<<"$output")" -eq "$have" ]
  grep -qx "$NVCC_ARCHIVE bytes=$have-" "$REPO/requests.log"
  [ -x "$TK/bin/nvcc" ]
}

@test "fetch: a server that ignores the Range request gets the file again from the start" {
  repo && serve
  faults "{\"$NVCC_ARCHIVE\": \"cut:1\"}"
  fetch --retries 0
  [ "$status" -eq 5 ]
  faults "{\"$NVCC_ARCHIVE\": \"norange\"}"
  fetch --retries 0
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ -x "$TK/bin/nvcc" ]
}

@test "fetch: a stalled transfer times out and exits 5" {
  repo && serve
  faults "{\"$NVCC_ARCHIVE\": \"stall\"}"
  SECONDS=0
  fetch --retries 0 --timeout 1
  assert_failed 5 "$NVCC_FILE"
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
  assert_failed 2 "plain http:// only to loopback; give --allow-http to fetch it anyway"
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
    XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache" "$MSDA_DOCTOR" build --dry-run --json --platform "$HOST_CPU" \
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
  [ -x "$BATS_TEST_TMPDIR/cache/msda-doctor/cuda/12.9/$HOST_PLATFORM/bin/nvcc" ]
  [ "$(jq -r '.plan.targets[] | select(.arch == "sm_61") | .toolkit' <<<"$output")" = 12.9 ]
  # sm_90: the newest toolkit's SASS, and 12.9's beside it for drivers before 580.
  [ "$(jq -r '[.plan.targets[] | select(.arch == "sm_90") | .toolkit] | join(",")' <<<"$output")" = 13.0,12.9 ]
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
  # Nothing at all: the manifest was not there, so no download was begun.
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/cache/msda-doctor")" ]
}
