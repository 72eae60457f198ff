"""The ctypes structs of msda/_library.py against kernels/msda.h: every size and field offset,
as a C compiler lays them out. The ctypes copies are written by hand; a field added to msda.h
and not here makes libmsda read past the Python struct (it happened once, with `workspace`)."""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from msda import _library as lib

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
