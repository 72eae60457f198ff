#!/usr/bin/env python3
"""make bench-cpu: libmsda's CPU path, as msda.ms_deform_attn runs it on CPU tensors, against
the same function in plain PyTorch (bench.msda_grid_sample: grid_sample level by level) on the
same inputs, on docs/FACTS.md's decoder shapes (and any bench case by name), forward under no_grad
and forward + backward through autograd, f32, with torch's CPU thread count.

Each library given (--lib, repeatable: the one under test and, say, an older build of it) is
timed in fresh processes taken in turns (--processes of each), with grid_sample timed again in
every process, so that a busy host's slow spells fall on all of them; the table gives each
row's median over its processes. Wall-clock milliseconds a call, the median of --reps calls
after one warm-up. A figure to read, not a test:
  python3 tests/bench/cpu_bench.py --lib build/kernels/gpu/libmsda.so [--lib OLDER.so]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def time_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(cases, reps):
    """{case: {what: ms}} in this process, for the library MSDA_LIBRARY names."""
    import torch

    import msda
    from bench import LEVELS, D, L, M, P, S, msda_grid_sample, parse_case
    shapes = torch.tensor(LEVELS)
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    g = torch.Generator().manual_seed(0)
    got = {}
    for name in cases:
        _, N, Lq = parse_case(name)
        leaves = [torch.randn(N, S, M, D, generator=g),
                  torch.rand(N, Lq, M, L, P, 2, generator=g) * 1.2 - 0.1,
                  torch.rand(N, Lq, M, L, P, generator=g)]
        leaves = [t.requires_grad_(True) for t in leaves]
        gout = torch.randn(N, Lq, M * D, generator=g)
        ops = {"msda": lambda v, l, a: msda.ms_deform_attn(v, shapes, starts, l, a),
               "gs": msda_grid_sample}
        row = {}
        for op_name, op in ops.items():
            def fwd(op=op):
                with torch.no_grad():
                    op(*leaves)

            def fwd_bwd(op=op):
                torch.autograd.grad(op(*leaves), leaves, gout)
            row[f"{op_name} fwd"] = time_ms(fwd, reps)
            row[f"{op_name} f+b"] = time_ms(fwd_bwd, reps)
        got[name] = row
    return got, torch.get_num_threads()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", action="append", default=[],
                    help="a libmsda.so to time (repeatable; at least one)")
    ap.add_argument("--cases", default="dec_b1_q300,dec_b2_q900",
                    help="comma-separated bench cases (enc_bN, dec_bN_qQ)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    cases = args.cases.split(",")
    if args.child:
        got, threads = measure(cases, args.reps)
        print(json.dumps({"rows": got, "threads": threads}))
        return 0
    sys.path.insert(0, str(HERE))
    from bench import parse_case
    from turns import TurnFailed, in_turns
    for name in cases:
        try:
            parse_case(name)
        except argparse.ArgumentTypeError as exc:
            ap.error(str(exc))
    if not args.lib:
        ap.error("name a library to time with --lib")
    libs = [str(Path(p).resolve()) for p in args.lib]
    for lib in libs:
        if not os.path.isfile(lib):
            ap.error(f"no library at {lib}")
    # msda's Python op from the sources beside this repository's wheel, on each library.
    path = [str(HERE), str(HERE.parents[1] / "wheels")] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    envs = {lib: dict(os.environ, MSDA_LIBRARY=lib, PYTHONPATH=os.pathsep.join(path))
            for lib in libs}
    argv = [sys.executable, str(HERE / "cpu_bench.py"), "--child", "--cases", args.cases,
            "--reps", str(args.reps)]
    try:
        results = in_turns(argv, envs, args.processes)
    except TurnFailed as exc:
        print(f"cpu_bench.py: {exc}", file=sys.stderr)
        return 1
    runs = {lib: [r["rows"] for r in results[lib]] for lib in libs}
    threads = results[libs[0]][-1]["threads"]
    print(f"CPU path, f32, {threads} torch threads; ms a call, median of {args.reps} calls, "
          f"median over {args.processes} processes of each library, taken in turns")
    cols = ("msda fwd", "msda f+b", "gs fwd", "gs f+b")
    print(f"{'case':<13} {'library':<40} " + " ".join(f"{c:>9}" for c in cols)
          + f" {'gs/msda fwd':>12} {'gs/msda f+b':>12}")
    for name in cases:
        for lib in libs:
            med = {c: statistics.median(r[name][c] for r in runs[lib]) for c in cols}
            shown = os.path.relpath(lib)
            shown = shown if len(shown) <= 40 else "..." + shown[-37:]
            print(f"{name:<13} {shown:<40} " + " ".join(f"{med[c]:>9.2f}" for c in cols)
                  + f" {med['gs fwd'] / med['msda fwd']:>12.2f} {med['gs f+b'] / med['msda f+b']:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
