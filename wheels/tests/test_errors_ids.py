"""The finding IDs and fix commands of the msda package against recipes/signatures.json, their
owner (the failure signatures `msda-doctor diagnose` reports, one entry per finding ID). Needs
neither torch nor a working libmsda.

What can be compared: the ID itself (an entry's "id"), and the commands a message quotes between
backquotes, which must be one of that entry's "fix" commands as diagnose fills them
(src/lib/diagnose/diag_fill.c: {name} or {a|b} takes the first value known; a command with a
placeholder nothing fills is left out). The package knows {gpu_arch} (the GPU's sm_XY) and {arch}
("all" when it knows no GPU, else the GPU's); a command needing any other value is not quoted. The prose around the commands (what went wrong, "update the driver") is the
package's own wording of the entry's meaning and notes: no rule derives one from the other, so
it is not compared."""
import ast
import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

import msda
from msda import _errors
from msda._errors import GPU, Status, error_from_status
from msda._library import Library

SCHEMA = "msda-doctor/signatures/1"
GPU61 = GPU(0, "Tesla P40", (6, 1))


def find_signatures():
    """$MSDA_SIGNATURES (set by `make check`), else recipes/signatures.json above this file,
    else None."""
    given = os.environ.get("MSDA_SIGNATURES")
    if given:
        return Path(given)
    for parent in Path(__file__).resolve().parents:
        if (parent / "recipes" / "signatures.json").is_file():
            return parent / "recipes" / "signatures.json"
    return None


@pytest.fixture(scope="module")
def owner():
    """{finding ID: its fix commands} of recipes/signatures.json."""
    path = find_signatures()
    if path is None:
        pytest.skip("recipes/signatures.json is not above these tests (an installed copy)")
    assert path.is_file(), f"MSDA_SIGNATURES={path} does not exist"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data.get("schema") == SCHEMA, \
        f"{path}: schema {data.get('schema')!r}, this test reads {SCHEMA}"
    fixes = {}
    for entry in data["signatures"]:
        assert entry["id"] not in fixes, f"{path}: {entry['id']} twice"
        fixes[entry["id"]] = list(entry.get("fix", []))
    assert fixes, f"{path} has no signatures"
    return fixes


_PLACEHOLDER = re.compile(r"(?<!\$)\{([a-z0-9_|]+)\}")


def fill(template, values):
    """template with its placeholders filled as diagnose fills them (diag_fill.c's fill); None
    when a placeholder has no value (diagnose leaves that command out)."""
    missing = []

    def one(match):
        names = match.group(1).split("|")
        for name in names:
            if values.get(name):
                return values[name]
        missing.append(names[0])
        return ""
    filled = _PLACEHOLDER.sub(one, template)
    return None if missing else filled


# ---- every finding ID the package names -------------------------------------------------------
_ID = r"[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)+"


def _sources():
    """The .py files of the imported msda package (the installed wheel's under `make check`) and
    of MultiScaleDeformableAttention beside it, found without importing it (it needs torch)."""
    files = sorted(Path(msda.__file__).resolve().parent.glob("*.py"))
    spec = importlib.util.find_spec("MultiScaleDeformableAttention")
    if spec and spec.origin:
        files += sorted(Path(spec.origin).resolve().parent.glob("*.py"))
    return files


def named_ids():
    """{finding ID: [file:line, ...]}: every string constant of the sources that is a finding
    ID's shape (lowercase words joined by '-'), every "[id]" inside a string (the messages'
    heads), and the IDs of _errors' maps."""
    found = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            ids = re.findall(rf"\[({_ID})\]", node.value)
            if re.fullmatch(_ID, node.value):
                ids.append(node.value)
            for i in ids:
                found.setdefault(i, []).append(f"{path.name}:{node.lineno}")
    for table in (_errors._FINDING_BY_CUDA_RESULT, _errors._FINDING_BY_STATUS):
        for i in table.values():
            found.setdefault(i, []).append("_errors.py (a finding map)")
    return found


def test_every_finding_id_the_package_names_is_a_signature(owner):
    found = named_ids()
    # The scan sees what it must: every ID the maps give, and the library's own.
    assert set(_errors._FINDING_BY_STATUS.values()) <= set(found)
    assert "shared-lib-not-found" in found
    unknown = {i: where for i, where in found.items() if i not in owner}
    assert not unknown, (f"finding IDs that recipes/signatures.json lacks (or strings shaped like "
                         f"one): {unknown}")


def test_a_library_that_does_not_load_names_a_known_finding(owner, tmp_path):
    # No library is loaded: the file does not exist.
    with pytest.raises(msda.MSDAError) as info:
        Library(str(tmp_path / "libmsda.so"))
    assert info.value.finding_id in owner
    assert str(info.value).startswith(f"msda [{info.value.finding_id}]: ")


# ---- the fixes of the CUDA path's failures -----------------------------------------------------
def _cases():
    """(status, CUresult, finding ID) of every failure _errors maps to a finding."""
    cases = [(Status.CUDA, result, finding)
             for result, finding in _errors._FINDING_BY_CUDA_RESULT.items()]
    cases += [(status, 0, finding) for status, finding in _errors._FINDING_BY_STATUS.items()]
    return cases


@pytest.mark.parametrize("gpu", [GPU61, None], ids=["gpu", "no-gpu"])
@pytest.mark.parametrize("status,cuda_result,finding", _cases(),
                         ids=[f"{s.name}-{r}-{f}" for s, r, f in _cases()])
def test_fix_commands_are_the_signatures_fixes(owner, status, cuda_result, finding, gpu):
    err = error_from_status(status, "detail from libmsda", cuda_result=cuda_result,
                            archs=lambda: "sm_75 compute_90", gpu=lambda: gpu)
    text = str(err)
    assert err.finding_id == finding and finding in owner
    assert text.startswith(f"msda [{finding}]: ")
    values = {"gpu_arch": gpu.sm if gpu else "", "arch": gpu.sm if gpu else "all"}
    allowed = {fill(fix, values) for fix in owner[finding]} - {None}
    for command in re.findall(r"`([^`]*)`", text):
        assert command in allowed, (f"{finding}: the message's `{command}` is none of "
                                    f"recipes/signatures.json's fixes for it, filled: "
                                    f"{sorted(allowed)}\n{text}")


def test_fill_fills_as_diagnose_does():
    # The filling this test compares with, on the forms signatures.json uses.
    assert fill("msda-doctor build --arch {gpu_arch}", {"gpu_arch": "sm_61"}) == \
        "msda-doctor build --arch sm_61"
    assert fill("cuda-{a|b|c} {d}", {"b": "12.4", "d": "x"}) == "cuda-12.4 x"
    assert fill("cuda-{a|b|c} {d}", {"b": "12.4"}) is None
    assert fill("cuda-{a|b}", {}) is None
    assert fill("PATH=${PATH} ${x} {Not} {x}", {"x": "1"}) == "PATH=${PATH} ${x} {Not} 1"
