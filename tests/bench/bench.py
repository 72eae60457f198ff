#!/usr/bin/env python3
"""make bench: libmsda's CUDA forward and backward against a plain PyTorch grid_sample version of
the same function, on the Deformable-DETR shapes of docs/FACTS.md, per data type. With --peers DIR
(what tests/bench/peers/build-peers.sh built), the same run also times the original
Deformable-DETR op and DCNv4's flash MSDA against msda's Python op on the same inputs
(compare.py, one table per shape) and one encoder layer's attention block (encoder_layer.py).
Every comparison is between timings of this run; no figure from elsewhere is a target.

Times are CUDA-event medians after warm-up, two ways: "graph" replays a CUDA graph of 20 calls
and divides (the GPU time of one call), "call" brackets each call with events (launch overhead
from Python included, as a user calling from PyTorch sees it). "sm" is the graph time of the fused op
(attention logits in, softmaxed in the kernel). "floor" is the bytes the op must move (each input
read once, each output written once) over the device-to-device copy bandwidth measured here.
Prints one table at the end; exits non-zero if libmsda disagrees with grid_sample or a call fails.
"""
import argparse
import ctypes
import os
import re
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from step_ratios import count

LEVELS = [(100, 134), (50, 67), (25, 34), (13, 17)]
S = sum(h * w for h, w in LEVELS)
CASES = [("enc_b2", 2, S), ("enc_b8", 8, S), ("dec_b2_q900", 2, 900)]
M, D, L, P = 8, 32, 4, 4
DTYPES = [("f32", torch.float32, 0), ("f64", torch.float64, 1), ("f16", torch.float16, 2),
          ("bf16", torch.bfloat16, 3)]


def parse_case(name):
    """A case by name: enc_bN (the encoder, batch N: a query per position) or dec_bN_qQ."""
    m = re.fullmatch(r"enc_b([1-9][0-9]*)|dec_b([1-9][0-9]*)_q([1-9][0-9]*)", name)
    if not m:
        raise argparse.ArgumentTypeError(f"case '{name}': expected enc_bN or dec_bN_qQ")
    return (name, int(m[1]), S) if m[1] else (name, int(m[2]), int(m[3]))


class Sizes(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("N", "S", "M", "D", "Lq", "L", "P")]


class ForwardArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("sizes", Sizes), ("spatial_shapes", ctypes.c_void_p),
                ("level_start", ctypes.c_void_p), ("value", ctypes.c_void_p),
                ("locations", ctypes.c_void_p), ("attention_weights", ctypes.c_void_p),
                ("output", ctypes.c_void_p),
                # msda.h ABI 2: coordinates in dtype, level table on the host, no device status;
                # ABI 3: weights (0: softmaxed weights, 1: logits, the fused softmax)
                ("coord_type", ctypes.c_int), ("level_table", ctypes.c_int),
                ("device_status", ctypes.c_void_p), ("weights", ctypes.c_int),
                # ABI 5: a point count per level (NULL: P on every level), the sampling (0: bilinear)
                ("level_points", ctypes.c_void_p), ("sampling", ctypes.c_int)]


class BackwardArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("sizes", Sizes), ("spatial_shapes", ctypes.c_void_p),
                ("level_start", ctypes.c_void_p), ("value", ctypes.c_void_p),
                ("locations", ctypes.c_void_p), ("attention_weights", ctypes.c_void_p),
                ("grad_output", ctypes.c_void_p), ("grad_value", ctypes.c_void_p),
                ("grad_locations", ctypes.c_void_p), ("grad_weights", ctypes.c_void_p),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
                ("coord_type", ctypes.c_int), ("level_table", ctypes.c_int),
                ("device_status", ctypes.c_void_p), ("weights", ctypes.c_int),
                ("deterministic", ctypes.c_int32),
                ("level_points", ctypes.c_void_p), ("sampling", ctypes.c_int)]


