"""bench.py --peers: msda against its peers on the same inputs, one table per shape.

Implementations, each called the way its users call it, through autograd:
  msda   msda.ms_deform_attn (the wheel's Python op over the library under test; the level
         table on the GPU, as models keep it and as the peers get it)
  msda32 the same with f32 locations and weights beside an f16/bf16 value (mixed precision, as a
         model under autocast calls it; f16/bf16 only), against a reference with f32 locations
  msdasm msda.ms_deform_attn(..., weights_are_logits=True): the logits in value's dtype, the
         softmax fused into libmsda's kernels, as DCNv4 takes them (fused against fused)
  orig   Deformable-DETR's MSDeformAttnFunction over its CUDA extension (f32 and f64 only)
  dcnv4  DCNv4's FlashDeformAttnFunction: locations and attention logits packed into one tensor
         (N, Lq, M, L*P*2 + L*P) in value's dtype, the softmax fused into the kernel
  gs     the op in plain PyTorch (grid_sample per level), as Deformable-DETR's
         ms_deform_attn_core_pytorch computes it
  floor  torch's own cost for such an op: an autograd.Function on msda's inputs that only
         allocates its result and gradients (no kernel, no checks): what any op called
         through a Python autograd.Function costs at least, eager (timed, not compared)
  native one native torch op with its autograd in C++ on three tensors of the output's shape
         (torch.addcmul; its backward is two multiplications): what the host takes for any
         op's eager forward + backward, Python or not (timed, not compared)
All get the same value, locations and attention: the logits are drawn once, msda/orig/gs get
their softmax, msdasm and dcnv4 the logits themselves.

Per implementation: eager times (CUDA events around the Python call; forward under no_grad, and
forward + backward with torch.autograd.grad; the least of EAGER_ROUNDS medians, each round timing
every implementation in turn, a block of calls each, so that a slow spell of the host weighs on
one round rather than on one implementation) and CUDA-graph times (a graph of several calls,
replayed; GPU time per call). Locations "random" (uniform, 10% past each edge) or "realistic"
(Deformable-DETR's reference points: each encoder query at the centre of its own pixel, decoder
queries anywhere; offsets as its initialisation lays them out, k+1 pixels along each head's
direction, plus noise of one pixel). Agreement: each output and gradient against grid_sample in
f32 (f64 for f64) on the same inputs."""
import math
import statistics

import torch
import torch.nn.functional as F

from bench import (CASES, LEVELS, D, L, M, P, S, AllocOnlyOp, capture_graph, median_ms,
                   msda_grid_sample, rel)

TOLS = {torch.float64: 1e-10, torch.float32: 2e-3, torch.float16: 3e-2, torch.bfloat16: 3e-2}
# Issue 11's absolute targets on the H200, msda's CUDA-graph ms on enc_b2: (forward, backward),
# the backward taken as forward + backward through autograd less the forward.
ENC_B2_TARGETS = {"f32": (0.22, 0.75), "f16": (0.125, 0.60), "bf16": (0.125, 0.60)}
# Issue 11's eager figure on dec_b2_q900 f32: msda's forward + backward through autograd at most
# this share of the original op's in the same run, and at most this many ms.
DEC_EAGER_RATIO, DEC_EAGER_MS = 0.67, 0.15
IMPLS = ("msda", "msda32", "msdasm", "orig", "dcnv4", "gs", "floor", "native")
# Rows only timed: their results are not the op's.
TIMED_ONLY = ("floor", "native")
DTYPE_OF = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def realistic_locations(N, Lq, g):
    """(N, Lq, M, L, P, 2) locations as a Deformable-DETR layer at initialisation makes them."""
    dev = "cuda"
    if Lq == S:  # encoder: queries are the pixels of every level, in order
        refs = []
        for h, w in LEVELS:
            ys, xs = torch.meshgrid((torch.arange(h, device=dev) + 0.5) / h,
                                    (torch.arange(w, device=dev) + 0.5) / w, indexing="ij")
            refs.append(torch.stack([xs.reshape(-1), ys.reshape(-1)], -1))
        ref = torch.cat(refs).expand(N, Lq, 2)
    else:
        ref = torch.rand(N, Lq, 2, device=dev, generator=g) * 0.9 + 0.05
    thetas = torch.arange(M, device=dev) * (2 * math.pi / M)
    direction = torch.stack([thetas.cos(), thetas.sin()], -1)
    direction = direction / direction.abs().max(-1, keepdim=True)[0]
    steps = torch.arange(1, P + 1, device=dev, dtype=torch.float32)
    pixels = direction[:, None, None, :] * steps[None, None, :, None]  # (M, 1, P, 2)
    pixels = pixels + torch.randn(N, Lq, M, L, P, 2, device=dev, generator=g)
    size = torch.tensor([[w, h] for h, w in LEVELS], device=dev, dtype=torch.float32)  # (L, 2)
    return ref[:, :, None, None, None, :] + pixels / size[None, None, None, :, None, :]


