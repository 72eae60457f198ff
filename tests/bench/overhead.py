#!/usr/bin/env python3
"""What msda.ms_deform_attn costs per call beyond its kernels, as users call it from PyTorch.

Prints microseconds per call (median of several rounds) of: a forward without autograd, and a
forward + backward through autograd, each
  - "full":      as users run it (on --device cuda: wall time per call of back-to-back calls,
                 then one synchronisation; the GPU may be the bound),
  - "no launch": the same with libmsda's compute entry points replaced by no-ops, i.e. the
                 Python/ctypes/torch cost alone (validation, allocation, argument structs),
  - "torch floor": an autograd.Function that only allocates its results (what torch itself
                 costs for such a call, under any wrapper),
and on CUDA the GPU time per call from a CUDA graph of 20 calls, to which a call should add at
most the "no launch" cost. A figure to compare, not a test:
  PYTHONPATH=wheels MSDA_LIBRARY=build/kernels/libmsda.so python3 tests/bench/overhead.py
--against DIR times another copy of the package (DIR holds its `msda`, e.g. an older checkout's
wheels/) beside this one, in --processes fresh processes of each, taken in turns (a busy host's
slow spells fall on both), and prints the median of each row over them, with the same library,
or with --against-library's where the two packages are written for different ABIs.
Shapes: --shape tiny (one query; the CPU's own work is negligible) or dec_b2_q900 (docs/FACTS.md's
decoder case, for a GPU).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

import msda
from msda import _library

from bench import AllocOnlyOp, capture_graph
from turns import TurnFailed, in_turns

LEVELS = [(100, 134), (50, 67), (25, 34), (13, 17)]
SHAPES = {"tiny": dict(levels=[(2, 2), (1, 1)], N=1, Lq=1, M=1, D=4, P=1),
          "dec_b2_q900": dict(levels=LEVELS, N=2, Lq=900, M=8, D=32, P=4)}
NOOPS = ("msda_forward_cpu", "msda_backward_cpu", "msda_forward_cuda", "msda_backward_cuda")


def inputs(shape, device, dtype):
    c = SHAPES[shape]
    levels = c["levels"]
    S = sum(h * w for h, w in levels)
    g = torch.Generator().manual_seed(0)
    value = torch.randn(c["N"], S, c["M"], c["D"], generator=g).to(device, dtype)
    loc = torch.rand(c["N"], c["Lq"], c["M"], len(levels), c["P"], 2, generator=g).to(device)
    w = torch.rand(c["N"], c["Lq"], c["M"], len(levels), c["P"], generator=g).to(device)
    shapes = torch.tensor(levels, device=device)
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    return value, shapes, starts, loc.to(dtype), w.to(dtype)


class _NoLaunch:
    """The loaded CDLL with the compute entry points answering success at once."""

    def __init__(self, real):
        self._real = real
        for name in NOOPS:
            setattr(self, name, lambda *args: 0)

    def __getattr__(self, name):
        return getattr(self._real, name)


def no_launch():
    """Replaces the compute calls of the process's Library (whichever version of the package
    this is: older ones call through Library._lib, newer ones keep the functions)."""
    lib = _library.library()
    lib._lib = _NoLaunch(lib._lib)
    for attr in ("forward_cpu", "backward_cpu", "forward_cuda", "backward_cuda"):
        if hasattr(lib, attr):
            setattr(lib, attr, lambda *args: 0)


def per_call_us(fn, calls, rounds, device, clock):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(20):
        fn()
    sync()
    times = []
    for _ in range(rounds):
        t0 = clock()
        for _ in range(calls):
            fn()
        sync()
        times.append((clock() - t0) / calls * 1e6)
    return statistics.median(times)


def graph_us(fn, calls=20, rounds=30):
    g = capture_graph(fn, calls)
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--shape", default=None, choices=sorted(SHAPES))
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--clock", default="wall", choices=("wall", "cpu"),
                    help="cpu: this process's CPU time, steadier than wall time on a busy "
                         "machine (CPU path only: it does not count time spent waiting)")
    ap.add_argument("--against", metavar="DIR",
                    help="a directory holding another copy of the msda package, timed beside "
                         "this one")
    ap.add_argument("--processes", type=int, default=5,
                    help="with --against: fresh processes of each, taken in turns")
    ap.add_argument("--against-library", metavar="PATH",
                    help="with --against: the libmsda.so its package loads (default: this one's)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # rows, for --against
    args = ap.parse_args()
    if args.against:
        return compare(args)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    shape = args.shape or ("tiny" if args.device == "cpu" else "dec_b2_q900")
    dtype = getattr(torch, args.dtype)
    value, shapes, starts, loc, w = inputs(shape, args.device, dtype)
    leaves = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    gout = torch.ones(value.shape[0], loc.shape[1], value.shape[2] * value.shape[3],
                      device=args.device, dtype=dtype)

    def fwd():
        with torch.no_grad():
            msda.ms_deform_attn(value, shapes, starts, loc, w)

    def fwd_bwd():
        out = msda.ms_deform_attn(leaves[0], shapes, starts, leaves[1], leaves[2])
        out.backward(gout)

    if not args.json:
        print(f"msda {msda.__file__}, torch {torch.__version__}, device {args.device}, "
              f"shape {shape}, {args.dtype}, table on the {args.device}, {args.clock} clock")
    rows = []
    if args.device == "cuda":
        rows.append(("CUDA graph (GPU time)", graph_us(fwd), graph_us(fwd_bwd)))
    timed = lambda fn: per_call_us(fn, args.calls, args.rounds, args.device, clock)

    def floor_fwd():
        with torch.no_grad():
            AllocOnlyOp.apply(value, shapes, starts, loc, w)

    def floor_fwd_bwd():
        AllocOnlyOp.apply(leaves[0], shapes, starts, leaves[1], leaves[2]).backward(gout)
    rows.append(("torch floor (empty op)", timed(floor_fwd), timed(floor_fwd_bwd)))
    rows.append(("full", timed(fwd), timed(fwd_bwd)))
    no_launch()
    rows.append(("no launch (wrapper only)", timed(fwd), timed(fwd_bwd)))
    if args.json:
        print(json.dumps({"msda": msda.__file__, "rows": rows}))
        return 0
    print(f"{'us per call':<26} {'forward':>10} {'fwd+bwd':>10}")
    for name, f, fb in rows:
        print(f"{name:<26} {f:>10.1f} {fb:>10.1f}")
    return 0


def compare(args):
    """This package against --against's, in alternating fresh processes of this script."""
    against = os.path.abspath(args.against)
    if not os.path.isfile(os.path.join(against, "msda", "__init__.py")):
        print(f"overhead.py: {against} holds no msda package", file=sys.stderr)
        return 2
    base = [sys.executable, os.path.abspath(__file__), "--json", "--device", args.device,
            "--dtype", args.dtype, "--calls", str(args.calls), "--rounds", str(args.rounds),
            "--clock", args.clock] + (["--shape", args.shape] if args.shape else [])
    env_of = {"this": dict(os.environ)}
    env_of["against"] = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [against] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    if args.against_library:
        env_of["against"]["MSDA_LIBRARY"] = os.path.abspath(args.against_library)
    try:
        runs = in_turns(base, env_of, args.processes)
    except TurnFailed as exc:
        print(f"overhead.py: {exc}", file=sys.stderr)
        return 1
    got = {which: [r["rows"] for r in results] for which, results in runs.items()}
    where = {which: results[-1]["msda"] for which, results in runs.items()}
    print(f"this: msda {where['this']}\nagainst: msda {where['against']}\n"
          f"torch {torch.__version__}, device {args.device}, {args.dtype}, {args.clock} clock; "
          f"us per call, median over {args.processes} processes of each, taken in turns")
    print(f"{'':<26} {'forward':>10} {'against':>10} {'fwd+bwd':>10} {'against':>10}")
    for r, (name, _, _) in enumerate(got["this"][0]):
        med = {w: [statistics.median(p[r][c] for p in got[w]) for c in (1, 2)] for w in got}
        print(f"{name:<26} {med['this'][0]:>10.1f} {med['against'][0]:>10.1f} "
              f"{med['this'][1]:>10.1f} {med['against'][1]:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
