"""bench.py --peers: one Deformable-DETR encoder layer's attention block, forward and forward +
backward, batch 2 on the enc shapes (d_model 256, 8 heads, 4 levels, 4 points): value
projection, offset and weight projections, softmax, the MSDA core, output projection, the
parameters of msda.MSDeformAttn (Deformable-DETR's initialisation, then perturbed so that the
offsets and weights depend on the query). The core is swapped: msda, msda with the softmax
fused (msdasm: the logits go in, as MSDeformAttn(fused_softmax=True) passes them), the original
op, DCNv4 (its fused softmax takes the logits, packed with the locations in value's dtype, as its
own module does), grid_sample. In f32, and under bf16 autocast, where the original op, which has no 16-bit
kernels, gets its inputs cast to f32 (the usual workaround) and DCNv4 its packed input in the
projection's bf16. Agreement: output and input gradients against the same block in the same mode
with the grid_sample core computed in f32 (under autocast: on the projections' bf16 outputs, its
output rounded to bf16 as any core's is), so that the check sees the core's own error and not the
projections' bf16 rounding, which moves every core's result alike (1.3e-2 output, 6.3e-2 input
gradients on an H200 against the f32 block, the original op's f32 kernels included); the
difference to the f32 block is printed too."""
import torch
import torch.nn.functional as F

from bench import LEVELS, S, median_ms, msda_grid_sample, rel
from compare import TOLS

D_MODEL, HEADS, POINTS, BATCH = 256, 8, 4, 2
NL = len(LEVELS)


def core_fn(name, peers, shapes, starts):
    """(value, locations, logits) -> output (N, Lq, C) for one core."""
    import msda

    def weights(z):
        return F.softmax(z, -1).view(*z.shape[:3], NL, POINTS)
    if name == "msda":
        return lambda v, l, z: msda.ms_deform_attn(v, shapes, starts, l, weights(z))
    if name == "msdasm":
        return lambda v, l, z: msda.ms_deform_attn(v, shapes, starts, l,
                                                   z.view(*z.shape[:3], NL, POINTS),
                                                   weights_are_logits=True)
    if name == "orig":
        fn = peers["orig"]

        def orig(v, l, z):
            out = fn.apply(v.float(), shapes, starts, l.float(), weights(z).float(), 64)
            return out.to(v.dtype)
        return orig
    if name == "dcnv4":
        fn = peers["dcnv4"]
        return lambda v, l, z: fn.apply(v, shapes, starts,
                                        torch.cat([l.flatten(-3), z], -1).to(v.dtype), 64, POINTS)
    if name == "gs32":  # the reference: grid_sample in f32 whatever the mode

        def gs32(v, l, z):
            with torch.autocast(v.device.type, enabled=False):
                return msda_grid_sample(v.float(), l.float(), weights(z.float())).to(v.dtype)
        return gs32
    return lambda v, l, z: msda_grid_sample(v, l.to(v.dtype), weights(z).to(v.dtype))