def make_inputs(N, Lq, kind, seed=1234):
    g = torch.Generator(device="cuda").manual_seed(seed)
    value = torch.randn(N, S, M, D, device="cuda", generator=g)
    if kind == "random":
        loc = torch.rand(N, Lq, M, L, P, 2, device="cuda", generator=g) * 1.2 - 0.1
    else:
        loc = realistic_locations(N, Lq, g)
    logits = torch.randn(N, Lq, M, L * P, device="cuda", generator=g)
    gout = torch.randn(N, Lq, M * D, device="cuda", generator=g)
    return value, loc, logits, gout


class Impl:
    """One implementation on one set of inputs: its leaves and how to call it."""

    def __init__(self, name, fn, leaves):
        self.name, self.fn, self.leaves = name, fn, leaves

    def __call__(self):
        return self.fn(*self.leaves)


def implementations(peers, value, loc, logits, dtype):
    """{name: Impl or reason}: each one's leaves, in dtype, requiring grad."""
    shapes = torch.tensor(LEVELS, device=value.device)
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    shapes_host, starts_host = shapes.cpu(), starts.cpu()
    # The softmax of the logits as dcnv4 gets them (rounded to dtype), as the reference takes it.
    up = torch.float64 if dtype == torch.float64 else torch.float32
    attn = logits.to(dtype).to(up).softmax(-1).view(*logits.shape[:3], L, P)
    leaf = lambda t: t.to(dtype).detach().requires_grad_(True)
    out = {}
    import msda
    op = lambda v, l, a: msda.ms_deform_attn(v, shapes, starts, l, a)
    out["msda"] = Impl("msda", op, [leaf(value), leaf(loc), leaf(attn)])
    if dtype in (torch.float16, torch.bfloat16):
        f32 = lambda t: t.float().detach().requires_grad_(True)
        out["msda32"] = Impl("msda32", op, [leaf(value), f32(loc),
                                            f32(logits.softmax(-1).view(*logits.shape[:3], L, P))])
    fused = lambda v, l, z: msda.ms_deform_attn(v, shapes, starts, l, z,
                                                weights_are_logits=True)
    out["msdasm"] = Impl("msdasm", fused, [leaf(value), leaf(loc),
                                           leaf(logits.view(*logits.shape[:3], L, P))])
    # Each lambda names its own Function: a closure reads its variable when called, so one name
    # shared by both branches sent orig's arguments to DCNv4's Function.
    if "orig" in peers and dtype in (torch.float32, torch.float64):  # no 16-bit kernels
        orig_fn = peers["orig"]
        out["orig"] = Impl("orig", lambda v, l, a: orig_fn.apply(v, shapes, starts, l, a, 64),
                           [leaf(value), leaf(loc), leaf(attn)])
    if "dcnv4" in peers:
        dcnv4_fn = peers["dcnv4"]
        packed = torch.cat([loc.flatten(-3), logits], -1)  # (N, Lq, M, L*P*2 + L*P)
        out["dcnv4"] = Impl("dcnv4", lambda v, sla: dcnv4_fn.apply(v, shapes, starts, sla, 64, P),
                            [leaf(value), leaf(packed)])
    out["gs"] = Impl("gs", msda_grid_sample, [leaf(value), leaf(loc), leaf(attn)])
    floor = lambda v, l, a: AllocOnlyOp.apply(v, shapes_host, starts_host, l, a)
    out["floor"] = Impl("floor", floor, [leaf(value), leaf(loc), leaf(attn)])
    shape = (value.shape[0], loc.shape[1], value.shape[2] * value.shape[3])
    out["native"] = Impl("native", torch.addcmul,
                         [leaf(torch.randn(shape, device=value.device)) for _ in range(3)])
    return out


