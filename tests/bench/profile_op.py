#!/usr/bin/env python3
"""The program tests/bench/ncu-kernels.sh runs under Nsight Compute: one forward and one
backward of msda's Python op on one bench shape, dtype and kind of sampling locations, with the
profiler on only around that call (ncu --profile-from-start off), after warm-up calls outside it.
  profile_op.py --lib LIBMSDA CASE DTYPE KIND    (CASE of bench.CASES, DTYPE f32|f16|bf16|f16c32|
  bf16c32: c32 keeps locations and weights in f32 beside a 16-bit value, KIND random|realistic)
The inputs are compare.py's, so the profile is of the same work the bench times."""
import argparse
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
DTYPES = {"f32": (torch.float32, False), "f16": (torch.float16, False), "bf16": (torch.bfloat16, False),
          "f16c32": (torch.float16, True), "bf16c32": (torch.bfloat16, True)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("case")
    ap.add_argument("dtype", choices=sorted(DTYPES))
    ap.add_argument("kind", choices=("random", "realistic"))
    args = ap.parse_args()
    os.environ["MSDA_LIBRARY"] = str(Path(args.lib).resolve())
    sys.path.insert(0, str(HERE.parents[1] / "wheels"))
    sys.path.insert(0, str(HERE))
    import msda
    from bench import CASES, LEVELS, L, P
    from compare import make_inputs

    sizes = {name: (n, lq) for name, n, lq in CASES}
    if args.case not in sizes:
        ap.error(f"case must be one of {', '.join(sizes)}")
    n, lq = sizes[args.case]
    dtype, coords_f32 = DTYPES[args.dtype]
    value, loc, logits, gout = make_inputs(n, lq, args.kind)
    attn = logits.softmax(-1).view(*logits.shape[:3], L, P)
    ctype = torch.float32 if coords_f32 else dtype
    value = value.to(dtype).requires_grad_(True)
    loc = loc.to(ctype).requires_grad_(True)
    attn = attn.to(ctype).requires_grad_(True)
    gout = gout.to(dtype)
    shapes = torch.tensor(LEVELS, dtype=torch.int64)
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])

    def once():
        out = msda.ms_deform_attn(value, shapes, starts, loc, attn)
        torch.autograd.grad(out, (value, loc, attn), gout)

    for _ in range(args.warmup):
        once()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    once()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
