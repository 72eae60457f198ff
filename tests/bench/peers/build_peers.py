"""Compiles the patched peer sources under DEST/patched as torch extensions into DEST/ext/NAME
(NAME.so there), with the nvcc flags their own setup.py files give, for TORCH_CUDA_ARCH_LIST.
The original op is built as `msda_peer_orig`, not under its own module name, which the msda
wheel's drop-in module also has. Prints each build's time. Called by build-peers.sh."""
import os
import sys
import time
from pathlib import Path

from torch.utils.cpp_extension import load

dest = Path(sys.argv[1]).resolve()
src = dest / "patched"
HALF_FLAGS = ["-DCUDA_HAS_FP16=1", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
              "-D__CUDA_NO_HALF2_OPERATORS__"]
# Not in their setup.py: DCNv4's one CUDA file instantiates 960 kernels (49 MB of PTX), and
# without it took 41 minutes of wall time (cicc, then ptxas, one thread each) on a shared 2-core
# machine, the original op 3. Split compilation spreads a file's kernels over every core, "with
# minimal (if any) impact on performance of the compiled binary" (nvcc --help).
# PEERS_NO_SPLIT=1: as their setup.py files build them (tests/bench/build-speed.sh, which times
# the original op's build as its users make it).
SPLIT = [] if os.environ.get("PEERS_NO_SPLIT") == "1" else ["-split-compile=0"]
PEERS = {
    "orig": dict(name="msda_peer_orig", root=src / "deformable-detr" / "src",
                 sources=["vision.cpp", "cpu/ms_deform_attn_cpu.cpp", "cuda/ms_deform_attn_cuda.cu"],
                 nvcc=HALF_FLAGS + SPLIT),
    "dcnv4": dict(name="msda_peer_dcnv4", root=src / "dcnv4" / "src",
                  sources=["dcnv4_flash_binding.cpp", "cuda/flash_deform_attn_cuda.cu"],
                  nvcc=HALF_FLAGS + ["-O3"] + SPLIT),
}
wanted = os.environ.get("PEERS", "orig,dcnv4").split(",")
failed = []
for key in wanted:
    p = PEERS[key]
    out = dest / "ext" / key
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    try:
        load(name=p["name"], sources=[str(p["root"] / s) for s in p["sources"]],
             extra_include_paths=[str(p["root"])], extra_cflags=["-O3", "-DWITH_CUDA"],
             extra_cuda_cflags=p["nvcc"] + ["-DWITH_CUDA"], build_directory=str(out),
             with_cuda=True, verbose=os.environ.get("PEERS_VERBOSE") == "1")
    except Exception as exc:  # reported, then the next peer
        print(f"build-peers: {key} failed after {time.time() - start:.0f} s: {exc}", flush=True)
        failed.append(key)
        continue
    print(f"build-peers: {key} built in {time.time() - start:.0f} s: {out / (p['name'] + '.so')}", flush=True)
sys.exit(1 if failed else 0)