def reference(value, loc, logits, gout, dtype, mixed=False):
    """grid_sample in f32 (f64 for f64) on the dtype-rounded inputs (mixed: only value rounded,
    locations and logits in f32): output and the gradients with respect to value, locations,
    attention weights and logits."""
    up = torch.float64 if dtype == torch.float64 else torch.float32
    v = value.to(dtype).to(up).detach().requires_grad_(True)
    l, z = ((t if mixed else t.to(dtype)).to(up).detach().requires_grad_(True) for t in (loc, logits))
    a = z.softmax(-1).view(*z.shape[:3], L, P)
    a.retain_grad()
    out = msda_grid_sample(v, l, a)
    out.backward(gout.to(dtype).to(up))
    return out.detach(), v.grad, l.grad, a.grad, z.grad


def difference(what, got, want, notes):
    """rel(got, want), None where the implementation gave no gradient; a non-finite value on
    either side is named in notes, since its nan would otherwise hide behind the finite maximum."""
    if got is None:
        notes.append(f"no {what}")
        return None
    for side, t in (("", got), ("reference's ", want)):
        if not torch.isfinite(t).all():
            notes.append(f"{side}{what} not finite")
    return rel(got, want)


def agreement(impl, ref, gout):
    """Relative differences to the reference: output, then the gradients (None for a gradient the
    implementation does not return); only the output's (and the backward's error text) where the
    backward fails. Returns (errs, note)."""
    out = impl()
    r_out, r_v, r_l, r_a, r_z = ref
    notes = []
    errs = [difference("output", out, r_out, notes)]
    try:
        grads = torch.autograd.grad(out, impl.leaves, gout.to(out.dtype), allow_unused=True)
    except Exception as exc:
        torch.cuda.synchronize()
        return errs, "; ".join(notes + [f"backward: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"])
    errs.append(difference("value gradient", grads[0], r_v, notes))
    if impl.name == "dcnv4":
        g = grads[1]
        split = L * P * 2
        errs += [difference("location gradient", None if g is None else g[..., :split], r_l.flatten(-3), notes),
                 difference("logit gradient", None if g is None else g[..., split:], r_z, notes)]
    elif impl.name == "msdasm":
        errs += [difference("location gradient", grads[1], r_l, notes),
                 difference("logit gradient", grads[2], r_z.view_as(impl.leaves[2]), notes)]
    else:
        errs += [difference("location gradient", grads[1], r_l, notes),
                 difference("weight gradient", grads[2], r_a, notes)]
    return errs, "; ".join(notes)


def agrees(errs, dtype):
    return len(errs) == 4 and all(e is not None and e < TOLS[dtype] for e in errs)


def verdict(errs, dtype):
    """The table's agreement column: a difference past the tolerance first (it is real whatever
    else is wrong), then a missing or non-finite gradient, which max rel. diff cannot show."""
    if not errs:
        return "failed"
    tol = TOLS[dtype]
    if any(e is not None and math.isfinite(e) and e >= tol for e in errs):
        return "DIFF"
    if len(errs) < 4:  # the forward alone ran
        return "fwd ok" if math.isfinite(errs[0]) else "NaN"
    if any(e is None for e in errs):
        return "no grad"
    if any(not math.isfinite(e) for e in errs):
        return "NaN"
    return "ok"


