#!/usr/bin/env bats
# The command skeleton: help, version, usage errors, and --help agreeing with the man page.
load helpers

MAN="$BATS_TEST_DIRNAME/../../man/msda-doctor.1"

@test "--help lists every command and exits 0" {
  run --separate-stderr doctor --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"usage: msda-doctor [--version] [--help] COMMAND [ARGS]"* ]]
  [[ "$output" == *"  inspect "* ]]
  [[ "$output" == *"  help "* ]]
}

@test "--version prints the version" {
  run --separate-stderr doctor --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^msda-doctor\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "the synopsis in --help and in the man page agree, line for line" {
  help_lines=$(doctor --help | sed -n '/^usage: /,/^$/p' | sed -e 's/^usage: //' -e 's/^       //' -e '/^$/d')
  man_lines=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$MAN" | sed -n '/^\.nf/,/^\.fi/p' | sed -e '/^\.nf/d' -e '/^\.fi/d' \
              -e 's/\\f[BIRP]//g' -e 's/\\-/-/g')
  [ -n "$help_lines" ]
  if [ "$help_lines" != "$man_lines" ]; then
    diff <(echo "$help_lines") <(echo "$man_lines") >&2
    return 1
  fi
}

@test "every command in the table has a section in the man page with the same synopsis" {
  for cmd in $(doctor help --json | jq -r '.commands[].name'); do
    syn=$(doctor help --json "$cmd" | jq -r '.commands[0].synopsis')
    man_syn=$(sed -n 's/^\.SS "\(.*\)"$/\1/p' "$MAN" | sed -e 's/\\-/-/g' | grep "^$cmd " || true)
    [ "$syn" = "$man_syn" ] || { echo "$cmd: help '$syn' vs man '$man_syn'" >&2; return 1; }
  done
}

# The tags of the .TP items in one part of the man page that are options, one a line, as --help
# writes them: "-j, --jobs N". The part runs from the first line matching the awk pattern START
# to the next .SH or .SS. Quoted macro arguments are honoured; .BR and its kin join their
# arguments, .B joins them with spaces; font escapes go.
man_option_tags() {
  awk -v start="$1" '
    function args(line, join,    i, ch, quoted, out, cur, n) {
      out = ""; cur = ""; quoted = 0; n = 0
      for (i = 1; i <= length(line); i++) {
        ch = substr(line, i, 1)
        if (ch == "\"") { quoted = !quoted; continue }
        if (ch == " " && !quoted) {
          if (cur != "") { out = out (n++ ? join : "") cur; cur = "" }
          continue
        }
        cur = cur ch
      }
      if (cur != "") out = out (n++ ? join : "") cur
      return out
    }
    in_part && /^\.S[HS] / { in_part = 0 }
    $0 ~ start { in_part = 1; next }
    !in_part { next }
    tag_next {
      tag_next = 0; t = $0
      if (t ~ /^\.B /) t = args(substr(t, 4), " ")
      else if (t ~ /^\.(BR|RB|BI|IB|IR|RI) /) t = args(substr(t, 5), "")
      gsub(/\\f[BIRP]/, "", t); gsub(/\\-/, "-", t)
      if (t ~ /^-/) print t
      next
    }
    /^\.TP/ { tag_next = 1 }
  ' "$MAN"
}

# The same tags from an options array of `help --json`.
table_option_tags() {
  jq -r "$1"' | .[] | (if .short then .short + ", " else "" end) + .name + (if .value then " " + .value else "" end)'
}

@test "every option of every command is in its man page section, spelled the same, and no other" {
  json=$(doctor help --json)
  global_table=$(table_option_tags '.options' <<<"$json" | sort)
  global_man=$(man_option_tags '^\\.SH OPTIONS$' | sort)
  [ -n "$global_table" ]
  if [ "$global_table" != "$global_man" ]; then
    echo "OPTIONS: table vs man page:" >&2; diff <(echo "$global_table") <(echo "$global_man") >&2; return 1
  fi
  for cmd in $(jq -r '.commands[].name' <<<"$json"); do
    table=$(table_option_tags ".commands[] | select(.name == \"$cmd\") | .options" <<<"$json" | sort)
    man=$(man_option_tags "^\\\\.SS \"$cmd[ \"]" | sort)
    [ -n "$table" ] || { echo "$cmd: no options in help --json" >&2; return 1; }
    # An option the man page gives once for all commands (-h, --help) may live in OPTIONS only.
    while IFS= read -r tag; do
      grep -qxF -- "$tag" <<<"$man" && continue
      grep -qxF -- "$tag" <<<"$global_table" && grep -qxF -- "$tag" <<<"$global_man" && continue
      echo "$cmd: '$tag' is not in its man page section" >&2; return 1
    done <<<"$table"
    while IFS= read -r tag; do
      [ -z "$tag" ] || grep -qxF -- "$tag" <<<"$table" ||
        { echo "$cmd: the man page documents '$tag', which the command does not take" >&2; return 1; }
    done <<<"$man"
  done
}

@test "every option and argument of every command is in its synopsis, and the synopsis has no other" {
  json=$(doctor help --json)
  for cmd in $(jq -r '.commands[].name' <<<"$json"); do
    c=$(jq -c ".commands[] | select(.name == \"$cmd\")" <<<"$json")
    syn=" $(jq -r '.synopsis' <<<"$c") "
    # [--gpu ARCH]... for a repeatable option, [--json] for another, --cuda VERSION without
    # brackets for a required one; either spelling of it.
    # Fields apart by \x1f: a tab is white space to read, which would merge the empty fields.
    while IFS=$'\x1f' read -r name short value repeatable required; do
      [ "$name" = "--help" ] && continue
      dots=""; [ "$repeatable" = true ] && dots="..."
      v=""; [ -n "$value" ] && v=" $value"
      l="["; r="]"; [ "$required" = true ] && l="" && r=""
      [[ "$syn" == *" $l$name$v$r$dots "* ]] || { [ -n "$short" ] && [[ "$syn" == *" $l$short$v$r$dots "* ]]; } ||
        { echo "$cmd: '$name' is not in the synopsis '$syn' as $l$name$v$r$dots" >&2; return 1; }
    done < <(jq -r '.options[] | [.name, .short // "", .value // "", .repeatable, .required] | map(tostring) | join("\u001f")' <<<"$c")
    while IFS=$'\x1f' read -r name repeatable; do
      dots=""; [ "$repeatable" = true ] && dots="..."
      [[ "$syn" == *"$name$dots"* ]] || { echo "$cmd: '$name$dots' is not in the synopsis" >&2; return 1; }
    done < <(jq -r '.arguments[] | [.name, .repeatable] | map(tostring) | join("\u001f")' <<<"$c")
    for opt in $(grep -oE '(\[| )--?[a-z][a-z-]*' <<<"$syn" | cut -c2-); do
      jq -e --arg o "$opt" '.options | any(.name == $o or .short == $o)' <<<"$c" >/dev/null ||
        { echo "$cmd: the synopsis has '$opt', which the command does not take" >&2; return 1; }
    done
  done
}

@test "every command's --help lists each option of its table and fits 80 columns" {
  json=$(doctor help --json)
  for cmd in $(jq -r '.commands[].name' <<<"$json"); do
    run --separate-stderr doctor "$cmd" --help
    [ "$status" -eq 0 ] || { echo "$cmd --help: $status $stderr" >&2; return 1; }
    assert_no_sanitizer_report
    options=$(sed -n '/^$/,$p' <<<"$output" | sed -n '3,$p')
    while IFS= read -r tag; do
      grep -qE "^  $(sed 's/[]|.*[]/\\&/g' <<<"$tag")( |$)" <<<"$options" ||
        { echo "$cmd --help lacks '$tag'" >&2; return 1; }
    done < <(table_option_tags ".commands[] | select(.name == \"$cmd\") | .options" <<<"$json")
    if awk 'length($0) > 79 { bad = 1 } END { exit !bad }' <<<"$options"; then
      echo "$cmd --help has an option line over 79 columns" >&2; return 1
    fi
  done
}

@test "every exit code of the enum is documented in the man page" {
  src="$BATS_TEST_DIRNAME/../../src/cli/cli.h"
  # The last entry has no comma: the pattern must not need one (it missed 9 when it did).
  codes=$(sed -n 's/.*MD_EXIT_[A-Z_]* *= *\([0-9][0-9]*\).*/\1/p' "$src")
  [ "$(grep -c . <<<"$codes")" -eq "$(grep -c '^ *MD_EXIT_' "$src")" ]
  for code in $codes; do
    grep -q "^\.B $code\$" "$MAN" || { echo "exit $code undocumented" >&2; return 1; }
  done
}

@test "help COMMAND and COMMAND --help print the same usage" {
  a=$(doctor help inspect)
  b=$(doctor inspect --help)
  [ "$a" = "$b" ]
  [[ "$a" == "usage: msda-doctor inspect "* ]]
}

@test "no command is a usage error with a hint" {
  run --separate-stderr doctor
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"msda-doctor: error: no command given"* ]]
  [[ "$stderr" == *"Try 'msda-doctor --help' for more information."* ]]
}

