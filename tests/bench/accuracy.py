#!/usr/bin/env python3
"""Issue 11's accuracy table: msda's Python op in f16 and bf16 (and with f32 locations and weights
beside them) against the f64 reference, per value-gradient strategy, on the bench's shapes with
random and realistic sampling locations, with the level table on the host and on the GPU (where
the kernels choose the f32 buffer's levels themselves), and under torch.use_deterministic_algorithms
(grad_value in exact integer sums, whatever the library's strategy).
  accuracy.py NAME=LIBMSDA [NAME=LIBMSDA ...] [--cases enc_b2,dec_b2_q900] [--limit 2e-3]
Each NAME is a library built with one strategy (e.g. default=..., native=..., f32buf=...). The
reference is grid_sample in f64 on the same inputs as the op gets them: rounded to the dtype,
except locations and weights where they are passed in f32. Errors are relative L2 norms. Exits 1
when the first library's (the default's) grad_value error is over --limit on an encoder shape,
the issue's bound."""
import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(lib, cases, kinds):
    """Rows of (case, dtype, kind, errors of out, grad_value, grad_loc, grad_weights) for LIB, in
    a process of its own: a process loads one libmsda."""
    import torch

    os.environ["MSDA_LIBRARY"] = str(Path(lib).resolve())
    sys.path.insert(0, str(HERE.parents[1] / "wheels"))
    sys.path.insert(0, str(HERE))
    import msda
    from bench import CASES, LEVELS, L, P, msda_grid_sample, rel
    from compare import make_inputs

    sizes = {name: (n, lq) for name, n, lq in CASES}
    host_shapes = torch.tensor(LEVELS, dtype=torch.int64)
    host_starts = torch.cat([host_shapes.new_zeros(1), host_shapes.prod(1).cumsum(0)[:-1]])
    tables = {"host": (host_shapes, host_starts), "gpu": (host_shapes.cuda(), host_starts.cuda())}
    for case in cases:
        n, lq = sizes[case]
        for kind in kinds:
            value, loc, logits, gout = make_inputs(n, lq, kind)
            attn = logits.softmax(-1).view(*logits.shape[:3], L, P)
            for name, dtype, c32 in (("f16", torch.float16, False), ("bf16", torch.bfloat16, False),
                                     ("f16c32", torch.float16, True), ("bf16c32", torch.bfloat16, True)):
                ctype = torch.float32 if c32 else dtype
                v, l, a = (t.to(d).detach().requires_grad_(True)
                           for t, d in ((value, dtype), (loc, ctype), (attn, ctype)))
                g = gout.to(dtype)
                rv, rl, ra = (t.detach().double().requires_grad_(True) for t in (v, l, a))
                ref = msda_grid_sample(rv, rl, ra)
                want = torch.autograd.grad(ref, (rv, rl, ra), g.double())
                for where, (shapes, starts) in (*tables.items(), ("det", tables["host"])):
                    # det: under torch.use_deterministic_algorithms, grad_value's exact sums
                    torch.use_deterministic_algorithms(where == "det")
                    out = msda.ms_deform_attn(v, shapes, starts, l, a)
                    got = torch.autograd.grad(out, (v, l, a), g)
                    errs = [rel(out, ref.detach())] + [rel(x, y) for x, y in zip(got, want)]
                    print("ROW", case, name, kind, where, *("%.3e" % e for e in errs), flush=True)
                torch.use_deterministic_algorithms(False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libs", nargs="*", help="NAME=LIBMSDA, the default's first")
    ap.add_argument("--cases", default="enc_b2,dec_b2_q900")
    ap.add_argument("--kinds", default="random,realistic")
    ap.add_argument("--limit", type=float, default=2e-3)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child: measure one library
    args = ap.parse_args()
    if args.one:
        measure(args.one, args.cases.split(","), args.kinds.split(","))
        return
    if not args.libs:
        ap.error("name at least one library: NAME=LIBMSDA")
    table = []
    for spec in args.libs:
        name, _, lib = spec.partition("=")
        run = subprocess.run([sys.executable, __file__, "--one", lib, "--cases", args.cases, "--kinds", args.kinds],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAILED: {name}: {run.stderr.strip().splitlines()[-1:]}")
            sys.exit(1)
        for line in run.stdout.splitlines():
            if line.startswith("ROW "):
                table.append([name] + line.split()[1:])
    print(f"{'library':10} {'case':12} {'dtype':8} {'kind':9} {'table':5} {'output':>9} {'grad_value':>10} "
          f"{'grad_loc':>9} {'grad_wgt':>9}")
    for r in table:
        print(f"{r[0]:10} {r[1]:12} {r[2]:8} {r[3]:9} {r[4]:5} {r[5]:>9} {r[6]:>10} {r[7]:>9} {r[8]:>9}")
    print("relative L2 error against grid_sample in f64 on the same (dtype-rounded) inputs; table: where")
    print("the level table was (gpu: as models keep it; the kernels plan the f32 buffer; det: on the host,")
    print("under torch.use_deterministic_algorithms(True): grad_value in exact integer sums)")
    default = table[0][0] if table else None
    over = [r for r in table if r[0] == default and r[1].startswith("enc") and float(r[6]) > args.limit]
    for r in over:
        print(f"OVER {args.limit:g}: {default} {r[1]} {r[2]} {r[3]} table {r[4]} grad_value {r[6]}")
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
