"""mmcv's Python binding of its multi-scale deformable attention op alone, taken out of mmcv's
own binding files, so that the op compiles without mmcv's hundred other ops (build.py):

- from mmcv/ops/csrc/pytorch/cuda/cudabind.cpp: its #include lines, the declarations of the
  op's CUDA functions and of the device-dispatched functions they implement, and the two
  REGISTER_DEVICE_IMPL lines that register the former as the CUDA implementation of the latter;
- from mmcv/ops/csrc/pytorch/pybind.cpp: its #include lines, the declarations of
  ms_deform_attn_forward and ms_deform_attn_backward, its PYBIND11_MODULE line, and the two
  m.def entries, with mmcv's argument names (mmcv's Python passes im2col_step= and the rest by
  keyword).

Each piece is copied as mmcv writes it; nothing is added but comments. A piece that is not
found exactly once (mmcv's files changed) stops with one line naming it, and nothing is written.

Usage: python3 tests/bench/mmcv-msda-ext/binding.py SRC (the folder fetch.py wrote): prints
the binding source."""
import re
import sys
from pathlib import Path

PYBIND = "mmcv/ops/csrc/pytorch/pybind.cpp"
CUDABIND = "mmcv/ops/csrc/pytorch/cuda/cudabind.cpp"
OPS = ("ms_deform_attn_forward", "ms_deform_attn_backward")
IMPLS = ("ms_deform_attn_impl_forward", "ms_deform_attn_impl_backward")
CUDA_FUNCTIONS = ("ms_deform_attn_cuda_forward", "ms_deform_attn_cuda_backward")
INCLUDE = re.compile(r"^#\s*include\s*[<\"][^>\"]+[>\"]", re.M)


class ExtractError(Exception):
    """A piece of mmcv's binding files not found as expected; its message is one line."""


def _closing(text: str, open_at: int, path: str) -> int:
    """The index just past the parenthesis that closes the one at OPEN_AT, string and
    character literals skipped."""
    depth, i = 0, open_at
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i += 1
            while i < len(text) and text[i] != c:
                i += 2 if text[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ExtractError(f"{path}: a parenthesis at offset {open_at} is never closed")


def _one(pieces: list, what: str, path: str) -> str:
    if len(pieces) != 1:
        raise ExtractError(f"{path}: {len(pieces)} {what} found, expected one (mmcv's file changed?)")
    return pieces[0]


def _declaration(text: str, name: str, path: str) -> str:
    """NAME's declaration: a return type at the start of a line, NAME, its parameters, then ';'
    (a definition, '{' after the parameters, is not one)."""
    found = []
    for m in re.finditer(r"^[A-Za-z_][\w:<>]*[ \t]*[&*]?[ \t]+" + re.escape(name) + r"\s*\(", text, re.M):
        end = _closing(text, m.end() - 1, path)
        if text[end:].lstrip().startswith(";"):
            found.append(text[m.start():end] + ";")
    return _one(found, f"declarations of {name}", path)


def _call(text: str, head: str, what: str, path: str) -> str:
    """The statement WHAT that starts with HEAD (a regular expression), through the parenthesis
    that closes its first one and the ';' after it."""
    found = []
    for m in re.finditer(head, text):
        end = _closing(text, text.index("(", m.start()), path)
        if text[end:].lstrip().startswith(";"):
            found.append(text[m.start():end] + ";")
    return _one(found, what, path)


def _includes(text: str, path: str) -> list:
    found = INCLUDE.findall(text)
    if not found:
        raise ExtractError(f"{path}: no #include lines found (mmcv's file changed?)")
    return found


def _module_line(text: str, path: str) -> str:
    """PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {, as mmcv writes it; its module variable must be
    the `m` of the m.def entries."""
    lines = re.findall(r"^PYBIND11_MODULE\(\s*\w+\s*,\s*m\s*\)\s*\{", text, re.M)
    return _one(lines, "PYBIND11_MODULE(..., m) lines", path)


def extract(src: Path) -> str:
    """The binding's source, out of the folder fetch.py wrote; raises ExtractError."""
    try:
        pybind = (src / PYBIND).read_text(encoding="utf-8")
        cudabind = (src / CUDABIND).read_text(encoding="utf-8")
    except OSError as e:
        raise ExtractError(f"{e.filename}: {e.strerror} (run fetch.py first)") from e
    includes = list(dict.fromkeys(_includes(pybind, PYBIND) + _includes(cudabind, CUDABIND)))
    cuda_side = [_declaration(cudabind, name, CUDABIND) for name in CUDA_FUNCTIONS + IMPLS]
    cuda_side += [_call(cudabind, rf"(?m)^REGISTER_DEVICE_IMPL\(\s*{impl}\s*,\s*CUDA\s*,\s*{cuda}\s*\)",
                        f"REGISTER_DEVICE_IMPL({impl}, CUDA, {cuda}) lines", CUDABIND)
                  for impl, cuda in zip(IMPLS, CUDA_FUNCTIONS)]
    python_side = [_declaration(pybind, name, PYBIND) for name in OPS]
    defs = [_call(pybind, r'\bm\.def\(\s*"' + name + r'"\s*,', f'm.def("{name}", ...) entries', PYBIND)
            for name in OPS]
    module_line = _module_line(pybind, PYBIND)
    return "\n".join([
        "// mmcv's binding of its multi-scale deformable attention op alone, written by",
        "// tests/bench/mmcv-msda-ext/binding.py: every line below but the comments and the module's",
        "// closing brace is copied from mmcv's",
        f"// {PYBIND} and {CUDABIND}.",
        *includes,
        "",
        f"// {CUDABIND}: the CUDA implementations and their registration",
        *cuda_side,
        "",
        f"// {PYBIND}: the op's functions and their Python names",
        *python_side,
        "",
        module_line,
        *(f"  {d}" for d in defs),
        "}",
        "",
    ])


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.rsplit("Usage: ", 1)[1].strip())
    try:
        print(extract(Path(sys.argv[1])), end="")
    except ExtractError as e:
        sys.exit(f"binding: {e}")


if __name__ == "__main__":
    main()