def max_diff(errs):
    """The largest finite difference (nan where there is none)."""
    finite = [e for e in errs or [] if e is not None and math.isfinite(e)]
    return max(finite) if finite else float("nan")


def fwd_bwd(impl, gout):
    def run():
        out = impl()
        torch.autograd.grad(out, impl.leaves, gout, allow_unused=True)
    return run


def forward_only(impl):
    def run():
        with torch.no_grad():
            impl()
    return run


def graph_ms(fn, reps, warmup, calls):
    """GPU time of one call: a CUDA graph of `calls` calls, replayed, divided."""
    graph = capture_graph(fn, calls)
    t = median_ms(graph.replay, reps, warmup) / calls
    del graph
    return t


# Rounds of eager timing per (shape, locations, dtype). One round let the host's state decide
# verdicts: H200, session 12 and 13, the floor (an op that runs no kernel) of one table moved from
# 0.152 to 0.202 ms between rows, more than msda's distance to the original op on the decoder.
EAGER_ROUNDS = 3


def eager_ms(impl, gout, reps, warmup):
    """The eager fwd and fwd+bwd medians of one block of calls (None where one failed), and the
    first failure's text."""
    got, note = [], ""
    for fn in (forward_only(impl), fwd_bwd(impl, gout)):
        try:
            got.append(median_ms(fn, reps, warmup))
        except Exception as exc:
            got.append(None)
            note = note or f"eager: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            torch.cuda.synchronize()
    return got, note


def timings(impl, gout, reps, warmup):
    """eager fwd, eager fwd+bwd, graph fwd, graph fwd+bwd in ms (None where one failed), and
    the first failure's text."""
    got, note = eager_ms(impl, gout, reps, warmup)
    for k, make in enumerate((forward_only, lambda i: fwd_bwd(i, gout))):
        eager = got[k]
        if eager is None:
            got.append(None)
            continue
        calls = max(1, min(20, int(2.0 / max(eager, 1e-3))))  # about 2 ms of work per replay
        try:
            got.append(graph_ms(make(impl), reps, warmup, calls))
        except Exception as exc:
            got.append(None)
            note = note or f"graph: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            torch.cuda.synchronize()
    return got, note