@test "an unknown command is a usage error naming it" {
  run --separate-stderr doctor frobnicate
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"unknown command 'frobnicate'"* ]]
}

@test "an unknown option before any command is named as an option, not as a command" {
  run --separate-stderr doctor --frob
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"unknown option '--frob'"* ]]
}

@test "an unknown option is a usage error naming it, with the command's hint" {
  run --separate-stderr doctor inspect --frob x
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"unknown option '--frob'"* ]]
  [[ "$stderr" == *"Try 'msda-doctor inspect --help' for more information."* ]]
}

@test "an option without its value is a usage error" {
  run --separate-stderr doctor inspect x --gpu
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"option '--gpu' needs a value"* ]]
}

@test "help --json is valid JSON listing the commands" {
  run --separate-stderr doctor help --json
  [ "$status" -eq 0 ]
  [ "$(jq -r '.commands | map(.name) | join(",")' <<<"$output")" = "inspect,build,verify,diagnose,fetch,help" ]
}

@test "help --json gives each option's name, short form, metavariable and whether it repeats" {
  run --separate-stderr doctor help --json inspect
  [ "$status" -eq 0 ]
  [ "$(jq -c '.commands[0].options[] | select(.name == "--gpu") | [.short, .value, .repeatable]' <<<"$output")" = '[null,"ARCH",true]' ]
  [ "$(jq -c '.commands[0].options[] | select(.name == "--verbose") | [.short, .value, .repeatable]' <<<"$output")" = '["-v",null,false]' ]
  [ "$(jq -c '.commands[0].arguments | map(.name)' <<<"$output")" = '["FILE|DIR"]' ]
  [ "$(jq -c '.options | map(.name)' <<<"$output")" = '["--help","--version"]' ]
  # Names and short forms are unique within a command: getopt_long would take the first.
  run --separate-stderr doctor help --json
  [ "$(jq '[.commands[] | [.options[].name] | length - (unique | length)] | add' <<<"$output")" -eq 0 ]
  [ "$(jq '[.commands[] | [.options[].short | values] | length - (unique | length)] | add' <<<"$output")" -eq 0 ]
}

@test "a failed write to stdout is reported, not ignored" {
  [ -w /dev/full ] || skip "no /dev/full"
  run --separate-stderr doctor --help
  run --separate-stderr bash -c '"$MSDA_DOCTOR" --help > /dev/full'
  [ "$status" -eq 9 ]
  [[ "$stderr" == *"cannot write the output"* ]]
}