class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("cuda_result", ctypes.c_int),
                ("cuda_name", ctypes.c_char * 64), ("message", ctypes.c_char * 320)]


class Msda:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.msda_abi_version.restype = ctypes.c_int
        # The structs above are ABI 5's; ABI 4 is their prefix (what 5 appended is left zero: the
        # behaviour of 4), so that a library before the change runs the same calls.
        if self.lib.msda_abi_version() not in (4, 5):
            sys.exit(f"{path}: libmsda ABI {self.lib.msda_abi_version()}, bench.py knows ABI 4 and 5")
        for name, argt in (("msda_forward_cuda", ForwardArgs), ("msda_backward_cuda", BackwardArgs)):
            fn = getattr(self.lib, name)
            fn.argtypes = [ctypes.POINTER(argt), ctypes.c_void_p, ctypes.POINTER(Error)]
            fn.restype = ctypes.c_int
        self.lib.msda_backward_cuda_workspace.argtypes = [ctypes.POINTER(BackwardArgs),
                                                          ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(Error)]
        self.lib.msda_backward_cuda_workspace.restype = ctypes.c_int
        self.lib.msda_embedded_archs_string.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self.shapes = (ctypes.c_int64 * (2 * L))(*[x for hw in LEVELS for x in hw])
        starts, acc = [], 0
        for h, w in LEVELS:
            starts.append(acc)
            acc += h * w
        self.starts = (ctypes.c_int64 * L)(*starts)
        # The same table in device memory (msda.h MSDA_DEVICE), as models keep it.
        self.device_shapes = torch.tensor(LEVELS, dtype=torch.int64, device="cuda")
        self.device_starts = torch.tensor(starts, dtype=torch.int64, device="cuda")
        self.device_status = torch.zeros(1, dtype=torch.int32, device="cuda")

    def archs(self):
        buf = ctypes.create_string_buffer(512)
        self.lib.msda_embedded_archs_string(buf, 512)
        return buf.value.decode()

    def _check(self, status, err, what):
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: {err.message.decode()}")

    def _table(self, device_table):
        if device_table:
            return self.device_shapes.data_ptr(), self.device_starts.data_ptr()
        return ctypes.cast(self.shapes, ctypes.c_void_p), ctypes.cast(self.starts, ctypes.c_void_p)

    def forward_fn(self, code, value, loc, attn, out, weights=0, device_table=False):
        """The forward call; weights=1: attn holds logits, softmaxed in the kernel (the fused op);
        device_table: the level table in device memory (each block reads and checks it)."""
        N, Sv, Mh, Dh = value.shape
        args = ForwardArgs(code, Sizes(N, Sv, Mh, Dh, loc.shape[1], L, P), *self._table(device_table),
                           value.data_ptr(), loc.data_ptr(), attn.data_ptr(), out.data_ptr(), weights=weights,
                           level_table=1 if device_table else 0,
                           device_status=self.device_status.data_ptr() if device_table else None)
        err = Error()

        def run():
            stream = torch.cuda.current_stream().cuda_stream
            self._check(self.lib.msda_forward_cuda(ctypes.byref(args), stream, ctypes.byref(err)), err, "forward")
        return run

    def backward_fn(self, code, value, loc, attn, gout, gv, gl, ga, weights=0, device_table=False,
                    deterministic=0):
        """The backward call, with a workspace from torch's allocator where the library wants one;
        device_table: the level table in device memory (the kernels plan the f32 buffer);
        deterministic: grad_value in exact integer sums (msda.h)."""
        N, Sv, Mh, Dh = value.shape
        args = BackwardArgs(code, Sizes(N, Sv, Mh, Dh, loc.shape[1], L, P), *self._table(device_table),
                            value.data_ptr(), loc.data_ptr(), attn.data_ptr(), gout.data_ptr(),
                            gv.data_ptr(), gl.data_ptr(), ga.data_ptr(), None, 0, weights=weights,
                            level_table=1 if device_table else 0,
                            device_status=self.device_status.data_ptr() if device_table else None,
                            deterministic=deterministic)
        err = Error()
        need = ctypes.c_size_t(0)
        self._check(self.lib.msda_backward_cuda_workspace(ctypes.byref(args), ctypes.byref(need), ctypes.byref(err)),
                    err, "workspace size")
        workspace = torch.empty(max(need.value, 1), dtype=torch.uint8, device="cuda")
        if need.value:
            args.workspace, args.workspace_bytes = workspace.data_ptr(), need.value

        def run():
            stream = torch.cuda.current_stream().cuda_stream
            self._check(self.lib.msda_backward_cuda(ctypes.byref(args), stream, ctypes.byref(err)), err, "backward")
        run.workspace = workspace  # kept alive with the closure
        return run


