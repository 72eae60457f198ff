"""transformers' models with their own MSDA path and with msda.patch (issue 42), on one GPU, in
one run: default configurations, random weights (nothing downloaded), batch 2 of 800x1066
images (RT-DETR's, whose feature pyramid needs sides divisible by 32: 640x640, its own size),
forward + backward, in f32 and under bf16 autocast; CUDA events around each step, medians, and
the spread of the step-by-step ratio (its quartiles: these steps are bound by the CPU's
launches, whose speed moves by 10 % and more on a shared machine) and a 95 % confidence
interval of its median (a bootstrap of the step pairs): a model is counted slower with msda
only where that whole interval is below 1, and "not shown faster" where it holds 1. Then
the largest differences of the outputs and of every parameter's gradient (f32, the
sampling-offset weights perturbed off transformers' initialisation, whose points fall on pixel
centres where the bilinear gradient has a kink). A two-stage model (GroundingDino) picks its
decoder's queries by top-k over the encoder's scores, where a difference of 1e-7 can swap two
near-equal ones: its encoder's outputs are compared apart ("enc diff"), and its decoder's and
its gradients can differ by what a swapped query changes.

Usage: python3 tests/bench/frameworks.py [--iters N] [--models a,b] (msda importable, a GPU)."""
import argparse
import gc
import statistics
import sys
import time

import torch

import msda
from step_ratios import count, median_interval, quartiles, verdict

BATCH = 2


def _models():
    import transformers as t
    text = {"input_ids": lambda: torch.randint(1000, 2000, (BATCH, 12), device="cuda"),
            "attention_mask": lambda: torch.ones(BATCH, 12, dtype=torch.long, device="cuda")}
    # The backbones' own default configurations, given, so that nothing is looked up on the Hub.
    resnet50 = lambda: t.ResNetConfig(out_features=["stage2", "stage3", "stage4"])
    no_timm = {"use_timm_backbone": False, "use_pretrained_backbone": False, "backbone": None}
    # name: (model, extra inputs, image size)
    return {
        "DeformableDetrModel": (lambda: t.DeformableDetrModel(t.DeformableDetrConfig(backbone_config=resnet50(),
                                                                                      **no_timm)), {}, (800, 1066)),
        "GroundingDinoModel": (lambda: t.GroundingDinoModel(t.GroundingDinoConfig(use_timm_backbone=False)), text,
                               (800, 1066)),
        "Mask2FormerModel": (lambda: t.Mask2FormerModel(t.Mask2FormerConfig()), {}, (800, 1066)),
        "RTDetrModel": (lambda: t.RTDetrModel(t.RTDetrConfig()), {}, (640, 640)),
        "RTDetrV2Model": (lambda: t.RTDetrV2Model(t.RTDetrV2Config()), {}, (640, 640)),
        "DFineModel": (lambda: t.DFineModel(t.DFineConfig()), {}, (640, 640)),
        # D-FINE's other decoder settings: a point count per level, and the nearest pixel
        # ("discrete"): libmsda's level_points and sampling.
        "DFineModel-3-6-3": (lambda: t.DFineModel(t.DFineConfig(decoder_n_points=[3, 6, 3])), {}, (640, 640)),
        "DFineModel-discrete": (lambda: t.DFineModel(t.DFineConfig(decoder_method="discrete")), {}, (640, 640)),
    }


def _floats(out):
    """The model's floating-point outputs, as [(name, tensor)]."""
    items = out.items() if hasattr(out, "items") else enumerate(out)
    found = []
    for key, v in items:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            found.append((str(key), v))
        elif isinstance(v, (tuple, list)):
            found += [(f"{key}[{i}]", x) for i, x in enumerate(v)
                      if isinstance(x, torch.Tensor) and x.is_floating_point()]
    return found


def _step(model, inputs, weights, autocast, host=None):
    """One forward + backward; HOST, where given, gets the host time of the forward (loss
    included) and of backward() added to its two items (perf_counter, nothing synchronised)."""
    start = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        outs = _floats(model(**inputs))
    loss = sum((o.float() * w).sum() for (_, o), w in zip(outs, weights))
    middle = time.perf_counter()
    loss.backward()
    if host is not None:
        host[0] += middle - start
        host[1] += time.perf_counter() - middle
    return outs


def _switch(replacements, on):
    """msda.patch's replacements put in place (ON) or taken out, without planning them again."""
    for r in replacements:
        r.put(r.new if on else r.original)


