#!/usr/bin/env bats
# The repository carries its own design documents, docs/DESIGN.md and docs/FACTS.md, and every
# citation of them can be followed: it names the file in docs/, the section it quotes is a heading
# there, the decision it numbers is in docs/DESIGN.md's list, and nothing points at a folder
# outside the repository. Reads the files git tracks (and new ones it does not ignore); needs no
# build. The last test plants bad citations in a scratch repository to show each check fails.
load helpers

ROOT="$BATS_TEST_DIRNAME/../.."

# The documents a citation may name, as a regex alternative.
DOCS='(DESIGN|FACTS)\.md'

# list_files ROOT: fills FILES with the files git tracks under ROOT and the new ones it does not
# ignore, that exist, except tests/fuzz/regressions (fuzzer inputs, bytes rather than prose).
list_files() {
  local list="$BATS_TEST_TMPDIR/files" f
  git -C "$1" ls-files -z --cached --others --exclude-standard -- . ':(exclude)tests/fuzz/regressions' \
    >"$list" || return 1
  FILES=()
  while IFS= read -r -d '' f; do
    [ -f "$1/$f" ] && FILES+=("$f")
  done <"$list"
  [ "${#FILES[@]}" -gt 0 ] || { echo "no files listed under $1" >&2; return 1; }
}

# grep_files ROOT GREP_ARGS...: grep over FILES from ROOT, binary files skipped. Status 2 (a
# pattern grep cannot compile, an unreadable file) fails rather than pass as "nothing found".
grep_files() {
  local root=$1 rc=0
  shift
  (cd "$root" && grep -I "$@" -- "${FILES[@]}") || rc=$?
  [ "$rc" -le 1 ] || { echo "grep failed ($rc): $*" >&2; return 1; }
}

# headings ROOT DOC: the Markdown headings of docs/DOC, one a line, without the #s.
headings() {
  sed -n -E 's/^#{1,6}[[:space:]]+(.*[^[:space:]#])[[:space:]#]*$/\1/p' "$1/docs/$2"
}

# decisions ROOT: the numbers of the list under docs/DESIGN.md's "## Decisions" heading.
decisions() {
  awk '/^## / { inside = ($0 ~ /^## Decisions/) } inside && /^[0-9]+\. / { sub(/\..*/, ""); print }' \
    "$1/docs/DESIGN.md"
}

# (a) No file points at the team's documents outside the repository: a relative path up into the
# sibling named shared, or the words shared and folder in a row, even wrapped over two lines or a
# comment's continuation. (This file never writes either, so that it does not match itself.)
check_outside() {
  list_files "$1" || return 1
  local hits
  hits=$(grep_files "$1" -l -z -i -E -e '\.\./shared' -e 'shared[[:space:]*#/]+folder') || return 1
  [ -z "$hits" ] || { tr '\0' '\n' <<<"$hits" | sed '/^$/d; s|$|: points outside the repository|'; return 1; }
}

# (b) Every mention of the documents is written docs/DESIGN.md or docs/FACTS.md.
check_paths() {
  list_files "$1" || return 1
  local hits
  hits=$(grep_files "$1" -n -o -P "(?<![A-Za-z0-9_-])(?<!docs/)$DOCS") || return 1
  [ -z "$hits" ] || { sed 's|$| (write docs/ before it)|' <<<"$hits"; return 1; }
}

