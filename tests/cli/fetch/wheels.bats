#!/usr/bin/env bats
# msda-doctor fetch --wheels against a synthetic package index on a loopback server
# (tests/cli/fetch/index.py): PEP 691 JSON and PEP 503 HTML, the version pins, checksum, missing
# packages and platforms, the refusal of CUDA 11/12; then build and diagnose finding fetched
# toolkits of this host's platform with no flag and leaving the other CPU's alone, --list and
# --remove. After every failure no toolkit folder may be there. The fetch's default platform is
# this host's ($HOST_PLATFORM, whose wheels are $HOST_WHEEL_MACHINE ones).
bats_require_minimum_version 1.5.0
load server

INDEX="$BATS_TEST_DIRNAME/index.py"

# A fresh project folder (its build/ starts empty) whose sources are the repository's.
source_dir() {
  SRC="$BATS_TEST_TMPDIR/src"
  mkdir -p "$SRC" && ln -sfn "$ROOT/kernels" "$SRC/kernels" && ln -sfn "$ROOT/wheels" "$SRC/wheels"
}

setup() {
  REPO="$BATS_TEST_TMPDIR/repo"
  DEST="$BATS_TEST_TMPDIR/dest"
  TK="$DEST/cuda/13.0/$HOST_PLATFORM"
  mkdir -p "$REPO"
}

index() { python3 "$INDEX" make "$REPO" "$@"; }

# The environment of every run here: no proxy, no mirror, no pip configuration of the caller's.
clean_env=(env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u MSDA_CUDA_MIRROR
           -u PIP_INDEX_URL -u PIP_CONFIG_FILE -u VIRTUAL_ENV HOME="$BATS_TEST_TMPDIR/home"
           XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/config")

wheels() {
  run --separate-stderr "${clean_env[@]}" "$MSDA_DOCTOR" fetch --cuda 13.0 --index-url "$URL/simple" --dest "$DEST" \
    --timeout 2 --retries 0 "$@"
}

# The components as "name version" lines.
components() { jq -r '.components[] | "\(.name) \(.version)"' <<<"$output"; }

PINNED="nvidia-cuda-nvcc 13.0.88
nvidia-nvvm 13.0.88
nvidia-cuda-runtime 13.0.96
nvidia-cuda-crt 13.0.88
nvidia-cuda-cccl 13.0.85"

@test "wheels: a PEP 691 index gives each package's newest 13.0, nvvm pinned to nvcc's, in the toolkit layout" {
  index && serve
  wheels --json
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(components)" = "$PINNED" ]
  [ "$(jq -r '.source' <<<"$output")" = wheels ] && [ "$(jq -r '.manifest' <<<"$output")" = null ]
  [ "$(jq -r '.index' <<<"$output")" = "$URL/simple" ]
  [[ "$(jq -r '.components[0].url' <<<"$output")" == \
    "$URL/files/nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_$HOST_WHEEL_MACHINE."* ]]
  [ "$(jq -r '"\(.platform) \(.toolkit)"' <<<"$output")" = "$HOST_PLATFORM $(cd "$DEST" && pwd -P)/cuda/13.0/$HOST_PLATFORM" ]
  # JSON was read (index.py leaves the HTML pages of a JSON index without links).
  [ -x "$TK/bin/nvcc" ] && [ -f "$TK/include/cuda.h" ]
  [ "$(cat "$TK/nvvm/bin/cicc")" = "cicc 13.0.88" ]
  [ "$(cat "$TK/include/cccl/cuda/std/version")" = "// cccl 13.0.85" ]
  [ -f "$TK/include/crt/host_config.h" ] && [ -f "$TK/bin/nvcc.profile" ]
  # Executables for every user; nothing of the wheels' own metadata or Python files.
  [ "$(stat -c %a "$TK/bin/nvcc")" = 755 ] && [ "$(stat -c %a "$TK")" = 755 ]
  [ -z "$(find "$TK" -name '*.dist-info' -o -name '__init__.py' -o -name nvidia)" ]
  [ "$(ls -A "$DEST/cuda/13.0")" = "$HOST_PLATFORM" ]
}

@test "wheels: a PEP 503 HTML index (quotes, entities, yanked files) gives the same pins" {
  index --html && serve
  wheels --json
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(components)" = "$PINNED" ]
  [ "$(cat "$TK/nvvm/bin/cicc")" = "cicc 13.0.88" ]
}

@test "wheels: malformed anchors around the good ones are passed over without a sanitizer report" {
  index --html && serve
  page="$REPO/simple/nvidia-cuda-nvcc/index.html"
  long=$(head -c 6000 /dev/zero | tr '\0' x)
  { printf '<a =x>stray</a><a\thref=%s>%s.whl</a><a href="/files/x.whl#sha256=zz">x-1-py3-none-any.whl</a>\n' \
      "$long" "$long"
    printf '<a href=../../files/nvidia_cuda_nvcc-13.0.99-py3-none-manylinux2014_%s.whl>nvidia_cuda_nvcc-13.0.99-py3-none-manylinux2014_%s.whl</a>\n' \
      "$HOST_WHEEL_MACHINE" "$HOST_WHEEL_MACHINE"
    cat "$page"
    printf '<abbr title="a">b</abbr><a href="unterminated'; } > "$page.new" && mv "$page.new" "$page"
  wheels --json
  assert_clean_stderr
  # 13.0.99 has no sha256 on the page: it is the newest, so the fetch refuses it rather than guess.
  [ "$status" -eq 3 ] && [[ "$stderr" == *"gives no sha256 for 'nvidia_cuda_nvcc-13.0.99-"* ]]
  sed -i '2d' "$page"
  wheels --json
  assert_clean_stderr
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(components)" = "$PINNED" ]
}

@test "wheels: 13.1 takes the 13.1 releases, and the text output names the index" {
  index && serve
  wheels --cuda 13.1
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [[ "$output" == *"Fetched CUDA 13.1 for $HOST_PLATFORM into $(cd "$DEST" && pwd -P)/cuda/13.1/$HOST_PLATFORM"* ]]
  [[ "$output" == *"from the wheels on $URL/simple"* && "$output" == *"nvidia-cuda-cccl    13.1.78"* ]]
  [ "$(cat "$DEST/cuda/13.1/$HOST_PLATFORM/nvvm/bin/cicc")" = "cicc 13.1.80" ]
}

@test "wheels: the aarch64 wheels for linux-sbsa, the x86_64 ones for linux-x86_64, whatever the host" {
  index && serve
  wheels --platform linux-sbsa --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '[.components[].file | test("manylinux_2_1[27]_aarch64.whl$")] | all' <<<"$output")" = true ]
  [ -x "$DEST/cuda/13.0/linux-sbsa/bin/nvcc" ]
  wheels --platform linux-x86_64 --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '[.components[].file | test("manylinux_2_1[27]_x86_64.whl$")] | all' <<<"$output")" = true ]
  [ "$(jq -r '.already_present' <<<"$output")" = false ] && [ -x "$DEST/cuda/13.0/linux-x86_64/bin/nvcc" ]
}

