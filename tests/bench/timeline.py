#!/usr/bin/env python3
"""Where one eager forward + backward of msda.ms_deform_attn spends its time, on a GPU.

Host timestamps (time.perf_counter_ns) at the points below, taken by wrapping the package's own
functions, in microseconds from the call's start (the median over --rounds rounds of each
round's median of --calls calls); beside them, the
latency the GPU sees (CUDA events before the forward and after torch.autograd.grad returns),
which is what compare.py's eager rows report. The same for the torch floor (bench.AllocOnlyOp),
in rounds that take each in turn (a slow spell of the host falls on both), and both again with
torch.autograd.set_multithreading_enabled(False) (the backward then runs in the calling thread
rather than autograd's CUDA worker). A figure to read, not a test:
  PYTHONPATH=wheels MSDA_LIBRARY=... python3 tests/bench/timeline.py [--dtype float32]
"""
import argparse
import statistics
import time

import torch

import msda
from msda import _torch_kernels, _torch_ops

from bench import AllocOnlyOp
from overhead import SHAPES, inputs

now = time.perf_counter_ns


class Marks:
    def __init__(self):
        self.t = {}

    def __call__(self, name):
        self.t.setdefault(name, now())


def wrap(marks, owner, attr, before, after):
    """Replaces owner.attr (a class's staticmethod, or an instance's function) by itself with
    marks before and after."""
    real = getattr(owner, attr)
    static = isinstance(vars(owner).get(attr), staticmethod)

    def wrapped(*args, **kwargs):
        marks(before)
        try:
            return real(*args, **kwargs)
        finally:
            marks(after)
    setattr(owner, attr, staticmethod(wrapped) if static else wrapped)


def one_call(fn, marks):
    """{mark: us from the call's start} of one call, with the events' latency."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    marks.t = {}
    a.record()
    marks("start")
    fn(marks)
    marks("grad returned")
    b.record()
    b.synchronize()
    t0 = marks.t["start"]
    row = {name: (t - t0) / 1e3 for name, t in marks.t.items()}
    row["GPU-side latency (events)"] = a.elapsed_time(b) * 1e3
    return row


def timelines(variants, marks, calls, rounds, warmup):
    """Per variant, [(mark, us)]: the median over rounds of each round's median; each round
    takes every variant in turn, `calls` calls each."""
    got = {name: [] for name, _ in variants}
    for r in range(rounds + 1):
        for name, fn in variants:
            rows = [one_call(fn, marks) for _ in range(calls if r else warmup)]
            if r:  # round 0 warms up
                got[name].append({m: statistics.median(row[m] for row in rows) for m in rows[0]})
    out = {}
    for name, per_round in got.items():
        marks_in_order = sorted(per_round[0], key=lambda m: per_round[0][m])
        out[name] = [(m, statistics.median(pr[m] for pr in per_round)) for m in marks_in_order]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    ap.add_argument("--shape", default="dec_b2_q900", choices=sorted(SHAPES))
    ap.add_argument("--calls", type=int, default=200, help="calls a variant a round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=50)
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    value, shapes, starts, loc, w = inputs(args.shape, "cuda", dtype)
    leaves = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    gout = torch.ones(value.shape[0], loc.shape[1], value.shape[2] * value.shape[3],
                      device="cuda", dtype=dtype)
    marks = Marks()
    lib = _torch_kernels.library()
    wrap(marks, _torch_ops.MSDAFunction, "forward", "Function.forward entered", "Function.forward left")
    wrap(marks, _torch_ops.MSDAFunction, "backward", "Function.backward entered", "Function.backward left")
    wrap(marks, lib, "forward_cuda", "C forward call", "C forward returned")
    wrap(marks, lib, "backward_cuda", "C backward call", "C backward returned")
    wrap(marks, AllocOnlyOp, "forward", "Function.forward entered", "Function.forward left")
    wrap(marks, AllocOnlyOp, "backward", "Function.backward entered", "Function.backward left")

    def op(m):
        out = msda.ms_deform_attn(leaves[0], shapes, starts, leaves[1], leaves[2])
        m("op returned")
        torch.autograd.grad(out, leaves, gout)

    def floor(m):
        out = AllocOnlyOp.apply(leaves[0], shapes, starts, leaves[1], leaves[2])
        m("op returned")
        torch.autograd.grad(out, leaves, gout)

    print(f"msda {msda.__file__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{args.shape}, {args.dtype}, table on the GPU; us from the call's start, median over "
          f"{args.rounds} rounds of the median of {args.calls} calls")
    variants = [("msda", op), ("floor", floor)]
    for threaded in (True, False):
        torch.autograd.set_multithreading_enabled(threaded)
        got = timelines(variants, marks, args.calls, args.rounds, args.warmup)
        for name, rows in got.items():
            print(f"\n{name}, autograd worker thread {'on' if threaded else 'off'}")
            for what, us in rows:
                print(f"  {what:<28} {us:8.1f}")
    torch.autograd.set_multithreading_enabled(True)


if __name__ == "__main__":
    main()
