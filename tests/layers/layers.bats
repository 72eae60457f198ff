#!/usr/bin/env bats
# The library's layering (src/lib/LAYERS, tools/house --check): the tree keeps it, and each kind
# of broken rule, planted in a copy of the sources, fails the check naming what broke it.

setup() {
    ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    HOUSE="$ROOT/tools/house"
    OBJECTS="${MSDA_OBJECTS:?make check-layers sets MSDA_OBJECTS to the sanitizer build}"
    WORK="$BATS_TEST_TMPDIR"
    cp -r "$ROOT/src" "$WORK/src"
}

check_copy() {
    run "$HOUSE" --check --src "$WORK/src" --objects "${1:-$OBJECTS}"
}

@test "the tree keeps its layers: no upward include or call, no circle, every header scoped" {
    run "$HOUSE" --check --objects "$OBJECTS"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"0 broken rules"* ]]
}

@test "without --objects the sources alone are checked (includes, scopes, no calls)" {
    run "$HOUSE" --check --src "$WORK/src"
    [ "$status" -eq 0 ]
    [[ "$output" == *"0 broken rules"* ]]
}

@test "the figures: rooms, floors, no arrow back up and no circle anywhere" {
    run "$HOUSE" --json --objects "$OBJECTS"
    [ "$status" -eq 0 ]
    python3 -c '
import json, sys
d = json.loads(sys.argv[1])
for part in ("whole tree", "src/cli", "diagnose"):
    f = d[part]
    assert f["rooms"] > 0 and f["floors"] > 0, part
    assert f["arrows_back_up"] == [] and f["circles"] == [], (part, f)
' "$output"
}

@test "an upward include fails, naming the file, the header and the floors" {
    echo '#include "diagnose/diagnose.h"' >> "$WORK/src/lib/base/strv.c"
    check_copy
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'upward: lib/base/strv.c includes "diagnose/diagnose.h": base is below diagnose'* ]]
}

@test "an upward call fails, naming the caller and the function" {
    mkdir -p "$WORK/objects"
    cp -r "$OBJECTS/src" "$WORK/objects/"
    printf 'int md_diagnose_init(void *d, void *e);\nint md_plant(void);\nint md_plant(void) { return md_diagnose_init(0, 0); }\n' \
        > "$WORK/src/lib/base/plant.c"
    cc -c -o "$WORK/objects/src/lib/base/plant.o" "$WORK/src/lib/base/plant.c"
    check_copy "$WORK/objects"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'upward: lib/base/plant.c calls md_diagnose_init (lib/diagnose/diagnose.c)'* ]]
}

@test "src/cli including a header that is not public fails" {
    sed -i '0,/#include "cli.h"/s//#include "cli.h"\n#include "diagnose\/knowledge.h"/' "$WORK/src/cli/main.c"
    check_copy
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'src/cli/main.c includes "diagnose/knowledge.h", which is not public'* ]]
}

@test "a private header included from another folder fails" {
    echo '#include "binary/elf_check.h"' >> "$WORK/src/lib/diagnose/diagnose.c"
    check_copy
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'src/lib/diagnose/diagnose.c includes "binary/elf_check.h", private to src/lib/binary'* ]]
}

@test "a circle inside one subsystem fails" {
    echo '#include "process.h"' >> "$WORK/src/lib/base/strv.c"
    check_copy
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'circle in base: lib/base/process <-> lib/base/strv'* ]]
}

@test "a header without its Scope line fails" {
    sed -i '/Scope:/d' "$WORK/src/lib/base/strv.h"
    check_copy
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *'src/lib/base/strv.h: 0 Scope lines'* ]]
}

@test "a folder that LAYERS does not name is an error, not ignored" {
    mkdir "$WORK/src/lib/attic"
    cp "$WORK/src/lib/base/strv.c" "$WORK/src/lib/attic/old.c"
    check_copy
    [ "$status" -ne 0 ]
    [[ "$output" == *'src/lib/attic/old.c: its folder is not in src/lib/LAYERS'* ]]
}