@test "wheels: a wrong sha256 in the index exits 6 naming the package; diagnose knows the message" {
  index --bad-sha nvidia-cuda-crt && serve
  wheels
  assert_failed 6 "sha256 mismatch for nvidia-cuda-crt (nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_$HOST_WHEEL_MACHINE"
  [[ "$stderr" == *"expected $(printf '%064d' 0)"* ]]
  [ -z "$(find "$DEST" -name 'nvidia_cuda_crt*')" ]
  run --separate-stderr "$MSDA_DOCTOR" diagnose --no-probe --json - <<<"$stderr"
  jq -e '.findings | any(.id == "checksum-mismatch")' <<<"$output" >/dev/null
}

@test "wheels: a package the index lacks exits 5 naming it" {
  index --missing nvidia-cuda-cccl && serve
  wheels
  assert_failed 5 "simple/nvidia-cuda-cccl/': HTTP 404 (the index has no project 'nvidia-cuda-cccl')"
}

@test "wheels: no wheel for the platform exits 2 naming the package and platform" {
  index --only x86_64 nvidia-cuda-cccl && serve
  wheels --platform linux-sbsa
  assert_failed 2 "has no 'nvidia-cuda-cccl' 13.0 wheel for linux-sbsa (manylinux_aarch64)"
  wheels --platform linux-aarch64
  assert_failed 2 "NVIDIA's compiler wheels are not built for linux-aarch64"
}

@test "wheels: a release the index lacks exits 2" {
  index && serve
  wheels --cuda 13.2
  assert_failed 2 "has no release 13.2 of 'nvidia-cuda-nvcc'"
}

@test "wheels: CUDA 12 and 11 are refused before any request: their wheels hold no nvcc" {
  index && serve
  wheels --cuda 12.9
  assert_failed 2 "nvidia-cuda-nvcc-cu12) carry ptxas and libnvvm but no bin/nvcc and no cicc, so CUDA 12.9 cannot be fetched as wheels; fetch release 12.9.1 from NVIDIA's redistributable manifests instead; fetch without --wheels or --index-url"
  wheels --cuda 11.8
  assert_failed 2 "(nvidia-cuda-nvcc-cu11)"
  wheels --cuda 10.2
  assert_failed 2 "no NVIDIA compiler wheels are known for CUDA 10"
  wheels --cuda 13.0.2
  assert_failed 2 "give the CUDA version for wheels as MAJOR.MINOR (13.0)"
  wheels --mirror "$URL"
  [ "$status" -eq 2 ] && [[ "$stderr" == *"--mirror is where the redist archives are"* ]]
  [ ! -e "$REPO/requests.log" ]
}

@test "wheels: an unsafe wheel member is refused and nothing is left" {
  index --evil nvidia-cuda-crt && serve
  wheels
  assert_failed 3 "has a '..' in its path"
  [ ! -e "$BATS_TEST_TMPDIR/escaped" ] && [ ! -e "$DEST/escaped" ]
}

