#!/usr/bin/env python3
"""Nsight Compute figures of the MSDA kernels (issue 11, kernels/PERF.md): for each bench shape,
dtype and kind of sampling locations, profile_op.py runs one forward and one backward under ncu,
and this prints per kernel its time, the bytes it moved through L2 and DRAM, those as bandwidth
and as a share of the unit's peak (ncu's pct_of_peak_sustained_elapsed), the L2 reductions
(the value gradient's atomics), and which unit is busiest: how far each kernel is from its bound.
  ncu-kernels.py --lib LIBMSDA [--ncu PATH] [--cases enc_b2,...] [--dtypes f32,...]
                 [--kinds random,realistic] [--csv-dir DIR]
Clocks are left as they are (--clock-control none), as the device notes ask."""
import argparse
import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
METRICS = [
    "gpu__time_duration.sum",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_bytes.sum",
    "lts__t_bytes.sum.per_second",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sectors_op_red.sum",
    "dram__bytes.sum",
    "dram__bytes.sum.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
]
BUSIEST = {"sm": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "l1": "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
           "l2": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
           "dram": "dram__throughput.avg.pct_of_peak_sustained_elapsed"}


def profile(ncu, lib, case, dtype, kind):
    """[(kernel name, {metric: float})] of one run, in launch order."""
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
           "--print-units", "base", "--kernel-name", "regex:msda_", "--metrics", ",".join(METRICS),
           sys.executable, str(HERE / "profile_op.py"), "--lib", lib, case, dtype, kind]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"ncu failed ({run.returncode}) on {case} {dtype} {kind}: "
                           f"{(run.stderr or run.stdout).strip().splitlines()[-1:]}")
    # ncu prints its own "==PROF==" lines before the CSV: the table starts at the header row.
    text = run.stdout[run.stdout.find('"ID"'):]
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 3:
        raise RuntimeError(f"ncu profiled no msda kernel on {case} {dtype} {kind}")
    header, body = rows[0], rows[2:]  # rows[1] holds the units
    got = []
    for r in body:
        rec = dict(zip(header, r))
        vals = {}
        for m in METRICS:
            s = rec.get(m, "").replace(",", "")
            vals[m] = float(s) if s not in ("", "n/a") else float("nan")
        got.append((rec.get("Kernel Name", "?"), vals))
    return got, text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "ncu")
    ap.add_argument("--cases", default="enc_b2,dec_b2_q900")
    ap.add_argument("--dtypes", default="f32,f16,bf16,f16c32")
    ap.add_argument("--kinds", default="random,realistic")
    ap.add_argument("--csv-dir", help="also keep ncu's raw CSV per run there")
    args = ap.parse_args()
    print(f"{'case':12} {'dtype':7} {'kind':9} {'kernel':32} {'us':>7} {'regs':>4} {'occ%':>5} "
          f"{'L2 MB':>8} {'L2 TB/s':>7} {'L2 %':>5} {'red M':>6} {'DRAM MB':>8} {'DRAM TB/s':>9} "
          f"{'DRAM %':>6} {'busiest':>12}")
    failed = 0
    for case in args.cases.split(","):
        for dtype in args.dtypes.split(","):
            for kind in args.kinds.split(","):
                try:
                    kernels, text = profile(args.ncu, args.lib, case, dtype, kind)
                except RuntimeError as e:
                    print(f"FAILED: {e}")
                    failed += 1
                    continue
                if args.csv_dir:
                    Path(args.csv_dir).mkdir(parents=True, exist_ok=True)
                    (Path(args.csv_dir) / f"{case}-{dtype}-{kind}.csv").write_text(text)
                for name, v in kernels:
                    unit, pct = max(((u, v[m]) for u, m in BUSIEST.items()), key=lambda x: x[1])
                    print(f"{case:12} {dtype:7} {kind:9} {name[:32]:32} "
                          f"{v['gpu__time_duration.sum'] / 1e3:7.1f} {v['launch__registers_per_thread']:4.0f} "
                          f"{v['sm__warps_active.avg.pct_of_peak_sustained_active']:5.1f} "
                          f"{v['lts__t_bytes.sum'] / 1e6:8.1f} {v['lts__t_bytes.sum.per_second'] / 1e12:7.2f} "
                          f"{v['lts__throughput.avg.pct_of_peak_sustained_elapsed']:5.1f} "
                          f"{v['lts__t_sectors_op_red.sum'] / 1e6:6.1f} "
                          f"{v['dram__bytes.sum'] / 1e6:8.1f} {v['dram__bytes.sum.per_second'] / 1e12:9.2f} "
                          f"{v['dram__throughput.avg.pct_of_peak_sustained_elapsed']:6.1f} "
                          f"{unit + ' ' + format(pct, '.0f') + '%':>12}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
