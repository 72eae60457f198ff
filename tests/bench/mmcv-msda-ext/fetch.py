"""Here (PyPI reachable): mmcv 2.1.0's source distribution, its sha256 checked, and out of it
only what its multi-scale deformable attention op needs to be compiled alone (build.py, on the
GPU machine): the op's C++ and CUDA sources, the two binding files build.py takes the op's
binding out of (pybind.cpp, cuda/cudabind.cpp), every header of mmcv's they include, found in
the folders mmcv's setup.py puts on the include path, and mmcv's LICENSE. They go into DEST
(an ignored folder: mmcv's sources are never committed), laid out as in the distribution.

pip downloads the sdist with --require-hashes. To check what it downloaded, pip builds the
sdist's metadata, which runs mmcv's setup.py; that imports pkg_resources, which setuptools 81
dropped, so the isolated build environment is constrained to an older setuptools (without
torch there, setup.py declares no extension and only names the package).

Usage: python3 tests/bench/mmcv-msda-ext/fetch.py DEST (e.g. build/gpu-mmdet/mmcv-src)."""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "2.1.0"
SDIST = f"mmcv-{VERSION}.tar.gz"
# PyPI's published digest of mmcv-2.1.0.tar.gz (its simple index, which pip checks against too).
SDIST_SHA256 = "d387bcab66b467479b6660310e23746cfc79c6e57acf04094680adb499a5cd3f"
CSRC = "mmcv/ops/csrc"
# The op's sources (as mmcv's setup.py compiles them) and the files build.py reads its binding out of.
SOURCES = (f"{CSRC}/pytorch/ms_deform_attn.cpp", f"{CSRC}/pytorch/cuda/ms_deform_attn_cuda.cu")
BINDINGS = (f"{CSRC}/pytorch/pybind.cpp", f"{CSRC}/pytorch/cuda/cudabind.cpp")
# mmcv's setup.py's include_dirs for a CUDA build, searched after the including file's own folder.
INCLUDE_DIRS = (f"{CSRC}/pytorch", f"{CSRC}/common", f"{CSRC}/common/cuda")
LICENSE = "LICENSE"
MAX_BYTES = 2 * 1024 * 1024
QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _download(into: Path) -> Path:
    constraints = into / "build-constraints.txt"
    constraints.write_text("setuptools<81\n")
    requirement = into / "requirement.txt"
    requirement.write_text(f"mmcv=={VERSION} --hash=sha256:{SDIST_SHA256}\n")
    env = dict(os.environ)
    # pip before 25.3 takes the build environment's constraints from PIP_CONSTRAINT, later ones
    # from PIP_BUILD_CONSTRAINT; each ignores the other's.
    env["PIP_CONSTRAINT"] = env["PIP_BUILD_CONSTRAINT"] = str(constraints)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    "--require-hashes", "-r", str(requirement), "-d", str(into / "dl")], env=env, check=True)
    sdist = into / "dl" / SDIST
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:  # pip checked it already; this guards against a change to the call above
        sys.exit(f"fetch: {SDIST} has sha256 {digest}, PyPI publishes {SDIST_SHA256}")
    return sdist


def _members(tar: tarfile.TarFile) -> dict:
    """The sdist's regular files by their path below its top folder (mmcv-2.1.0/)."""
    top = f"mmcv-{VERSION}/"
    return {m.name[len(top):]: m for m in tar.getmembers() if m.isfile() and m.name.startswith(top)}


def _needed(tar: tarfile.TarFile, members: dict) -> list:
    """SOURCES and BINDINGS with every mmcv header they include, transitively; a quoted include
    found in none of mmcv's folders stops the fetch (angle-bracket ones are torch's and CUDA's)."""
    wanted, todo = [], list(SOURCES + BINDINGS)
    while todo:
        path = todo.pop(0)
        if path in wanted:
            continue
        if path not in members:
            sys.exit(f"fetch: {SDIST} has no {path}")
        wanted.append(path)
        text = tar.extractfile(members[path]).read().decode("utf-8")
        for header in QUOTED_INCLUDE.findall(text):
            candidates = [os.path.normpath(f"{os.path.dirname(path)}/{header}")]
            candidates += [f"{d}/{header}" for d in INCLUDE_DIRS]
            found = next((c for c in candidates if c in members), None)
            if found is None:
                sys.exit(f"fetch: {path} includes \"{header}\", found in none of {', '.join(INCLUDE_DIRS)}")
            todo.append(found)
    return wanted + [LICENSE]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.rsplit("Usage: ", 1)[1].strip())
    dest = Path(sys.argv[1])
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        tmp = Path(tmp)
        sdist = _download(tmp)
        staged = tmp / "src"
        total = 0
        with tarfile.open(sdist) as tar:
            members = _members(tar)
            for path in _needed(tar, members):
                data = tar.extractfile(members[path]).read()
                total += len(data)
                (staged / path).parent.mkdir(parents=True, exist_ok=True)
                (staged / path).write_bytes(data)
                print(f"  {path} ({len(data)} bytes)")
        if total > MAX_BYTES:
            sys.exit(f"fetch: {total} bytes extracted, more than the {MAX_BYTES} expected of one op")
        (staged / "SOURCE").write_text(f"{SDIST} sha256 {SDIST_SHA256}\n")
        shutil.rmtree(dest, ignore_errors=True)
        staged.rename(dest)  # whole or not at all: a fetch that failed leaves no half folder
    print(f"fetch: mmcv {VERSION}'s MSDA op sources in {dest} ({total} bytes)")


if __name__ == "__main__":
    main()