def msda_grid_sample(value, loc, attn):
    """The same function with torch's grid_sample, level by level (align_corners=False, zeros)."""
    N, _, Mh, Dh = value.shape
    Lq = loc.shape[1]
    per_level = value.split([h * w for h, w in LEVELS], dim=1)
    grids = 2 * loc - 1
    samples = []
    for lvl, (h, w) in enumerate(LEVELS):
        v = per_level[lvl].flatten(2).transpose(1, 2).reshape(N * Mh, Dh, h, w)
        g = grids[:, :, :, lvl].transpose(1, 2).flatten(0, 1)
        samples.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False))
    weights = attn.transpose(1, 2).reshape(N * Mh, 1, Lq, L * P)
    out = (torch.stack(samples, dim=-2).flatten(-2) * weights).sum(-1).view(N, Mh * Dh, Lq)
    return out.transpose(1, 2).contiguous()


def median_ms(fn, reps, warmup, before=None):
    for _ in range(warmup):
        if before:
            before()
        fn()
    times = []
    for _ in range(reps):
        if before:
            before()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def capture_graph(fn, calls):
    """A CUDA graph of `calls` calls of fn, after three warm-up calls on a side stream (capture
    needs the allocator and the lazily loaded kernels settled first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


class AllocOnlyOp(torch.autograd.Function):
    """What torch alone costs for an op of the MSDA signature: an autograd.Function that only
    allocates its result and gradients (no kernel, no checks), the floor under any Python op's
    eager call. overhead.py and compare.py's `floor` row time it."""

    @staticmethod
    def forward(ctx, value, shapes, starts, loc, attn):
        ctx.save_for_backward(value, loc, attn)
        return value.new_empty(value.shape[0], loc.shape[1], value.shape[2] * value.shape[3])

    @staticmethod
    def backward(ctx, grad):
        value, loc, attn = ctx.saved_tensors
        return torch.empty_like(value), None, None, torch.empty_like(loc), torch.empty_like(attn)


def graph_ms(fn, reps, warmup, calls=20):
    """GPU time of one call: a CUDA graph of `calls` calls, replayed, divided."""
    return median_ms(capture_graph(fn, calls).replay, reps, warmup) / calls


