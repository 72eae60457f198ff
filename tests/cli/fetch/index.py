#!/usr/bin/env python3
"""A synthetic package index of NVIDIA's CUDA compiler wheels, for `fetch --wheels` (tests/cli/fetch).

  index.py make ROOT [--html] [--bad-sha PROJECT] [--missing PROJECT] [--only MACHINE PROJECT]
                     [--evil PROJECT]
      writes small wheels to ROOT/files/ and a project page per package to ROOT/simple/PROJECT/:
      index.json (PEP 691) beside an index.html without links, or with --html an index.html
      (PEP 503) alone. Each
      package has releases of CUDA 13.0 (and a newer one, and older ones, that a pinned fetch
      must pass over) and of 13.1, for x86_64 and aarch64. --bad-sha gives PROJECT a wrong
      sha256 on its pages; --missing leaves its page out; --only builds its wheels for MACHINE
      alone; --evil puts a member with '..' into its 13.0 wheel. redist.py serve ROOT serves it.
"""
import hashlib
import io
import json
import os
import sys
import zipfile

MACHINES = ["x86_64", "aarch64"]

NVCC = """#!/bin/sh
case "$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release {mm}, V{full}" ;;
  --list-gpu-code) for c in sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_100 sm_120; do echo $c; done ;;
  *) exit 1 ;;
esac
"""

# project -> versions offered. nvidia-nvvm has a newer 13.0 than nvcc's and a 13.5: the pin to
# nvcc's version must win. A yanked and a pre-release version are newest of all and never taken.
RELEASES = {
    "nvidia-cuda-nvcc": ["13.0.48", "13.0.88", "13.1.80"],
    "nvidia-nvvm": ["13.0.48", "13.0.88", "13.0.99", "13.1.80", "13.5.37"],
    "nvidia-cuda-runtime": ["13.0.48", "13.0.96", "13.1.80"],
    "nvidia-cuda-crt": ["13.0.88", "13.1.80"],
    "nvidia-cuda-cccl": ["13.0.50", "13.0.85", "13.1.78"],
}
YANKED = "13.0.200"
PRE = "13.0.300rc1"


def members(project, version):
    mm = ".".join(version.split(".")[:2])
    if project == "nvidia-cuda-nvcc":
        return [("nvidia/cu13/bin/nvcc", NVCC.format(mm=mm, full=version).encode(), 0o744),
                ("nvidia/cu13/bin/nvcc.profile", b"TOP = $(_HERE_)/..\n", 0o644),
                ("nvidia/cu13/bin/ptxas", b"ptxas\n", 0o744)]
    if project == "nvidia-nvvm":
        return [("nvidia/cu13/nvvm/bin/cicc", f"cicc {version}\n".encode(), 0o744)]
    if project == "nvidia-cuda-runtime":
        return [("nvidia/cu13/include/cuda.h", b"#define CUDA_VERSION 13000\n", 0o644),
                ("nvidia/cu13/lib/libcudart.so.13", b"\x7fELF", 0o644)]
    if project == "nvidia-cuda-crt":
        return [("nvidia/cu13/include/crt/host_config.h", b"/* crt */\n", 0o644)]
    return [("nvidia/cu13/include/cccl/cuda/std/version", f"// cccl {version}\n".encode(), 0o644)]


def wheel(root, project, version, machine, evil):
    dist = project.replace("-", "_")
    tag = "manylinux2010" if project == "nvidia-nvvm" else "manylinux2014"
    glibc = "2_12" if tag == "manylinux2010" else "2_17"
    name = f"{dist}-{version}-py3-none-{tag}_{machine}.manylinux_{glibc}_{machine}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        files = members(project, version) + [("nvidia/__init__.py", b"", 0o644),
                                             (f"{dist}-{version}.dist-info/METADATA",
                                              f"Name: {project}\nVersion: {version}\n".encode(), 0o644)]
        if evil:
            files.append(("nvidia/cu13/../../escaped", b"x", 0o644))
        for path, data, mode in files:
            info = zipfile.ZipInfo(path, (2024, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            z.writestr(info, data)
    blob = buf.getvalue()
    os.makedirs(os.path.join(root, "files"), exist_ok=True)
    with open(os.path.join(root, "files", name), "wb") as f:
        f.write(blob)
    return name, hashlib.sha256(blob).hexdigest(), len(blob)


def make(root, html_only=False, bad_sha=(), missing=(), only=None, evil=()):
    only = only or {}
    for project, versions in RELEASES.items():
        if project in missing:
            continue
        files = []
        for version in versions + [YANKED, PRE]:
            for machine in only.get(project, MACHINES):
                name, sha, size = wheel(root, project, version, machine, project in evil and version.startswith("13.0."))
                if project in bad_sha:
                    sha = "0" * 64
                files.append({"filename": name, "url": f"../../files/{name}", "hashes": {"sha256": sha},
                              "size": size, "yanked": "broken" if version == YANKED else False})
        page = os.path.join(root, "simple", project)
        os.makedirs(page, exist_ok=True)
        if not html_only:
            with open(os.path.join(page, "index.json"), "w") as f:
                json.dump({"meta": {"api-version": "1.1"}, "name": project, "files": files}, f, indent=1)
        anchors = []
        for i, fl in enumerate(files):
            # Both quote styles, entities in the URL (decimal, hex with x and with X) and extra
            # attributes, as real indexes vary.
            href = f"{fl['url']}#sha256={fl['hashes']['sha256']}"
            yanked = ' data-yanked="broken"' if fl["yanked"] else ""
            if i % 2:
                anchors.append(f"<a href='{href.replace('../', '&#46;&#46;/', 1)}' data-requires-python=\"&gt;=3\"{yanked}>{fl['filename']}</a><br/>")
            else:
                anchors.append(f'<A HREF="{href.replace("../", "&#X2e;&#x2E;/", 1)}"{yanked}>\n  {fl["filename"]}\n</A><br/>')
        if not html_only:
            # A JSON index whose HTML lists nothing: a fetch that read the HTML would find no release.
            with open(os.path.join(page, "index.html"), "w") as f:
                f.write("<!DOCTYPE html>\n<html><body>ask for application/vnd.pypi.simple.v1+json</body></html>\n")
            continue
        with open(os.path.join(page, "index.html"), "w") as f:
            f.write("<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
                    f"<title>Links for {project}</title></head><body><h1>Links for {project}</h1>\n"
                    + "\n".join(anchors) + "\n</body></html>\n")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "make":
        sys.exit(__doc__)
    args, opts = sys.argv[3:], {"html_only": False, "bad_sha": [], "missing": [], "only": {}, "evil": []}
    while args:
        flag = args.pop(0)
        if flag == "--html":
            opts["html_only"] = True
        elif flag == "--bad-sha":
            opts["bad_sha"].append(args.pop(0))
        elif flag == "--missing":
            opts["missing"].append(args.pop(0))
        elif flag == "--evil":
            opts["evil"].append(args.pop(0))
        elif flag == "--only":
            machine = args.pop(0)
            opts["only"][args.pop(0)] = [machine]
        else:
            sys.exit(f"unknown option {flag}")
    make(sys.argv[2], **opts)
