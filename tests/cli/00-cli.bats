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

@test "every exit code of the enum is documented in the man page" {
  src="$BATS_TEST_DIRNAME/../../src/cli/cli.h"
  for code in $(sed -n 's/.*MD_EXIT_[A-Z]* = \([0-9]*\),.*/\1/p' "$src"); do
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
  [ "$(jq -r '.commands | map(.name) | join(",")' <<<"$output")" = "inspect,build,verify,diagnose,help" ]
}

@test "a failed write to stdout is reported, not ignored" {
  [ -w /dev/full ] || skip "no /dev/full"
  run --separate-stderr doctor --help
  run --separate-stderr bash -c '"$MSDA_DOCTOR" --help > /dev/full'
  [ "$status" -eq 9 ]
  [[ "$stderr" == *"cannot write the output"* ]]
}
