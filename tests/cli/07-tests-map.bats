#!/usr/bin/env bats
# tests/README.md, the map of which suites test which feature, stays true: every path it writes
# between backquotes exists (one under build/ is made by make: its folder must be a $(BUILD)
# folder of the make files), every `make TARGET` it names is a target, and every bats, Check and
# pytest file, and every suite of `make check`, is named in it.
load helpers

ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
README="$ROOT/tests/README.md"
MAKEFILES=("$ROOT/Makefile" "$ROOT/tests/tests.mk" "$ROOT/kernels/kernels.mk")

# The text between backquotes, one span a line, and every line of the fenced code blocks; a
# line outside the blocks with an odd number of backquotes prints "UNBALANCED LINE_NUMBER".
code_spans() {
  awk '/^```/ { fence = !fence; next }
       fence { print; next }
       { line = $0
         if (gsub(/`/, "`", line) % 2) { print "UNBALANCED " NR; next }
         while (match(line, /`[^`]+`/)) {
           print substr(line, RSTART + 1, RLENGTH - 2)
           line = substr(line, RSTART + RLENGTH)
         } }' "$README"
}

# The words of those spans that are paths in the repository: they begin with one of its
# top-level folders or are one of its top-level files. Trailing punctuation goes.
readme_paths() {
  code_spans | grep -v '^UNBALANCED ' | tr ' \t' '\n\n' | sed 's/[,;:)]*$//' |
    grep -E '^(\.github|build|kernels|man|recipes|scripts|src|tests|tools|wheels)/|^(Makefile|README\.md|VERSION)$' |
    sort -u
}

@test "tests/README.md exists and its backquotes pair up on each line" {
  [ -f "$README" ]
  if code_spans | grep '^UNBALANCED ' >&2; then
    echo "tests/README.md: a backquoted span must open and close on one line" >&2
    return 1
  fi
}

@test "every path between backquotes in tests/README.md exists" {
  local p pattern missing=() n=0
  while IFS= read -r p; do
    [[ "$p" == *'$'* ]] && continue
    n=$((n + 1))
    pattern=$(sed 's/<[^>]*>/*/g' <<<"$p")
    if [[ "$p" == build/* ]]; then
      # made by make: there already, or a folder the make files put under $(BUILD)
      local folder=${p#build/}
      folder=${folder%%/*}
      compgen -G "$ROOT/$pattern" >/dev/null || grep -qF "\$(BUILD)/$folder" "${MAKEFILES[@]}" ||
        missing+=("$p")
    else
      compgen -G "$ROOT/$pattern" >/dev/null || missing+=("$p")
    fi
  done < <(readme_paths)
  [ "$n" -gt 50 ] || { echo "only $n paths found: is the extraction broken?" >&2; return 1; }
  if [ ${#missing[@]} -gt 0 ]; then
    printf 'tests/README.md names a missing path: %s\n' "${missing[@]}" >&2
    return 1
  fi
}

@test "every make target tests/README.md names is a target of the make files" {
  local t bad=() n=0
  while IFS= read -r t; do
    n=$((n + 1))
    grep -qE "^$t:" "${MAKEFILES[@]}" || bad+=("$t")
  done < <(code_spans | grep -oE '(^|[^a-z-])make [a-z][A-Za-z0-9_-]*' | sed 's/.*make //' | grep -v '[A-Z_]' | sort -u)
  [ "$n" -gt 10 ] || { echo "only $n make targets found" >&2; return 1; }
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'tests/README.md names make %s, which no make file defines\n' "${bad[@]}" >&2
    return 1
  fi
}

@test "every bats, Check and pytest file, and every suite of make check, is in tests/README.md" {
  local f s unnamed=()
  while IFS= read -r f; do
    grep -qF "\`$f\`" "$README" || unnamed+=("$f")
  done < <(cd "$ROOT" && { find tests -name '*.bats'; ls tests/unit/test_*.c tests/kernels/test_*.c wheels/tests/test_*.py; } | sort)
  for s in $(sed -n 's/^CHECK_SUITES *[:+]= *//p' "${MAKEFILES[@]}"); do
    grep -qF "\`make check-$s\`" "$README" || unnamed+=("make check-$s")
  done
  if [ ${#unnamed[@]} -gt 0 ]; then
    printf 'tests/README.md does not name %s\n' "${unnamed[@]}" >&2
    return 1
  fi
}