def _time(model, inputs, weights, autocast, iters, replacements):
    """Medians (own, msda) of forward + backward, the quartiles of the step-by-step ratio own /
    msda, and the 95 % interval of its median. The two paths are interleaved step by step, so
    that a drift of the machine's speed (these models are bound by the CPU's launches, under
    autocast most) falls on both alike; the garbage is collected before each step, outside the
    timing, so that each step starts from the same heap and a collection of the garbage of
    earlier steps (of either path) falls inside neither path's step."""
    times = ([], [])
    for i in range(iters + 3):
        for on in (False, True):
            _switch(replacements, on)
            model.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            _step(model, inputs, weights, autocast)
            end.record()
            torch.cuda.synchronize()
            if i >= 3:  # warm-up
                times[on].append(start.elapsed_time(end))
    _switch(replacements, False)
    ratios = [own / new for own, new in zip(*times)]
    return statistics.median(times[0]), statistics.median(times[1]), quartiles(ratios), median_interval(ratios)


def _max_difference(a, b):
    """max |a - b| / max |b| over the elements finite in both (masked logits are -inf in both);
    inf where only one of the two is finite."""
    finite = torch.isfinite(a) & torch.isfinite(b)
    if not torch.equal(finite, torch.isfinite(b)) or not torch.equal(a[~finite], b[~finite]):
        return float("inf")
    if not finite.any():
        return 0.0
    return ((a[finite] - b[finite]).abs().max() / b[finite].abs().max().clamp_min(1e-30)).item()


def _differences(model, inputs, weights):
    """(largest encoder output difference, largest output difference, largest gradient
    difference), own path against msda, f32."""
    runs = []
    for patched in (False, True):
        msda.patch("transformers") if patched else msda.unpatch()
        model.zero_grad(set_to_none=True)
        outs = [(n, o.detach().clone()) for n, o in _step(model, inputs, weights, False)]
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        runs.append((outs, grads))
    msda.unpatch()
    (own_out, own_grads), (new_out, new_grads) = runs
    diffs = {n: _max_difference(a, b) for (n, a), (_, b) in zip(new_out, own_out)}
    enc_diff = max((d for n, d in diffs.items() if n.startswith("encoder_last_hidden_state")), default=float("nan"))
    out_diff = max(diffs.values())
    scale = max(g.norm().item() for g in own_grads.values())
    grad_diff = max(((new_grads[n] - g).norm() / max(g.norm().item(), 1e-3 * scale)).item()
                    for n, g in own_grads.items())
    return enc_diff, out_diff, grad_diff


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=count(1), default=30)
    parser.add_argument("--models", default="")
    args = parser.parse_args()
    import transformers
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, msda {msda.__version__}, "
          f"{torch.cuda.get_device_name()}; batch {BATCH}, forward + backward, "
          f"median of {args.iters} (CUDA events)")
    print(f"{'model':<22} {'precision':<10} {'own ms':>9} {'msda ms':>9} {'speed-up':>9} {'ratio IQR':>12} "
          f"{'median 95%':>12} {'enc diff':>9} {'out diff':>9} {'grad diff':>9}")
    wanted = [m for m in args.models.split(",") if m]
    slower = unproven = 0
    for name, (build, extra, (height, width)) in _models().items():
        if wanted and name not in wanted:
            continue
        msda.unpatch()
        torch.manual_seed(0)
        t0 = time.time()
        try:
            model = build().cuda().eval()  # eval: dropout off; gradients still flow
        except Exception as exc:  # reported, and the other models still run
            print(f"{name:<22} not built: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            slower += 1
            continue
        with torch.no_grad():
            g = torch.Generator(device="cuda").manual_seed(7)
            for pname, p in model.named_parameters():
                if "sampling_offsets" in pname:
                    p.add_(torch.randn(p.shape, generator=g, device="cuda") * 0.05)
        inputs = {"pixel_values": torch.randn(BATCH, 3, height, width, device="cuda")}
        inputs.update({k: f() for k, f in extra.items()})
        gw = torch.Generator(device="cuda").manual_seed(3)
        with torch.no_grad():
            weights = [torch.randn(o.shape, generator=gw, device="cuda") for _, o in _floats(model(**inputs))]
        enc_diff, out_diff, grad_diff = _differences(model, inputs, weights)
        msda.unpatch()
        msda.patch("transformers")
        replacements = list(msda._patch._active)
        for autocast in (False, True):
            own, new, (low, high), (lo95, hi95) = _time(model, inputs, weights, autocast, args.iters, replacements)
            found = verdict((lo95, hi95))
            slower += found == "slower"
            unproven += found == "even"
            print(f"{name:<22} {'bf16 auto' if autocast else 'f32':<10} {own:9.1f} {new:9.1f} {own / new:8.2f}x "
                  f"{low:5.2f}-{high:4.2f}x {lo95:5.2f}-{hi95:4.2f}x {enc_diff:9.1e} {out_diff:9.1e} "
                  f"{grad_diff:9.1e}", flush=True)
        msda.unpatch()
        del model
        torch.cuda.empty_cache()
        print(f"  ({time.time() - t0:.0f} s)", file=sys.stderr)
    print(f"{slower} case(s) slower with msda.patch than the model's own path (the median ratio's whole 95 % "
          f"interval below 1); {unproven} case(s) not shown faster (the interval holds 1)")


if __name__ == "__main__":
    main()