@test "wheels: a page that is neither JSON nor HTML exits 3; plain http:// elsewhere is refused" {
  index && serve
  echo 'not an index' > "$REPO/simple/nvidia-cuda-nvcc/index.json"
  wheels
  assert_failed 3 "is neither PEP 691 JSON nor PEP 503 HTML"
  run --separate-stderr "${clean_env[@]}" "$MSDA_DOCTOR" fetch --cuda 13.0 --index-url http://example.com/simple \
    --dest "$DEST"
  assert_failed 2 "plain http:// only to loopback"
}

@test "wheels: --wheels takes PIP_INDEX_URL, else index-url of pip.conf, and says where it came from" {
  index && serve
  run --separate-stderr "${clean_env[@]}" PIP_INDEX_URL="$URL/simple/" "$MSDA_DOCTOR" fetch --cuda 13.0 --wheels \
    --dest "$DEST"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [[ "$stderr" == *"the package index $URL/simple/ comes from PIP_INDEX_URL"* ]]
  rm -rf "$DEST"
  mkdir -p "$BATS_TEST_TMPDIR/config/pip"
  printf '[global]\nindex-url = http://127.0.0.1:9/nowhere\n[download]\nindex-url = %s/simple\n' "$URL" \
    > "$BATS_TEST_TMPDIR/config/pip/pip.conf"
  run --separate-stderr "${clean_env[@]}" "$MSDA_DOCTOR" fetch --cuda 13.0 --wheels --dest "$DEST" --json
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ "$(jq -r '.index' <<<"$output")" = "$URL/simple" ]
}

# A fetch into the default cache under $BATS_TEST_TMPDIR/cache, then the other commands with
# that cache and no flag naming the toolkit. The fake nvcc is a script that would run on any
# host: only the platform's name keeps the other CPU's toolkit out.
@test "wheels: build and diagnose find a fetched toolkit of this host's platform with no flag, not the other CPU's" {
  index && serve
  cache_env=("${clean_env[@]}" XDG_CACHE_HOME="$BATS_TEST_TMPDIR/cache")
  cache="$BATS_TEST_TMPDIR/cache/msda-doctor"
  tk="$cache/cuda/13.1/$HOST_PLATFORM" other="$cache/cuda/13.1/$FOREIGN_PLATFORM"
  source_dir
  plan() {
    run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" build --dry-run --json --arch sm_90 --platform "$HOST_CPU" \
      --source "$SRC" --cache "$BATS_TEST_TMPDIR/bc"
    assert_clean_stderr
    [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  }
  diag() {
    run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" diagnose --json
    assert_clean_stderr
  }
  # The nvcc paths under the cache that the output names.
  cached_nvccs() { jq -r --arg c "$cache/" '[.. | objects | .nvcc? | strings | select(startswith($c))] | unique | .[]' <<<"$output"; }

  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --cuda 13.1 --index-url "$URL/simple" \
    --platform "$FOREIGN_PLATFORM"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ -x "$other/bin/nvcc" ]
  plan
  [ -z "$(cached_nvccs)" ] || { echo "took $(cached_nvccs)" >&2; return 1; }
  diag
  [ -z "$(cached_nvccs)" ] || { echo "took $(cached_nvccs)" >&2; return 1; }

  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --cuda 13.1 --index-url "$URL/simple"
  [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
  [ -x "$tk/bin/nvcc" ]
  plan
  [ "$(cached_nvccs)" = "$tk/bin/nvcc" ]
  [ "$(jq -r --arg n "$tk/bin/nvcc" '.plan.toolkits[] | select(.nvcc == $n) | .version' <<<"$output")" = 13.1 ]
  diag
  [ "$(cached_nvccs)" = "$tk/bin/nvcc" ]

  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --list --json
  [ "$status" -eq 0 ]
  [ "$(jq -r '.toolkits[] | "\(.version) \(.platform) \(.runs_here) \(.path) \(.nvcc)"' <<<"$output")" = \
    "13.1 $HOST_PLATFORM true $tk true
13.1 $FOREIGN_PLATFORM false $other true" ]
  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --remove 13.1 --platform "$HOST_PLATFORM"
  [ "$status" -eq 0 ] && [ "$output" = "Removed CUDA 13.1 for $HOST_PLATFORM: $tk" ] && [ ! -e "$tk" ]
  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --remove 13.1
  [ "$status" -eq 0 ] && [ "$output" = "Removed CUDA 13.1 for $FOREIGN_PLATFORM: $other" ] && [ ! -e "$other" ]
  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --remove 13.1
  [ "$status" -eq 2 ] && [[ "$stderr" == *"CUDA 13.1 is not in"* ]]
  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --list
  [ "$status" -eq 0 ] && [[ "$output" == "No fetched toolkit in "* ]]
  run --separate-stderr "${cache_env[@]}" "$MSDA_DOCTOR" fetch --list --cuda 13.0
  [ "$status" -eq 2 ] && [[ "$stderr" == *"--list, --remove and --cuda exclude each other"* ]]
}