def run(peers, missing, dtypes, reps, warmup, kinds=("random", "realistic"), cases=CASES):
    """Prints the tables; returns (failures, speed verdicts) where failures are msda's
    disagreements or failed calls (peers' are reported, not counted)."""
    for name, why in missing.items():
        print(f"peer {name} not loaded: {why}")
    failures, verdicts = [], []
    for case, N, Lq in cases:
        rows = []
        for kind in kinds:
            value, loc, logits, gout = make_inputs(N, Lq, kind)
            for dt_name, dtype in dtypes:
                ref = reference(value, loc, logits, gout, dtype)
                ref_mixed = reference(value, loc, logits, gout, dtype, mixed=True)
                impls = implementations(peers, value, loc, logits, dtype)
                g = gout.to(dtype)
                # What rounding the locations to dtype costs (every implementation here takes
                # them in value's dtype): the reference's output with f32 locations against it.
                with torch.no_grad():
                    up = torch.float64 if dtype == torch.float64 else torch.float32
                    unrounded = msda_grid_sample(value.to(dtype).to(up), loc.to(up),
                                                 logits.to(dtype).to(up).softmax(-1).view(*loc.shape[:5]))
                loc_cost = rel(ref[0], unrounded)
                for name in IMPLS:
                    if name not in impls:
                        continue
                    impl = impls[name]
                    if name in TIMED_ONLY:
                        times, note = timings(impl, g, reps, warmup)
                        rows.append(dict(kind=kind, dtype=dt_name, impl=name, t=times, errs=None,
                                         agree=True, note=note))
                        print(f"  {case} {kind} {dt_name} {name}: {fmt_times(times)}", flush=True)
                        continue
                    try:
                        errs, note = agreement(impl, ref_mixed if name == "msda32" else ref, g)
                        agree = agrees(errs, dtype)
                    except Exception as exc:  # the forward failed
                        errs, agree = None, False
                        note = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
                        torch.cuda.synchronize()
                    if errs is None:
                        times = [None] * 4
                    else:
                        times, timing_note = timings(impl, g, reps, warmup)
                        note = "; ".join(x for x in (note, timing_note) if x)
                    if name.startswith("msda") and (not agree or None in times):
                        failures.append(f"{case} {kind} {dt_name} {name}: differences {errs} {note}")
                    if name == "msda" and dtype != up:
                        note = (note + "; " if note else "") + f"locations in {dt_name} move the output by {loc_cost:.1e}"
                    rows.append(dict(kind=kind, dtype=dt_name, impl=name, t=times, errs=errs,
                                     agree=agree, note=note))
                    print(f"  {case} {kind} {dt_name} {name}: {fmt_times(times)} "
                          f"{verdict(errs, dtype)} {fmt_errs(errs)}", flush=True)
                timed = [r for r in rows if r["kind"] == kind and r["dtype"] == dt_name]
                for _ in range(EAGER_ROUNDS - 1):
                    for r in timed:
                        if r["t"][0] is None and r["t"][1] is None:
                            continue
                        again, _ = eager_ms(impls[r["impl"]], g, reps, warmup)
                        # a call that failed in the first round stays failed
                        r["t"][:2] = [None if a is None else a if b is None else min(a, b)
                                      for a, b in zip(r["t"][:2], again)]
                for r in timed:
                    print(f"  {case} {kind} {dt_name} {r['impl']}: eager, least of {EAGER_ROUNDS} rounds: "
                          f"{fmt_times(r['t'][:2])}", flush=True)
                del impls
            torch.cuda.empty_cache()
        verdicts += print_table(case, N, Lq, rows)
    return failures, verdicts


def fmt_times(t):
    return " ".join("-" if x is None else f"{x:.4f}" for x in t)


def fmt_errs(errs):
    return "[" + ", ".join("none" if e is None else f"{e:.1e}" for e in errs) + "]" if errs else "(call failed)"


