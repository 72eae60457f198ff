#!/usr/bin/env bats
# The CI workflows (issue 10) pass actionlint, with shellcheck on every run: block; and the check
# fails on the mistakes it is there for. ACTIONLINT is the binary (make check-ci installs it).
bats_require_minimum_version 1.5.0

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"

setup_file() {
  [ -x "${ACTIONLINT:-}" ] || { echo "ACTIONLINT is not set to an executable: run make check-ci" >&2; return 1; }
  SHELLCHECK=$(command -v shellcheck) || { echo "no shellcheck (scripts/install-deps --test installs it)" >&2; return 1; }
  export SHELLCHECK
}

# actionlint on FILE..., run from DIR, with shellcheck named so that a missing one cannot pass
# silently.
lint() {
  local dir=$1; shift
  run --separate-stderr bash -c 'cd "$1" && shift && "$ACTIONLINT" -no-color -shellcheck="$SHELLCHECK" "$@"' _ "$dir" "$@"
}

# A copy of wheels.yml under a scratch repository, with sed EXPR applied.
broken() {
  mkdir -p "$BATS_TEST_TMPDIR/repo/.github/workflows"
  sed "$1" "$ROOT/.github/workflows/wheels.yml" > "$BATS_TEST_TMPDIR/repo/.github/workflows/wheels.yml"
  ! cmp -s "$ROOT/.github/workflows/wheels.yml" "$BATS_TEST_TMPDIR/repo/.github/workflows/wheels.yml"
}

@test "actionlint and shellcheck find nothing in .github/workflows" {
  files=("$ROOT"/.github/workflows/*.yml)
  [ -e "${files[0]}" ]
  lint "$ROOT" "${files[@]}"
  [ "$status" -eq 0 ] || { echo "$output $stderr" >&2; return 1; }
  [ -z "$output" ]
}

@test "a matrix property the matrix does not define is reported" {
  broken 's/name: msda-wheel-\${{ matrix.platform }}/name: msda-wheel-${{ matrix.cpu }}/'
  lint "$BATS_TEST_TMPDIR/repo" .github/workflows/wheels.yml
  [ "$status" -eq 1 ]
  [[ "$output" == *'property "cpu" is not defined'* ]]
}

@test "an unquoted expansion in a run: block is reported by shellcheck" {
  broken 's/test "\$(uname -m)" = "\$PLATFORM"/test $(uname -m) = $PLATFORM/'
  lint "$BATS_TEST_TMPDIR/repo" .github/workflows/wheels.yml
  [ "$status" -eq 1 ]
  [[ "$output" == *"shellcheck reported issue"*"SC2046"* ]]
}

@test "an action on the deprecated node20 runtime is reported" {
  broken 's#actions/checkout@v7#actions/checkout@v4#'
  lint "$BATS_TEST_TMPDIR/repo" .github/workflows/wheels.yml
  [ "$status" -eq 1 ]
  [[ "$output" == *'"node20" is deprecated'*'actions/checkout@v4'* ]]
}

@test "a job that needs a job that does not exist is reported" {
  broken 's/needs: wheels/needs: wheel/'
  lint "$BATS_TEST_TMPDIR/repo" .github/workflows/wheels.yml
  [ "$status" -eq 1 ]
  [[ "$output" == *'job "check" needs job "wheel" which does not exist'* ]]
}

@test "shellcheck finds nothing in scripts/install-deps, the CI jobs' first step" {
  run --separate-stderr "$SHELLCHECK" "$ROOT/scripts/install-deps"
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
}
