"""The ctypes structs of msda/_library.py against kernels/msda.h: every size and field offset,
as a C compiler lays them out. The ctypes copies are written by hand; a field added to msda.h
and not here makes libmsda read past the Python struct (it happened once, with `workspace`).
Also the enums and integer #defines of msda.h that the package copies, name by name and value
by value, and that it copies every one of them."""
import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from msda import _library as lib
from msda._errors import Status

# C struct -> its ctypes copy (same field names)
STRUCTS = {
    "msda_sizes": lib._Sizes,
    "msda_forward_args": lib._ForwardArgs,
    "msda_backward_args": lib._BackwardArgs,
    "msda_error": lib._Error,
    "msda_arch": lib._Arch,
}


def find_header():
    """$MSDA_HEADER (set by `make check`), else kernels/msda.h above this file, else None."""
    given = os.environ.get("MSDA_HEADER")
    if given:
        return Path(given)
    for parent in Path(__file__).resolve().parents:
        if (parent / "kernels" / "msda.h").is_file():
            return parent / "kernels" / "msda.h"
    return None


def c_layout(header, tmp_path):
    """{struct: (size, {field: offset})} printed by a program compiled against the header."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "msda.h"', "int main(void) {"]
    for struct, cls in STRUCTS.items():
        lines.append(f'    printf("{struct} - %zu\\n", sizeof({struct}));')
        for name, _ in cls._fields_:
            lines.append(f'    printf("{struct} {name} %zu\\n", offsetof({struct}, {name}));')
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines) + "\n")
    built = subprocess.run([cc, "-std=c11", "-I", str(header.parent), "-o", str(exe), str(src)],
                           capture_output=True, text=True)
    assert built.returncode == 0, f"a ctypes field has no C counterpart in {header}:\n{built.stderr}"
    layout = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        struct, field, value = line.split()
        entry = layout.setdefault(struct, [0, {}])
        if field == "-":
            entry[0] = int(value)
        else:
            entry[1][field] = int(value)
    return layout


def test_ctypes_structs_match_msda_h(tmp_path):
    header = find_header()
    if header is None:
        pytest.skip("kernels/msda.h is not beside these tests (an installed copy)")
    assert header.is_file(), f"MSDA_HEADER={header} does not exist"
    layout = c_layout(header, tmp_path)
    for struct, cls in STRUCTS.items():
        size, offsets = layout[struct]
        assert ctypes.sizeof(cls) == size, f"{cls.__name__}: {ctypes.sizeof(cls)} bytes, {struct}: {size}"
        for name, _ in cls._fields_:
            assert getattr(cls, name).offset == offsets[name], f"{struct}.{name}"


def test_abi_version_matches_msda_h_and_the_library():
    # The structs above are written for one ABI: msda.h's, which the loaded library must have.
    import re
    from msda import library
    header = find_header()
    if header is not None:
        defined = re.search(r"#define MSDA_ABI_VERSION (\d+)", header.read_text())
        assert defined and int(defined.group(1)) == lib.ABI_VERSION
    assert library()._lib.msda_abi_version() == lib.ABI_VERSION


# ---- the enums and constants ----------------------------------------------------------------
# C enum -> (its Python copy, the prefixes its constants lose there, the first that fits)
ENUMS = {
    "msda_dtype": (lib.DType, ("MSDA_",)),
    "msda_coord_type": (lib.CoordType, ("MSDA_COORD_",)),
    "msda_weights": (lib.Weights, ("MSDA_WEIGHTS_",)),
    "msda_memory": (lib.Memory, ("MSDA_",)),
    "msda_sampling": (lib.Sampling, ("MSDA_SAMPLING_",)),
    "msda_status": (Status, ("MSDA_ERR_", "MSDA_")),
}

# integer #define of msda.h -> its Python copy
DEFINES = {
    "MSDA_MAX_LEVELS": lib.MAX_LEVELS,
    "MSDA_ABI_VERSION": lib.ABI_VERSION,
    "MSDA_STATUS_COUNT": len(Status.__members__),  # Status has every msda_status
}

_INTEGER = r"(-?(?:0[xX][0-9a-fA-F]+|[0-9]+))[uUlL]*"  # a C integer literal: group 1, its digits


def header_code():
    """msda.h without its comments; skips where the header is not beside these tests."""
    header = find_header()
    if header is None:
        pytest.skip("kernels/msda.h is not beside these tests (an installed copy)")
    assert header.is_file(), f"MSDA_HEADER={header} does not exist"
    text = re.sub(r"/\*.*?\*/", " ", header.read_text(), flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_enums(code):
    """{enum: {constant: value}} of every `typedef enum NAME { A = 0, ... } NAME;` in the code;
    an enum written any other way, or a constant not written NAME = integer, fails."""
    enums = {}
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{([^{}]*)\}\s*(\w+)\s*;", code):
        tag, body, name = m.groups()
        assert tag == name, f"msda.h: typedef enum {tag} {{...}} {name}"
        values = {}
        for item in filter(None, (i.strip() for i in body.split(","))):
            c = re.fullmatch(rf"(\w+)\s*=\s*{_INTEGER}", item)
            assert c, f"msda.h, {name}: {item!r} is not NAME = integer, which this test reads"
            assert c.group(1) not in values, f"msda.h, {name}: {c.group(1)} twice"
            values[c.group(1)] = int(c.group(2), 0)
        enums[name] = values
    assert len(re.findall(r"\benum\b", code)) == len(enums), \
        "msda.h has an enum this test does not read (only typedef enum NAME {...} NAME;)"
    return enums


def header_defines(code):
    """{name: value} of every `#define MSDA_... <integer>` in the code."""
    define = rf"^\s*#\s*define\s+(MSDA_\w+)\s+\(?{_INTEGER}\)?\s*$"
    return {m.group(1): int(m.group(2), 0) for m in re.finditer(define, code, flags=re.M)}


def _python_name(constant, prefixes):
    for prefix in prefixes:
        if constant.startswith(prefix):
            return constant[len(prefix):]
    raise AssertionError(f"msda.h: {constant} has none of the prefixes {prefixes}")


def test_every_enum_of_msda_h_is_copied():
    assert set(header_enums(header_code())) == set(ENUMS), \
        "an enum was added to or removed from msda.h: copy it into the package and into ENUMS"


@pytest.mark.parametrize("enum", sorted(ENUMS))
def test_enum_matches_msda_h(enum):
    cls, prefixes = ENUMS[enum]
    values = header_enums(header_code()).get(enum)
    assert values is not None, f"msda.h has no enum {enum}"
    expected = {_python_name(name, prefixes): value for name, value in values.items()}
    copied = {name: member.value for name, member in cls.__members__.items()}  # aliases too
    python_only = {k: v for k, v in copied.items() if expected.get(k) != v}
    header_only = {k: v for k, v in expected.items() if copied.get(k) != v}
    assert copied == expected, (f"{cls.__name__} against msda.h's {enum}: in Python "
                                f"{python_only}, in msda.h {header_only}")


def test_integer_defines_match_msda_h():
    defines = header_defines(header_code())
    assert set(defines) == set(DEFINES), \
        f"msda.h's integer #defines {sorted(defines)}, the ones this test knows {sorted(DEFINES)}"
    for name, value in DEFINES.items():
        assert value == defines[name], f"{name}: {defines[name]} in msda.h, {value} in Python"