def copy_bandwidth():
    src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 20, 5)
    return 2 * src.numel() / (ms * 1e-3)  # bytes read + written per second


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def bench_case(lib, name, N, Lq, dt_name, dtype, code, args, bw):
    g = torch.Generator(device="cuda").manual_seed(1234)
    value = torch.randn(N, S, M, D, device="cuda", generator=g).to(dtype)
    if args.locations == "realistic":  # compare.py's: reference points on the grid, learned-like offsets
        import compare
        loc = compare.realistic_locations(N, Lq, g).to(dtype)
    else:
        loc = torch.rand(N, Lq, M, L, P, 2, device="cuda", generator=g).to(dtype)
    raw = torch.rand(N, Lq, M, L * P, device="cuda", generator=g)
    if dtype == torch.float64:  # the softmax in f64, as the fused op computes it (f32's differs by 6e-8)
        raw = raw.double()
    attn = raw.softmax(-1).view(N, Lq, M, L, P).to(dtype)
    logits = raw.view(N, Lq, M, L, P).to(dtype)  # the fused op's input: attn is their softmax
    gout = torch.randn(N, Lq, M * D, device="cuda", generator=g).to(dtype)
    out = torch.empty(N, Lq, M * D, device="cuda", dtype=dtype)
    gv, gl, ga = torch.empty_like(value), torch.empty_like(loc), torch.empty_like(attn)

    fwd = lib.forward_fn(code, value, loc, attn, out)
    bwd = lib.backward_fn(code, value, loc, attn, gout, gv, gl, ga)
    c_fwd = median_ms(fwd, args.reps, args.warmup)
    c_bwd = median_ms(bwd, args.reps, args.warmup)
    t_fwd = graph_ms(fwd, args.reps, args.warmup)
    t_bwd = graph_ms(bwd, args.reps, args.warmup)
    # The fused op (the softmax of the logits in the kernel), GPU time only; its output checked below.
    # (Its gradients are kept: capturing a graph empties torch's cache, which unmaps freed blocks.)
    out_sm = torch.empty_like(out)
    gv_sm, gl_sm, ga_sm = torch.empty_like(value), torch.empty_like(loc), torch.empty_like(logits)
    fwd_sm = lib.forward_fn(code, value, loc, logits, out_sm, weights=1)
    bwd_sm = lib.backward_fn(code, value, loc, logits, gout, gv_sm, gl_sm, ga_sm, weights=1)
    t_sfwd = graph_ms(fwd_sm, args.reps, args.warmup)
    t_sbwd = graph_ms(bwd_sm, args.reps, args.warmup)
    # Both with the level table in device memory, as models pass it.
    out_dev = torch.empty_like(out)
    gv_dev, gl_dev, ga_dev = torch.empty_like(value), torch.empty_like(loc), torch.empty_like(attn)
    fwd_dev = lib.forward_fn(code, value, loc, attn, out_dev, device_table=True)
    bwd_dev = lib.backward_fn(code, value, loc, attn, gout, gv_dev, gl_dev, ga_dev, device_table=True)
    t_dfwd = graph_ms(fwd_dev, args.reps, args.warmup)
    t_dbwd = graph_ms(bwd_dev, args.reps, args.warmup)
    # The deterministic backward (exact sums of grad_value), table on the host.
    gv_x, gl_x, ga_x = torch.empty_like(value), torch.empty_like(loc), torch.empty_like(attn)
    bwd_x = lib.backward_fn(code, value, loc, attn, gout, gv_x, gl_x, ga_x, deterministic=1)
    t_xbwd = graph_ms(bwd_x, args.reps, args.warmup)

    # Agreement: the grid_sample version in f32 (f64 for f64) on the same inputs, with autograd.
    up = torch.float64 if dtype == torch.float64 else torch.float32
    vr, lr, ar = (t.to(up).requires_grad_(True) for t in (value, loc, attn))
    ref = msda_grid_sample(vr, lr, ar)
    ref.backward(gout.to(up))
    fwd()
    bwd()
    fwd_sm()
    fwd_dev()
    bwd_dev()
    bwd_x()
    first_x = [t.clone() for t in (gv_x, gl_x, ga_x)]
    bwd_x()
    torch.cuda.synchronize()
    same_x = all(torch.equal(a, b) for a, b in zip(first_x, (gv_x, gl_x, ga_x)))
    if lib.device_status.item():
        raise RuntimeError(f"{name}: the device level table was found inconsistent")
    errs = [rel(out, ref.detach()), rel(gv, vr.grad), rel(gl, lr.grad), rel(ga, ar.grad), rel(out_sm, ref.detach()),
            rel(gv_dev, vr.grad), rel(out_dev, ref.detach()), rel(gv_x, vr.grad)]
    # The grid_sample version in this dtype, for the timings.
    vr, lr, ar = (t.clone().requires_grad_(True) for t in (value, loc, attn))
    with torch.no_grad():
        t_tfwd = median_ms(lambda: msda_grid_sample(value, loc, attn), args.reps, args.warmup)
    holder = {}

    def build_graph():
        for t in (vr, lr, ar):
            t.grad = None
        holder["out"] = msda_grid_sample(vr, lr, ar)
    t_tbwd = median_ms(lambda: holder["out"].backward(gout), args.reps, args.warmup, before=build_graph)

    eb = value.element_size()
    fwd_bytes = eb * (value.numel() + loc.numel() + attn.numel() + out.numel())
    bwd_bytes = eb * (value.numel() + loc.numel() + attn.numel() + gout.numel() + gv.numel() + gl.numel() + ga.numel())
    return dict(case=name, dtype=dt_name, fwd=t_fwd, bwd=t_bwd, sfwd=t_sfwd, sbwd=t_sbwd, dfwd=t_dfwd, dbwd=t_dbwd,
                xbwd=t_xbwd, same_x=same_x, cfwd=c_fwd, cbwd=c_bwd,
                tfwd=t_tfwd, tbwd=t_tbwd,
                floor_fwd=fwd_bytes / bw * 1e3, floor_bwd=bwd_bytes / bw * 1e3, errs=errs)