def print_table(case, N, Lq, rows):
    print()
    print(f"{case}: N={N}, Lq={Lq}, S={S}, M={M}, D={D}, L={L}, P={P}; ms, medians")
    hdr = (f"{'locations':<10} {'dtype':<5} {'impl':<6} {'fwd eager':>9} {'f+b eager':>9} {'fwd graph':>9} "
           f"{'f+b graph':>9} {'x msda f+b eager':>16} {'x msda f+b graph':>16} {'agree':>7}  max rel. diff")
    print(hdr)
    print("-" * len(hdr))
    verdicts = []
    for r in rows:
        base = next((x for x in rows if x["kind"] == r["kind"] and x["dtype"] == r["dtype"]
                     and x["impl"] == "msda"), None)
        ratio = []
        for k in (1, 3):
            a, b = r["t"][k], base["t"][k] if base else None
            ratio.append(f"{a / b:.2f}" if a and b else "-")
        errs = max_diff(r["errs"])
        agree = "-" if r["impl"] in TIMED_ONLY else verdict(r["errs"], DTYPE_OF[r["dtype"]])
        print(f"{r['kind']:<10} {r['dtype']:<5} {r['impl']:<6} " +
              " ".join(f"{x:>9.4f}" if x is not None else f"{'-':>9}" for x in r["t"]) +
              f" {ratio[0]:>16} {ratio[1]:>16} {agree:>7}  {errs:.1e}"
              + (f"  {r['note']}" if r["note"] else ""))
        # The target: msda f32 at least as fast as the original op, eager and graph, fwd+bwd.
        if r["impl"] == "orig" and r["dtype"] == "f32" and base and None not in base["t"] and None not in r["t"]:
            ok = base["t"][1] <= r["t"][1] and base["t"][3] <= r["t"][3]
            verdicts.append((f"{case} {r['kind']} f32 msda vs orig (f+b eager {base['t'][1]:.4f} vs "
                             f"{r['t'][1]:.4f}, graph {base['t'][3]:.4f} vs {r['t'][3]:.4f})", ok))
        # Issue 11's eager target on the decoder: forward + backward through autograd at most
        # 0.67 of the original op's, same run, and at most 0.15 ms (an H200 figure).
        if (r["impl"] == "orig" and case == "dec_b2_q900" and r["dtype"] == "f32" and base
                and None not in (base["t"][1], r["t"][1])):
            mine, theirs = base["t"][1], r["t"][1]
            verdicts.append((f"{case} {r['kind']} f32 msda f+b eager {mine:.4f} <= "
                             f"{DEC_EAGER_RATIO} x orig's {theirs:.4f} ({mine / theirs:.2f} x) and <= "
                             f"{DEC_EAGER_MS}", mine <= DEC_EAGER_RATIO * theirs and mine <= DEC_EAGER_MS))
        if (r["impl"] == "msda" and case == "enc_b2" and r["dtype"] in ENC_B2_TARGETS
                and None not in (r["t"][2], r["t"][3])):
            fwd, bwd = r["t"][2], r["t"][3] - r["t"][2]
            want = ENC_B2_TARGETS[r["dtype"]]
            verdicts.append((f"{case} {r['kind']} {r['dtype']} msda graph fwd {fwd:.4f} <= {want[0]}, "
                             f"bwd (f+b - fwd) {bwd:.4f} <= {want[1]}", fwd <= want[0] and bwd <= want[1]))
        # The plain op's 16-bit forward against DCNv4's (which fuses the softmax: msdasm below is
        # the like-for-like comparison), GPU time.
        plain = next((x for x in rows if x["kind"] == r["kind"] and x["dtype"] == r["dtype"]
                      and x["impl"] == "msda"), None)
        if (r["impl"] == "dcnv4" and r["dtype"] in ("f16", "bf16") and plain
                and None not in (plain["t"][2], r["t"][2])):
            verdicts.append((f"{case} {r['kind']} {r['dtype']} msda vs dcnv4 (graph fwd {plain['t'][2]:.4f} "
                             f"vs {r['t'][2]:.4f})", plain["t"][2] <= r["t"][2]))
        # Fused against fused: msda's softmax-in-kernel variant at least as fast as DCNv4's, GPU
        # time (graph) of the forward and of forward + backward.
        fused = next((x for x in rows if x["kind"] == r["kind"] and x["dtype"] == r["dtype"]
                      and x["impl"] == "msdasm"), None)
        if r["impl"] == "dcnv4" and fused and None not in (fused["t"][2], fused["t"][3], r["t"][2], r["t"][3]):
            ok = fused["t"][2] <= r["t"][2] and fused["t"][3] <= r["t"][3]
            verdicts.append((f"{case} {r['kind']} {r['dtype']} msdasm vs dcnv4 (graph fwd {fused['t'][2]:.4f} "
                             f"vs {r['t'][2]:.4f}, f+b {fused['t'][3]:.4f} vs {r['t'][3]:.4f})", ok))
    print("x msda: this row's time over msda's (same locations and dtype); f+b: forward + backward "
          "through autograd; graph: GPU time per call in a replayed CUDA graph; msdasm: msda with "
          "the softmax fused (logits in), to set beside dcnv4; floor: an autograd.Function that only "
          "allocates (torch's own cost, the least any Python op's eager call takes); native: one "
          "native torch op with its autograd in C++ (addcmul on the output's shape: the host's cost "
          "for any op's eager call)")
    print("agree: ok; DIFF (a difference past the dtype's tolerance); NaN (a non-finite output or gradient,"
          " named in the note); no grad (no gradient for an input); fwd ok (the backward failed); failed;"
          " max rel. diff: the largest finite one")
    return verdicts
