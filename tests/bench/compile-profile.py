#!/usr/bin/env python3
"""Where one architecture's device compile spends its time (issue 41): each part of the device
code compiled as `msda-doctor build --dry-run` would compile it, but straight to that
architecture's SASS under nvcc's -fdevice-time-trace, one part after the other on one core.
Prints each part's phases (the host preprocessor, cicc's front end, NVVM's optimizer and code
generation, ptxas), then cicc's per-function optimization and ptxas's per-kernel time summed by
kernel family (the kernel's name without its value type), and the costliest kernels.

Usage: tests/bench/compile-profile.py [--doctor ./msda-doctor] [--arch sm_90] [--source DIR]
                                      [--define NAME=VALUE]... [--top K]
The parts profiled are the plan's first target's: the newest toolkit that targets the
architecture (MSDA_TOOLKIT_PATHS chooses others), which needs nvcc 12.8 or newer
(-fdevice-time-trace). The sums leave out what is not per kernel (the
front end, NVVM's whole-module passes and code generation, ptxas's parsing): the phase table
has those.
"""
import argparse
import collections
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from step_ratios import count

PHASES = [("gcc (preprocessing 1)", "gcc -E"), ("CUDA C++ Front-End", "front end"),
          ("NVVM Optimizer", "NVVM opt"), ("NVVM CodeGen", "NVVM codegen"),
          ("Total PTXAS Time", "ptxas")]
TYPE = re.compile(r"_(f32|f64|f16|bf16)(c32)?(?=_|$)")


def family(kernel):
    return TYPE.sub("", kernel[len("msda_"):]) if kernel.startswith("msda_") else kernel


def plan_parts(args, work):
    """The PTX steps of the dry-run's plan: (what, argv) for each part of the first target."""
    cmd = [args.doctor, "build", "--json", "--dry-run", "--arch", args.arch, "--platform", os.uname().machine,
           "--cache", os.path.join(work, "cache"), "--out", os.path.join(work, "out")]
    if args.source:
        cmd += ["--source", args.source]
    for d in args.define:
        cmd += ["--define", d]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"compile-profile: cannot run {args.doctor}: {e.strerror}")
    if run.returncode != 0:
        reason = (run.stderr.strip() or run.stdout.strip()).splitlines()
        sys.exit(f"compile-profile: {' '.join(cmd)} failed: {reason[0] if reason else 'no message'}")
    steps = [s for s in json.loads(run.stdout)["steps"] if "-ptx" in s["command"]]
    if not steps:
        sys.exit("compile-profile: the plan has no PTX step (is the architecture targeted by a toolkit here?)")
    # the first target's parts: its toolkit (the plan's first, the newest) and its architecture
    nvcc, arch = steps[0]["command"][0], next(a for a in steps[0]["command"] if a.startswith("-arch=compute_"))
    return [(s["what"], s["command"]) for s in steps if s["command"][0] == nvcc and arch in s["command"]]


def profile(argv, work, n):
    """Runs one part's PTX command as -cubin for its architecture with the device time trace:
    (trace events, wall s, CPU s)."""
    out = argv.index("-o")
    trace = os.path.join(work, f"part{n}")
    cmd = [("-cubin" if a == "-ptx" else a.replace("-arch=compute_", "-arch=sm_")) for a in argv]
    cmd[out + 1] = os.path.join(work, f"part{n}.cubin")
    cmd[1:1] = ["-fdevice-time-trace", trace]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        sys.exit(f"compile-profile: {' '.join(cmd)} failed:\n{run.stderr.strip()}")
    # nvcc names the trace FILE.json where FILE is given without the suffix
    name = next(f for f in (trace, trace + ".json") if os.path.exists(f))
    with open(name) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return [e for e in events if e.get("ph") == "X"], wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--doctor", default="./msda-doctor")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--source", help="build from this project folder (msda-doctor build --source)")
    ap.add_argument("--define", action="append", default=[], help="NAME=VALUE, as msda-doctor build --define")
    ap.add_argument("--top", type=count(0), default=15, help="how many of the costliest kernels to list")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        parts = plan_parts(args, work)
        cicc = collections.Counter()
        ptxas = collections.Counter()
        print(f"{args.arch}: {len(parts)} parts, each alone, straight to SASS (seconds)")
        print("%-34s %6s %6s %8s" % ("part", "wall", "CPU", "kernels") + "".join(" %12s" % h for _, h in PHASES))
        for n, (what, argv) in enumerate(parts):
            events, wall, cpu = profile(argv, work, n)
            phase = collections.Counter()
            kernels = set()
            for e in events:
                phase[e["name"]] += e["dur"] / 1e6
                info = e.get("args", {})
                if e["name"] == "OptFunction" and info.get("detail", "").startswith("msda_"):
                    cicc[info["detail"]] += e["dur"] / 1e6
                elif e["name"] == "Optimizing compilation unit":
                    kernels.add(info.get("name", ""))
                    ptxas[info.get("name", "")] += e["dur"] / 1e6
            print("%-34s %6.2f %6.2f %8d" % (what, wall, cpu, len(kernels)) +
                  "".join(" %12.2f" % phase[p] for p, _ in PHASES))
        total = {k: cicc[k] + ptxas[k] for k in set(cicc) | set(ptxas)}
        whole = sum(total.values())
        by_family = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for k in total:
            f = by_family[family(k)]
            f[0] += 1
            f[1] += cicc[k]
            f[2] += ptxas[k]
        print(f"\nper kernel family (cicc's per-function optimization + ptxas's per-kernel time, "
              f"{whole:.2f} s over {len(total)} kernels)")
        print("%-36s %7s %8s %8s %8s %6s" % ("family", "kernels", "cicc", "ptxas", "sum", "share"))
        for name, (kernels, c, p) in sorted(by_family.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
            print("%-36s %7d %8.2f %8.2f %8.2f %5.1f%%" % (name, kernels, c, p, c + p, 100 * (c + p) / whole))
        print(f"\nthe {args.top} costliest kernels")
        for k, t in sorted(total.items(), key=lambda kv: -kv[1])[:args.top]:
            print("%-48s %8.3f  (cicc %.3f, ptxas %.3f)" % (k, t, cicc[k], ptxas[k]))


if __name__ == "__main__":
    main()
