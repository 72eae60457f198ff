"""The per-level-points op (msda.ms_deform_attn_points_per_level, libmsda's level_points and
sampling) against transformers' PyTorch version of it (multi_scale_deformable_attention_v2, as
RT-DETR v2, D-FINE and DEIMv2 run it), same inputs, one GPU, one run (issue 42): forward +
backward time (CUDA events, median of interleaved turns) and each side's error against the f64
reference (transformers' function in f64 on the same rounded inputs): the output and the
gradients of value, locations and weights, as ||x - ref|| / ||ref||.

Shapes: a 640x640 image's three levels (80x80, 40x40, 20x20: S = 8400), 8 heads of 32 channels,
300 decoder queries (RT-DETR v2's, D-FINE's), batch 2 and 8; points [4, 4, 4] (their default),
[3, 6, 3] and [2, 4, 8] (D-FINE's lists), bilinear and discrete; value f32, or bf16 with f32
locations and weights under bf16 autocast (what these models' attention gets there; autocast
runs transformers' grid_sample in f32).

Usage: python3 tests/bench/points_op.py [--iters N] (msda and transformers importable, a GPU)."""
import argparse
import statistics

import torch

import msda

SHAPES = [(80, 80), (40, 40), (20, 20)]
HEADS, CHANNELS, QUERIES = 8, 32, 300
CASES = [(2, [4, 4, 4], "bilinear"), (2, [3, 6, 3], "bilinear"), (2, [2, 4, 8], "bilinear"),
         (2, [4, 4, 4], "discrete"), (2, [3, 6, 3], "discrete"), (8, [4, 4, 4], "bilinear"),
         (8, [3, 6, 3], "bilinear"), (8, [3, 6, 3], "discrete")]
METHOD = {"bilinear": "default", "discrete": "discrete"}


def _inputs(batch, points, seed):
    g = torch.Generator().manual_seed(seed)
    spatial = sum(h * w for h, w in SHAPES)
    value = torch.randn(batch, spatial, HEADS, CHANNELS, generator=g)
    # off pixel centres and partly outside the maps, as trained models' points are
    loc = torch.rand(batch, QUERIES, HEADS, sum(points), 2, generator=g) * 1.2 - 0.1
    w = torch.rand(batch, QUERIES, HEADS, sum(points), generator=g).softmax(-1)
    grad = torch.randn(batch, QUERIES, HEADS * CHANNELS, generator=g)
    return value, loc, w, grad


def _rel(a, ref):
    if a is None or ref is None:
        return float("nan")
    return ((a.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def _run(fn, value, loc, w, grad, wants_loc):
    ins = [value.clone().requires_grad_(), loc.clone().requires_grad_(wants_loc), w.clone().requires_grad_()]
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=value.dtype == torch.bfloat16):
        out = fn(*ins)
    out.backward(grad.to(out.dtype))
    return out, [t.grad for t in ins]


def _time(fn, args, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--turns", type=int, default=7)
    args = parser.parse_args()
    from transformers.models.rt_detr_v2.modeling_rt_detr_v2 import multi_scale_deformable_attention_v2 as own
    import transformers
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, {msda.library_info()}")
    print("| batch | points | method | dtype | transformers ms | msda ms | speed-up | out err (transformers / msda) "
          "| grad_value err | grad_loc err | grad_w err |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for batch, points, method in CASES:
        for dtype in (torch.float32, torch.bfloat16):
            value, loc, w, grad = _inputs(batch, points, seed=batch + sum(points))
            value = value.to(dtype)
            grad = grad.to(dtype)
            wants_loc = method == "bilinear"
            # the reference: transformers' function in f64 on the same rounded inputs, on the GPU
            ref_out, ref_grads = _run(lambda v, l, a: own(v, SHAPES, l, a, points, METHOD[method]),
                                      value.double().cuda(), loc.double().cuda(), w.double().cuda(),
                                      grad.double().cuda(), wants_loc)
            dv, dl, dw, dg = value.cuda(), loc.cuda(), w.cuda(), grad.cuda()
            sides = {
                "transformers": lambda v, l, a: own(v, SHAPES, l, a, points, METHOD[method]),
                "msda": lambda v, l, a: msda.ms_deform_attn_points_per_level(v, SHAPES, None, l, a, points, method),
            }
            errs = {}
            for name, fn in sides.items():
                out, grads = _run(fn, dv, dl, dw, dg, wants_loc)
                errs[name] = [_rel(out, ref_out)] + [_rel(g, r) for g, r in zip(grads, ref_grads)]

            def step(fn):
                out, _ = _run(fn, dv, dl, dw, dg, wants_loc)
                return out

            times = {name: [] for name in sides}
            for name, fn in sides.items():  # warm-up
                _time(step, (fn,), 3)
            for _ in range(args.turns):  # interleaved, so that the machine's drift falls on both
                for name, fn in sides.items():
                    times[name].append(_time(step, (fn,), args.iters))
            t_own, t_msda = (statistics.median(times[n]) for n in sides)
            e_own, e_msda = errs["transformers"], errs["msda"]
            cols = [f"{a:.1e} / {b:.1e}" for a, b in zip(e_own, e_msda)]
            print(f"| {batch} | {points} | {method} | {str(dtype).replace('torch.', '')} | {t_own:.3f} | "
                  f"{t_msda:.3f} | {t_own / t_msda:.2f}x | " + " | ".join(cols) + " |", flush=True)


if __name__ == "__main__":
    main()
