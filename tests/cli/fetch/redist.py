#!/usr/bin/env python3
"""A synthetic NVIDIA redist repository and a loopback HTTP server for it (tests/cli/fetch).

  redist.py make ROOT VERSION [--evil dotdot|absolute|symlink|hardlink] [--link NAME=TARGET]... [--dot-names]
      writes ROOT/redistrib_VERSION.json and the tar.xz archives it names, as NVIDIA lays them
      out, for each platform that some host fetches by default (recipes/redist.json's
      host_platforms: linux-x86_64 and linux-sbsa, never linux-aarch64), so that the fetch's
      default works on any host and the other host's platform can be asked for by name; --evil
      puts an unsafe member into the cuda_cudart archives; --link adds to them a symlink NAME
      (under the archive's top folder, as lib/alias) pointing to TARGET, as it is written;
      --dot-names writes every member's name with a leading "./", as `tar -C DIR -c .` does.
  redist.py serve ROOT PORTFILE
      serves ROOT on 127.0.0.1 at a free port (written to PORTFILE), with Range requests. Faults
      come from ROOT/faults.json, read at each request: {"PATH": "404" | "500:N" | "cut:N" |
      "stall" | "norange" | "redirect:URL"}: N requests answered 500, or cut after half the
      body, before the file is served whole; "stall" sends a few bytes and then nothing;
      "redirect:URL" answers every request with a 302 to URL. Each request is logged
      to ROOT/requests.log as "PATH RANGE". A folder is answered with its index.json when the
      request accepts PEP 691 JSON and there is one, else with its index.html (index.py).
"""
import hashlib
import http.server
import io
import json
import os
import sys
import tarfile
import threading
import time

RECIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "recipes", "redist.json")


def default_platforms():
    with open(RECIPE) as f:
        return sorted({platforms[0] for platforms in json.load(f)["host_platforms"].values()})


NVCC = """#!/bin/sh
case "$1" in
  --version) echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release {mm}, V{full}" ;;
  --list-gpu-code) for c in sm_35 sm_37 sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 sm_80 sm_86 sm_87 sm_89 sm_90; do echo $c; done ;;
  *) exit 1 ;;
esac
"""


