"""On the GPU machine (nvcc, ninja, torch; no network): mmcv 2.1.0's multi-scale deformable
attention op compiled alone from mmcv's own sources, which fetch.py took out of its sdist: the
op's ms_deform_attn.cpp and cuda/ms_deform_attn_cuda.cu, and the binding binding.py copies out
of mmcv's pybind.cpp and cudabind.cpp, as one torch extension, OUT/mmcv_msda_ext.so, whose
ms_deform_attn_forward and ms_deform_attn_backward are mmcv._ext's (tests/bench/mmdet_models.py
--mmcv-ext OUT puts them in an mmcv._ext module of their own).

The flags are those mmcv's setup.py gives its CUDA build (torch's CUDAExtension): the define
MMCV_WITH_CUDA for the C++ and the CUDA sources, and mmcv's include folders; torch adds its own
nvcc flags (-D__CUDA_NO_HALF_OPERATORS__ and the rest), as it does to mmcv's. Two differences:
the C++ standard is torch's default for its extensions (mmcv's setup.py passes -std=c++17, the
standard torch required when it was written, and later torch headers refuse it), and the code
is for one architecture, this GPU's (--arch), where mmcv's wheels carry several. The host code
gets -O3, as a setup.py build gets Python's optimisation flags.

A binding piece not found (mmcv's files changed) stops before anything is compiled. Prints how
long the compile took. The sources are compiled from a copy in OUT/src, each file rewritten only
when its bytes change: a second build then compiles nothing (ninja goes by times), even where
SRC was copied anew with new times (carried to the GPU machine again).

Usage: python3 tests/bench/mmcv-msda-ext/build.py SRC OUT [--arch 9.0] (SRC: fetch.py's folder;
--arch in TORCH_CUDA_ARCH_LIST's syntax, default this GPU's)."""
import argparse
import os
import sys
import time
from pathlib import Path

import torch

from binding import ExtractError, extract
from fetch import INCLUDE_DIRS, SOURCES, VERSION

NAME = "mmcv_msda_ext"
BINDING = "mmcv_msda_binding.cpp"
FLAGS = ["-DMMCV_WITH_CUDA"]


def _arch(given):
    if given:
        return given
    if not torch.cuda.is_available():
        sys.exit("build: no GPU here: give --arch (TORCH_CUDA_ARCH_LIST syntax, e.g. 9.0)")
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def _write_if_changed(path: Path, data: bytes) -> None:
    """Left untouched when it holds DATA already, so that ninja does not compile it again."""
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def main() -> None:
    p = argparse.ArgumentParser(usage=__doc__.rsplit("Usage: ", 1)[1].strip())
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--arch")
    a = p.parse_args()
    src, out = a.src.resolve(), a.out.resolve()
    try:
        binding = extract(src)
    except ExtractError as e:
        sys.exit(f"build: {e}; nothing compiled")
    missing = [s for s in SOURCES if not (src / s).is_file()]
    if missing:
        sys.exit(f"build: {src} has no {', '.join(missing)} (run fetch.py); nothing compiled")
    arch = _arch(a.arch)
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    staged = out / "src"
    for f in sorted(src.rglob("*")):
        if f.is_file():
            _write_if_changed(staged / f.relative_to(src), f.read_bytes())
    _write_if_changed(out / BINDING, binding.encode())
    from torch.utils.cpp_extension import load
    start = time.time()
    try:
        load(name=NAME, sources=[str(staged / s) for s in SOURCES] + [str(out / BINDING)],
             extra_include_paths=[str(staged / d) for d in INCLUDE_DIRS], extra_cflags=["-O3"] + FLAGS,
             extra_cuda_cflags=FLAGS, build_directory=str(out), with_cuda=True,
             verbose=os.environ.get("MMCV_EXT_VERBOSE") == "1")
    except (RuntimeError, OSError) as e:  # the compiler's own output is in the message
        sys.exit(f"build: failed after {time.time() - start:.0f} s: {e}")
    print(f"build: mmcv {VERSION}'s MSDA op built in {time.time() - start:.0f} s (ninja: what changed) for "
          f"{arch} (torch {torch.__version__}, CUDA {torch.version.cuda}): {out / (NAME + '.so')}", flush=True)


if __name__ == "__main__":
    main()