def kernel_table(lib, args, wanted, bw):
    """libmsda called directly (ctypes), per case and dtype; returns (disagreements, verdicts)."""
    rows, bad = [], []
    for name, N, Lq in args.cases:
        for dt_name, dtype, code in DTYPES:
            if dt_name not in wanted:
                continue
            r = bench_case(lib, name, N, Lq, dt_name, dtype, code, args, bw)
            # The location gradient jumps at pixel boundaries; grid_sample rounds the pixel
            # coordinate differently in f32, so a few points land on the other side of one.
            # The fifth: the fused op's output, from the logits rounded to dtype where attn is the
            # softmax rounded to dtype. The sixth and seventh: grad_value and the output with the
            # level table on the device. The eighth: the deterministic backward's grad_value.
            tols = {"f64": [1e-10] * 8, "f32": [1e-4, 1e-4, 2e-3, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4]}.get(dt_name, [3e-2] * 8)
            r["agree"] = all(e < t for e, t in zip(r["errs"], tols))
            if not r["agree"]:
                bad.append(f"{name} {dt_name}: relative differences {r['errs']}")
            if not r["same_x"]:
                bad.append(f"{name} {dt_name}: the deterministic backward gave other bits on a second run")
            rows.append(r)
            print(f"  {name} {dt_name}: fwd {r['fwd']:.4f} ms, bwd {r['bwd']:.4f} ms (graph), "
                  f"differences to grid_sample {['%.1e' % e for e in r['errs']]}", flush=True)

    print()
    hdr = (f"{'case':<12} {'dtype':<5} {'fwd graph':>9} {'bwd graph':>9} {'sm fwd':>8} {'sm bwd':>8} {'dev fwd':>8} {'dev bwd':>8} "
           f"{'det bwd':>8} "
           f"{'fwd call':>9} {'bwd call':>9} "
           f"{'gs fwd':>8} {'gs bwd':>8} {'floor fwd':>9} {'floor bwd':>9} {'target':>7} {'vs gs':>6}")
    print(hdr)
    print("-" * len(hdr))
    verdicts = []
    for r in rows:
        f32 = next((x for x in rows if x["case"] == r["case"] and x["dtype"] == "f32"), None)
        if r["dtype"] in ("f16", "bf16") and f32:  # GPU time against f32's
            ok = r["fwd"] < f32["fwd"] and r["bwd"] < f32["bwd"]
            target = "<f32" if ok else "!<f32"
            verdicts.append((f"{r['case']} {r['dtype']} faster than f32 (graph)", ok))
        else:
            target = "-"
        print(f"{r['case']:<12} {r['dtype']:<5} {r['fwd']:>9.4f} {r['bwd']:>9.4f} {r['sfwd']:>8.4f} {r['sbwd']:>8.4f} "
              f"{r['dfwd']:>8.4f} {r['dbwd']:>8.4f} {r['xbwd']:>8.4f} "
              f"{r['cfwd']:>9.4f} {r['cbwd']:>9.4f} "
              f"{r['tfwd']:>8.3f} {r['tbwd']:>8.3f} {r['floor_fwd']:>9.4f} {r['floor_bwd']:>9.4f} "
              f"{target:>7} {'ok' if r['agree'] else 'DIFF':>6}")
    print(f"sampling locations: {args.locations}")
    print("ms; graph: GPU time per call (CUDA graph of 20 calls); sm: the fused softmax op (logits), graph;")
    print("dev fwd, dev bwd: with the level table in device memory (as models pass it), graph;")
    print("det bwd: the deterministic backward (grad_value in exact integer sums), graph;")
    print("call: events around each call from Python;")
    print("gs: the grid_sample version (events around each call); medians of %d after %d warm-up;" % (args.reps, args.warmup))
    print("floor: bytes moved / measured copy bandwidth; target: f16/bf16 against f32 (graph); vs gs: agreement")
    print("with grid_sample in f32/f64; against the original op: --peers (same-run timings)")
    return bad, verdicts