def add(tar, name, data=b"", mode=0o644, kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.mode, info.type, info.linkname, info.mtime = mode, kind, link, 1700000000
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def make(root, version, evil=None, links=(), dot=""):
    mm = ".".join(version.split(".")[:2])
    full = mm + ".89"
    rng = __import__("random").Random(42)
    # Incompressible, so that a cut after half the bytes is a cut inside the archive.
    filler = bytes(rng.getrandbits(8) for _ in range(192 * 1024))
    members = {
        "cuda_nvcc": [("bin/nvcc", NVCC.format(mm=mm, full=full).encode(), 0o755, tarfile.REGTYPE, ""),
                      ("bin/ptxas", filler, 0o755, tarfile.REGTYPE, ""),
                      ("nvvm/bin/cicc", b"cicc\n", 0o755, tarfile.REGTYPE, "")],
        "cuda_cudart": [("include/cuda.h", b"#define CUDA_VERSION 11080\n", 0o644, tarfile.REGTYPE, ""),
                        ("lib/libcudart.so.11.0", b"\x7fELF", 0o644, tarfile.REGTYPE, ""),
                        ("lib/libcudart.so", b"", 0o777, tarfile.SYMTYPE, "libcudart.so.11.0")],
        "cuda_cccl": [("include/thrust/version.h", b"#define THRUST_VERSION 200000\n", 0o644, tarfile.REGTYPE, "")],
    }
    if evil == "dotdot":
        members["cuda_cudart"].append(("../../escaped", b"x", 0o644, tarfile.REGTYPE, ""))
    elif evil == "absolute":
        members["cuda_cudart"].append(("/tmp/msda-fetch-escaped", b"x", 0o644, tarfile.REGTYPE, ""))
    elif evil == "symlink":
        members["cuda_cudart"].append(("lib/escape", b"", 0o777, tarfile.SYMTYPE, "../../../../etc"))
    elif evil == "hardlink":
        members["cuda_cudart"].append(("lib/passwd", b"", 0o644, tarfile.LNKTYPE, "/etc/passwd"))
    for name, target in links:
        members["cuda_cudart"].append((name, b"", 0o777, tarfile.SYMTYPE, target))
    manifest = {"release_date": "2022-10-03", "release_label": version, "release_product": "cuda"}
    for name, files in members.items():
        manifest[name] = {"name": name, "license": "CUDA Toolkit", "version": full}
        for platform in default_platforms():
            top = f"{name}-{platform}-{full}-archive"
            rel = f"{name}/{platform}/{top}.tar.xz"
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with tarfile.open(path, "w:xz") as tar:
                add(tar, dot + top, kind=tarfile.DIRTYPE, mode=0o755)
                for member, data, mode, kind, link in files:
                    # Evil absolute members are written as they are; the others under the top folder.
                    add(tar, member if member.startswith("/") else f"{dot}{top}/{member}", data, mode, kind, link)
            with open(path, "rb") as f:
                blob = f.read()
            manifest[name][platform] = {"relative_path": rel, "sha256": hashlib.sha256(blob).hexdigest(),
                                        "md5": hashlib.md5(blob).hexdigest(), "size": str(len(blob))}
    with open(os.path.join(root, f"redistrib_{version}.json"), "w") as f:
        json.dump(manifest, f, indent=1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counts = {}
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_GET(self):
        root = self.server.root
        path = self.path.split("?")[0].lstrip("/")
        with self.lock:
            with open(os.path.join(root, "requests.log"), "a") as log:
                log.write(f"{path} {self.headers.get('Range', '-')}\n")
            n = self.counts[path] = self.counts.get(path, 0) + 1
        try:
            with open(os.path.join(root, "faults.json")) as f:
                fault = json.load(f).get(path, "")
        except (OSError, ValueError):
            fault = ""
        kind, _, times = fault.partition(":")
        if kind == "redirect":
            self.send_response(302)
            self.send_header("Location", times)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        times = int(times or 0)
        if kind == "404":
            return self.fail(404)
        if kind == "500" and n <= times:
            return self.fail(500)
        file = os.path.realpath(os.path.join(root, path))
        if os.path.isdir(file):
            json_page = os.path.join(file, "index.json")
            wants_json = "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
            file = json_page if wants_json and os.path.isfile(json_page) else os.path.join(file, "index.html")
        if not file.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(file):
            return self.fail(404)
        with open(file, "rb") as f:
            data = f.read()
        start = 0
        rng = self.headers.get("Range")
        if rng and kind != "norange" and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                return self.fail(416)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if kind == "cut" and n <= times:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if kind == "stall":
            self.wfile.write(body[:16])
            self.wfile.flush()
            time.sleep(30)
            return
        self.wfile.write(body)

    def fail(self, code):
        body = f"error {code}\n".encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(root, portfile, tls=None):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.root = root
    if tls:
        # https with the test's own self-signed certificate, for fetch's choice of CA store.
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls[0], tls[1])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, portfile)
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "make":
        evil, links, dot, args = None, [], "", sys.argv[4:]
        while args:
            if args[0] == "--dot-names":
                dot, args = "./", args[1:]
                continue
            if args[0] == "--evil" and len(args) > 1:
                evil = args[1]
            elif args[0] == "--link" and len(args) > 1 and "=" in args[1]:
                links.append(tuple(args[1].split("=", 1)))
            else:
                sys.exit(__doc__)
            args = args[2:]
        make(sys.argv[2], sys.argv[3], evil, links, dot)
    elif sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], sys.argv[5:7] if len(sys.argv) > 6 and sys.argv[4] == "--tls" else None)
    else:
        sys.exit(__doc__)