# (c) Every section a citation names is a heading of that document, word for word. A section is
# the quoted text right after the citation ("...", '...' or JSON's \"...\", after a comma, a colon
# or spaces, even on the next line of a comment), or the unquoted rest of a parenthesis that the
# citation opens: (docs/FACTS.md, Jetson). Prints how many it checked on the last line.
check_sections() {
  list_files "$1" || return 1
  local quoted paren line file cite doc section bad=0 count=0
  # \x27 is the apostrophe, for PCRE and GNU sed alike.
  quoted=$(grep_files "$1" -H -z -o -P \
    'docs/'"$DOCS"'[,:]?[\s*#/]+\\?["\x27][^"\x27\\\n]+\\?["\x27]' | tr '\n\0' ' \n') || return 1
  paren=$(grep_files "$1" -H -o -P '\(docs/'"$DOCS"', [^"\x27\\()]+\)') || return 1
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    file=${line%%:*}
    cite=${line#*:}
    cite=${cite#(}
    doc=${cite#docs/}
    doc=${doc%%.md*}.md
    if [[ "${line#*:}" == \(* ]]; then
      section=${cite#docs/"$doc", }
      section=${section%)}
      [[ "$section" =~ ^decisions?\ [0-9] ]] && continue
    else
      section=$(sed -E 's/^docs\/[A-Z]+\.md[,:]?[[:space:]*#\/]*\\?["\x27]//; s/\\?["\x27]$//' <<<"$cite")
    fi
    count=$((count + 1))
    if ! headings "$1" "$doc" | grep -qxF -- "$section"; then
      echo "$file: \"$section\" is not a heading of docs/$doc"
      bad=1
    fi
  done < <(printf '%s\n%s\n' "$quoted" "$paren")
  echo "$count sections checked"
  [ "$bad" -eq 0 ]
}

# (d) Every decision cited (docs/DESIGN.md decision 6, docs/DESIGN.md, decisions 3 and 6; and any
# "decision N" inside docs/) is numbered in docs/DESIGN.md's list, whose numbers are unique.
check_decisions() {
  list_files "$1" || return 1
  local known cited inside line n dup bad=0 count=0
  known=$(decisions "$1")
  [ -n "$known" ] || { echo "docs/DESIGN.md: no numbered list under '## Decisions'"; return 1; }
  dup=$(sort <<<"$known" | uniq -d)
  [ -z "$dup" ] || { echo "docs/DESIGN.md: decision numbered twice: $(echo $dup)"; bad=1; }
  cited=$(grep_files "$1" -H -z -o -P \
    'docs/DESIGN\.md,?[\s*#/]+decisions?[\s*#/]+[0-9]+((,|,? and|,? or)[\s*#/]+[0-9]+)*' |
    tr '\n\0' ' \n') || return 1
  inside=$(cd "$1" && grep -H -o -E 'decisions? [0-9]+' docs/*.md) || true
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    for n in $(sed -E 's/^[^:]*:.*decisions?//' <<<"$line" | grep -o -E '[0-9]+'); do
      count=$((count + 1))
      grep -qx -- "$n" <<<"$known" || { echo "${line%%:*}: decision $n is not in docs/DESIGN.md"; bad=1; }
    done
  done < <(printf '%s\n%s\n' "$cited" "$inside")
  echo "$count decisions checked"
  [ "$bad" -eq 0 ]
}

@test "the design documents are in the repository" {
  [ -s "$ROOT/docs/DESIGN.md" ]
  [ -s "$ROOT/docs/FACTS.md" ]
  [ -s "$ROOT/docs/README.md" ]
}

@test "no file points at a folder outside the repository" {
  run check_outside "$ROOT"
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
}

@test "every citation of the design documents names docs/DESIGN.md or docs/FACTS.md" {
  run check_paths "$ROOT"
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
}

@test "every section a citation names is a heading of that document" {
  run check_sections "$ROOT"
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
  # The tree cites sections (the wheel writer, the CUDA error codes, ...): finding none means the
  # patterns broke, not that all is well.
  [[ "${lines[-1]}" =~ ^([0-9]+)\ sections\ checked$ ]]
  [ "${BASH_REMATCH[1]}" -ge 5 ]
}

@test "every decision cited is numbered in docs/DESIGN.md" {
  run check_decisions "$ROOT"
  [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
  [[ "${lines[-1]}" =~ ^([0-9]+)\ decisions\ checked$ ]]
  [ "${BASH_REMATCH[1]}" -ge 1 ]
}

@test "each check fails on a planted bad citation" {
  local scratch="$BATS_TEST_TMPDIR/plant" d=DESIGN f=FACTS
  mkdir -p "$scratch/docs"
  cp "$ROOT/docs/DESIGN.md" "$ROOT/docs/FACTS.md" "$scratch/docs/"
  git -C "$scratch" -c init.defaultBranch=main init -q
  # Good citations pass...
  printf '/* docs/%s.md, "Wheels"; docs/%s.md "Finding IDs";\n * (docs/%s.md, Jetson); docs/%s.md, decision 6 */\n' \
    "$f" "$d" "$f" "$d" >"$scratch/good.c"
  for check in check_outside check_paths check_sections check_decisions; do
    run "$check" "$scratch"
    [ "$status" -eq 0 ] || { echo "$check: $output" >&2; return 1; }
  done
  # ...and each kind of bad one is named.
  printf 'see the team'"'"'s shared\nfolder\n' >"$scratch/a.md"
  run check_outside "$scratch"
  [ "$status" -eq 1 ]
  [[ "$output" == *"a.md: points outside"* ]]
  rm "$scratch/a.md"
  printf 'x = 1  # %s/%s.md\n' "..""/shared" "$f" >"$scratch/b.py"
  run check_outside "$scratch"
  [ "$status" -eq 1 ]
  [[ "$output" == *"b.py: points outside"* ]]
  run check_paths "$scratch"
  [ "$status" -eq 1 ]
  [[ "$output" == *"b.py:1:$f.md"* ]]
  rm "$scratch/b.py"
  printf '"_about": "cards (%s.md, GPU architectures)"\n' "$f" >"$scratch/c.json"
  run check_paths "$scratch"
  [ "$status" -eq 1 ]
  [[ "$output" == *"c.json:1:$f.md"* ]]
  rm "$scratch/c.json"
  printf '/* docs/%s.md,\n * "No such section" */\n' "$f" >"$scratch/d.c"
  run check_sections "$scratch"
  [ "$status" -eq 1 ]
  [[ "$output" == *'d.c: "No such section" is not a heading of docs/'"$f.md"* ]]
  rm "$scratch/d.c"
  printf '"_about": "boards (docs/%s.md, Jetsons)"\n' "$f" >"$scratch/e.json"
  run check_sections "$scratch"
  [ "$status" -eq 1 ]
  [[ "$output" == *'e.json: "Jetsons" is not a heading'* ]]
  rm "$scratch/e.json"
  printf '# ---- (docs/%s.md decision 99) ----\n' "$d" >"$scratch/Makefile"
  run check_decisions "$scratch"
  [ "$status" -eq 1 ]
  [[ "$output" == *"Makefile: decision 99 is not in docs/$d.md"* ]]
}
