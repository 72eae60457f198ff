"""Where msda.patch's time goes in D-FINE (issue 42): transformers' D-FINE models with their own
attention core (multi_scale_deformable_attention_v2) and with msda's, on one GPU, in one run;
per configuration and precision, the median step (forward + backward, CUDA events), the median
and quartiles of the step-by-step ratio own / msda, and the CPU time a step spends inside the
attention core's forward calls (perf_counter around each call, no synchronisation), which is
what msda changes in a step bound by the CPU's launches, and the host time of the whole forward
and of the backward call (perf_counter, no synchronisation inside: the time the CPU takes to
issue them while the GPU keeps up). The two paths are interleaved step by step and the garbage
is collected before each step, as in frameworks.py.

With --profile K, K more steps of each path under torch's profiler (CPU activity only): the ops
whose host time a step differs most between the two paths, with their calls a step.

Usage: python3 tests/bench/dfine_core.py [--iters N] [--models DFineModel,DFineModel-3-6-3]
[--profile K] (msda, transformers and a GPU)."""
import argparse
import gc
import statistics
import time

import torch

import frameworks
import msda
from step_ratios import count, quartiles

ATTR = "ms_deformable_attn_core"  # where D-FINE's attention layers keep the function


def _timed(fn, spent):
    def call(*args, **kwargs):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        spent[0] += time.perf_counter() - start
        spent[1] += 1
        return out
    return call


def _median(pairs, k):
    return statistics.median(p[k] for p in pairs)


def _host_by_op(model, inputs, weights, autocast, steps):
    """{op name: (self CPU ms a step, calls a step)} over STEPS profiled steps."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            model.zero_grad(set_to_none=True)
            frameworks._step(model, inputs, weights, autocast)
            torch.cuda.synchronize()
    return {e.key: (e.self_cpu_time_total / 1e3 / steps, e.count / steps) for e in prof.key_averages()}


def _print_profile(own, new, rows=15):
    print(f"  {'op (self CPU a step)':<52} {'own ms':>8} {'calls':>6} {'msda ms':>8} {'calls':>6}")
    names = sorted(set(own) | set(new), key=lambda n: -abs(own.get(n, (0, 0))[0] - new.get(n, (0, 0))[0]))
    for n in names[:rows]:
        a, b = own.get(n, (0.0, 0)), new.get(n, (0.0, 0))
        print(f"  {n[:52]:<52} {a[0]:8.3f} {a[1]:6.0f} {b[0]:8.3f} {b[1]:6.0f}")
    print(f"  {'all ops':<52} {sum(v[0] for v in own.values()):8.3f} {'':6} {sum(v[0] for v in new.values()):8.3f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=count(1), default=40)
    parser.add_argument("--models", default="DFineModel,DFineModel-3-6-3")
    parser.add_argument("--profile", type=count(0), default=0, metavar="K")
    args = parser.parse_args()
    import transformers.models.d_fine.modeling_d_fine as d_fine
    print(f"{'model':<20} {'precision':<10} {'own ms':>8} {'msda ms':>8} {'ratio':>6} {'IQR':>10} "
          f"{'core CPU own':>13} {'msda':>6} {'calls':>6} {'fwd host own':>13} {'msda':>6} {'bwd host own':>13} "
          f"{'msda':>6}")
    for name in args.models.split(","):
        build, _, (height, width) = frameworks._models()[name]
        msda.unpatch()
        torch.manual_seed(0)
        model = build().cuda().eval()
        inputs = {"pixel_values": torch.randn(frameworks.BATCH, 3, height, width, device="cuda")}
        with torch.no_grad():
            weights = [torch.randn(o.shape, device="cuda") for _, o in frameworks._floats(model(**inputs))]
        own_core = d_fine.multi_scale_deformable_attention_v2
        msda.patch("transformers")
        replacements = list(msda._patch._active)
        msda_core = d_fine.multi_scale_deformable_attention_v2
        layers = [m for m in model.modules() if ATTR in vars(m)]
        spent = [0.0, 0]
        for autocast in (False, True):
            steps, core, host = ([], []), ([], []), ([], [])
            for i in range(args.iters + 3):
                for on in (False, True):
                    frameworks._switch(replacements, on)
                    # Patched, a layer holding transformers' function calls the module's (msda's).
                    if on:
                        d_fine.multi_scale_deformable_attention_v2 = _timed(msda_core, spent)
                    else:
                        for layer in layers:
                            layer.__dict__[ATTR] = _timed(own_core, spent)
                    model.zero_grad(set_to_none=True)
                    gc.collect()
                    torch.cuda.synchronize()
                    spent[:] = [0.0, 0]
                    issued = [0.0, 0.0]
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    frameworks._step(model, inputs, weights, autocast, issued)
                    end.record()
                    torch.cuda.synchronize()
                    d_fine.multi_scale_deformable_attention_v2 = msda_core if on else own_core
                    for layer in layers:
                        layer.__dict__[ATTR] = own_core
                    if i >= 3:
                        steps[on].append(start.elapsed_time(end))
                        core[on].append(spent[0] * 1e3)
                        host[on].append([t * 1e3 for t in issued])
                        calls = spent[1]
            ratios = [a / b for a, b in zip(*steps)]
            low, high = quartiles(ratios)
            print(f"{name:<20} {'bf16 auto' if autocast else 'f32':<10} {statistics.median(steps[0]):8.1f} "
                  f"{statistics.median(steps[1]):8.1f} {statistics.median(ratios):5.2f}x {low:4.2f}-{high:4.2f}x "
                  f"{statistics.median(core[0]):10.2f} ms {statistics.median(core[1]):6.2f} {calls:6d} "
                  f"{_median(host[0], 0):10.2f} ms {_median(host[1], 0):6.2f} "
                  f"{_median(host[0], 1):10.2f} ms {_median(host[1], 1):6.2f}", flush=True)
            if args.profile:
                by_path = []
                for on in (False, True):
                    frameworks._switch(replacements, on)
                    by_path.append(_host_by_op(model, inputs, weights, autocast, args.profile))
                print(f"{name} {'bf16 auto' if autocast else 'f32'}: host time by op, {args.profile} steps a path")
                _print_profile(*by_path)
        frameworks._switch(replacements, False)
        msda.unpatch()
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