def attention_block(layer, core, query, ref, src, shapes):
    """The body of MSDeformAttn.forward with the core swapped."""
    n, lq, _ = query.shape
    value = layer.value_proj(src).view(n, S, HEADS, D_MODEL // HEADS)
    offsets = layer.sampling_offsets(query).view(n, lq, HEADS, NL, POINTS, 2)
    logits = layer.attention_weights(query).view(n, lq, HEADS, NL * POINTS)
    normalizer = torch.stack([shapes[..., 1], shapes[..., 0]], -1)
    loc = ref[:, :, None, :, None, :] + offsets / normalizer[None, None, None, :, None, :]
    return layer.output_proj(core(value, loc, logits))


def run(peers, reps, warmup):
    """Prints the figure; returns msda's failures (disagreement or a failed call)."""
    import msda
    torch.manual_seed(7)
    layer = msda.MSDeformAttn(d_model=D_MODEL, n_levels=NL, n_heads=HEADS, n_points=POINTS).cuda()
    with torch.no_grad():
        layer.sampling_offsets.weight.normal_(0, 0.01)
        layer.attention_weights.weight.normal_(0, 0.05)
    shapes = torch.tensor(LEVELS, device="cuda")
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    refs = []
    for h, w in LEVELS:
        ys, xs = torch.meshgrid((torch.arange(h, device="cuda") + 0.5) / h,
                                (torch.arange(w, device="cuda") + 0.5) / w, indexing="ij")
        refs.append(torch.stack([xs.reshape(-1), ys.reshape(-1)], -1))
    ref = torch.cat(refs)[None, :, None, :].expand(BATCH, S, NL, 2)
    src = torch.randn(BATCH, S, D_MODEL, device="cuda")
    query = src + torch.randn(BATCH, S, D_MODEL, device="cuda") * 0.1  # src + position embedding
    gout = torch.randn(BATCH, S, D_MODEL, device="cuda")

    def run_core(core, autocast, q, s):
        with torch.autocast(q.device.type, dtype=torch.bfloat16, enabled=autocast):
            return attention_block(layer, core, q, ref, s, shapes)

    names = ["msda", "msdasm"] + [p for p in ("orig", "dcnv4") if p in peers] + ["gs"]
    print()
    print(f"encoder layer attention block: batch {BATCH}, Lq = S = {S}, d_model {D_MODEL}, "
          f"{HEADS} heads, {NL} levels, {POINTS} points; eager (CUDA events), ms, medians of {reps}")
    hdr = (f"{'mode':<14} {'core':<6} {'fwd':>9} {'fwd+bwd':>9} {'x msda f+b':>10} {'out diff':>9} {'grad diff':>9}"
           f" {'out vs f32':>10} {'grad vs f32':>11}")
    print(hdr)
    print("-" * len(hdr))
    failures = []

    def reference(autocast):
        """The gs32 core's block in this mode: output and the query and input gradients, in f32."""
        q, s = (t.clone().requires_grad_(True) for t in (query, src))
        out = run_core(core_fn("gs32", peers, shapes, starts), autocast, q, s)
        grads = torch.autograd.grad(out, [q, s], gout.to(out.dtype))
        return out.float(), [g.float() for g in grads]

    def diffs(out, grads, ref):
        return rel(out.float(), ref[0]), max(rel(g.float(), r) for g, r in zip(grads, ref[1]))

    ref_f32 = reference(False)
    for mode, autocast in (("f32", False), ("bf16 autocast", True)):
        ref_mode = reference(True) if autocast else ref_f32
        base = None
        for name in names:
            core = core_fn(name, peers, shapes, starts)
            q, s = (t.clone().requires_grad_(True) for t in (query, src))
            try:
                out = run_core(core, autocast, q, s)
                grads = torch.autograd.grad(out, [q, s], gout.to(out.dtype))
                e_out, e_grad = diffs(out, grads, ref_mode)
                f32_out, f32_grad = diffs(out, grads, ref_f32)

                def fwd():
                    with torch.no_grad():
                        run_core(core, autocast, q, s)

                def fb():
                    o = run_core(core, autocast, q, s)
                    torch.autograd.grad(o, [q, s], gout.to(o.dtype))
                t_fwd = median_ms(fwd, reps, warmup)
                t_fb = median_ms(fb, reps, warmup)
            except Exception as exc:
                print(f"{mode:<14} {name:<6} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
                torch.cuda.synchronize()
                if name in ("msda", "msdasm"):
                    failures.append(f"encoder layer {mode}: {name} failed: {exc}")
                continue
            tol = TOLS[torch.bfloat16] if autocast else 1e-3
            if name == "msda":
                base = t_fb
            if name in ("msda", "msdasm"):
                if not (e_out < tol and e_grad < tol):
                    failures.append(f"encoder layer {mode}: {name} differs from grid_sample in f32 "
                                    f"({e_out:.1e}, {e_grad:.1e}; tolerance {tol:.0e})")
            ratio = f"{t_fb / base:.2f}" if base else "-"
            print(f"{mode:<14} {name:<6} {t_fwd:>9.3f} {t_fb:>9.3f} {ratio:>10} {e_out:>9.1e} {e_grad:>9.1e}"
                  f" {f32_out:>10.1e} {f32_grad:>11.1e}", flush=True)
    print("diff: relative to the same block in the same mode with the grid_sample core in f32 (output; largest"
          " of the query and input gradients), msda's checked against 1e-3 in f32 and %.0e under autocast;"
          " vs f32: relative to the block in f32 with that core, bf16's projections included;"
          " orig under autocast runs its f32 kernels on inputs cast to f32" % TOLS[torch.bfloat16])
    return failures