def main():
    global D
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--dtypes", default="f32,f64,f16,bf16", help="comma-separated subset")
    ap.add_argument("--cases", type=lambda v: [parse_case(c) for c in v.split(",")], default=CASES,
                    help="comma-separated enc_bN and dec_bN_qQ (default: %s)" % ",".join(c[0] for c in CASES))
    ap.add_argument("--locations", choices=("random", "realistic"), default="random",
                    help="the kernel table's sampling locations: uniform, or compare.py's realistic ones")
    ap.add_argument("--peers", help="what tests/bench/peers/build-peers.sh built (build/peers): "
                    "add the comparison with the original op and DCNv4 (and msda's fused softmax "
                    "beside DCNv4's), and the encoder layer")
    ap.add_argument("--compare-dtypes", default="f32,f16,bf16", help="dtypes of the comparison")
    ap.add_argument("--no-kernel-table", action="store_true", help="only the comparison (--peers)")
    ap.add_argument("--channels", type=count(1), default=D,
                    help="D, the kernel table's channels a head (default %(default)s); one no vector "
                    "divides times the staged calls (kernels/PERF.md, \"Staged rows\")")
    args = ap.parse_args()
    D = args.channels
    wanted = args.dtypes.split(",")
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # makes the primary context current on this thread
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    lib = Msda(args.lib)
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, libmsda embeds: {lib.archs()}")
    print(f"device-to-device copy: {bw / 1e12:.2f} TB/s (read + write)")
    bad, verdicts = [], []
    if not args.no_kernel_table:
        bad, verdicts = kernel_table(lib, args, wanted, bw)
    if args.peers:
        # msda's Python op over the library under test, from the sources beside this repository's
        # wheel (the drop-in module there is not imported: the original op has its name).
        os.environ["MSDA_LIBRARY"] = str(Path(args.lib).resolve())
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "wheels"))
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import compare
        import encoder_layer
        from peers import load as peer_load
        peers, missing = peer_load.load(args.peers)
        dtypes = [(n, t) for n, t, _ in DTYPES if n in args.compare_dtypes.split(",")]
        failures, more = compare.run(peers, missing, dtypes, args.reps, args.warmup, cases=args.cases)
        bad += failures
        verdicts += more
        bad += encoder_layer.run(peers, args.reps, args.warmup)
        if missing:
            bad.append(f"peers not loaded: {', '.join(missing)}")
    print()
    for b in bad:
        print("FAILED:", b)
    for what, ok in verdicts:
        print(f"{'met   ' if ok else 'MISSED'} {what}")
    met = sum(ok for _, ok in verdicts)
    print(f"{met} passed, {len(verdicts) - met} failed (speed targets, reported; failures above fail the run)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
