"""ms_deform_attn(..., weights_are_logits=True): the softmax over each (n, q, m)'s L*P logits
fused into the op. On CPU tensors: against torch.softmax followed by the grid_sample reference
(forward and every gradient, every dtype, mixed precision), gradcheck in f64, rows that
torch.softmax makes NaN, the custom op and torch.compile, the module option and numpy."""
import pytest
import torch

import msda
from msda import _torch_ops
from reference import make_inputs, ms_deform_attn_reference, rel_err

SHAPES = [(6, 7), (3, 4), (2, 2), (1, 1)]


def _logits(w, seed):
    """Logits in [-4, 4] of the weights' shape and dtype (not a softmax: far from uniform)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(w.shape, generator=g, dtype=torch.float64) * 8 - 4).to(w.dtype)


def _softmaxed_reference(value, shapes, starts, loc, logits):
    n, lq, m, levels, points = logits.shape
    w = torch.softmax(logits.reshape(n, lq, m, levels * points), -1).view(logits.shape)
    return ms_deform_attn_reference(value, shapes.tolist(), loc, w)


def _fused(value, shapes, starts, loc, logits):
    return msda.ms_deform_attn(value, shapes, starts, loc, logits, weights_are_logits=True)


def _grads(fn, value, shapes, starts, loc, x, grad_out):
    vs = [t.detach().clone().requires_grad_(True) for t in (value, loc, x)]
    out = fn(vs[0], shapes, starts, vs[1], vs[2])
    out.backward(grad_out)
    return out.detach(), [v.grad for v in vs]


def _case(dtype, seed, **kw):
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=dtype, seed=seed, **kw)
    return value, shapes, starts, loc, _logits(w, seed + 1)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5),
                                       (torch.float16, 2e-3), (torch.bfloat16, 1e-2)])
def test_matches_softmax_then_the_op(dtype, tol):
    value, shapes, starts, loc, x = _case(dtype, 20)
    grad_out = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(21)).to(dtype)
    out, grads = _grads(_fused, value, shapes, starts, loc, x, grad_out)
    assert out.dtype == dtype and all(g.dtype == dtype for g in grads)
    # The reference in f64 on the same (rounded) inputs: what is left is dtype's rounding.
    up = [t.double() for t in (value, loc, x)]
    ref_out, ref_grads = _grads(_softmaxed_reference, up[0], shapes, starts, up[1], up[2],
                                grad_out.double())
    assert rel_err(out, ref_out) < tol
    for name, g, r in zip(("value", "locations", "logits"), grads, ref_grads):
        assert rel_err(g, r) < 2 * tol, name


def test_same_as_the_unfused_op_on_softmaxed_weights():
    value, shapes, starts, loc, x = _case(torch.float64, 22)
    grad_out = torch.randn(2, 5, 8, dtype=torch.float64)
    out, grads = _grads(_fused, value, shapes, starts, loc, x, grad_out)

    def unfused(v, s, st, l, a):
        w = torch.softmax(a.view(*a.shape[:3], -1), -1).view(a.shape)
        return msda.ms_deform_attn(v, s, st, l, w)
    ref_out, ref_grads = _grads(unfused, value, shapes, starts, loc, x, grad_out)
    assert rel_err(out, ref_out) < 1e-13
    for g, r in zip(grads, ref_grads):
        assert rel_err(g, r) < 1e-12
    # The plain op on the logits themselves is another function.
    plain = msda.ms_deform_attn(value, shapes, starts, loc, x)
    assert rel_err(plain, out) > 0.1


@pytest.mark.parametrize("fallback", [False, True])
def test_gradcheck_f64(fallback):
    value, shapes, starts, loc, w = make_inputs([(2, 3), (1, 2)], batch=1, queries=2, heads=2,
                                                channels=2, points=2, dtype=torch.float64,
                                                seed=23)
    x = _logits(w, 24)
    inputs = [t.requires_grad_(True) for t in (value, loc, x)]
    if fallback:  # the autograd.Function that torch before 2.4 runs
        fn = lambda v, l, a: _torch_ops.MSDAFunction.apply(v, shapes, starts, l, a, True)
    else:
        fn = lambda v, l, a: _fused(v, shapes, starts, l, a)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mixed_precision_logits_stay_f32(dtype):
    # autocast's types: value 16-bit, locations and logits float32, used as they are; each
    # gradient in its input's dtype; the result as the f64 reference on those inputs.
    value, shapes, starts, loc, x = _case(torch.float32, 25)
    value16 = value.to(dtype)
    grad_out = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(26)).to(dtype)
    out, grads = _grads(_fused, value16, shapes, starts, loc, x, grad_out)
    assert out.dtype == dtype
    assert [g.dtype for g in grads] == [dtype, torch.float32, torch.float32]
    up = [t.double() for t in (value16, loc, x)]
    ref_out, ref_grads = _grads(_softmaxed_reference, up[0], shapes, starts, up[1], up[2],
                                grad_out.double())
    tol = 2e-3 if dtype == torch.float16 else 1e-2
    assert rel_err(out, ref_out) < tol
    assert rel_err(grads[0], ref_grads[0]) < 2 * tol
    # Only value and grad_output were 16-bit: the f32 gradients are far closer than 16 bits.
    assert rel_err(grads[1], ref_grads[1]) < 1e-4
    assert rel_err(grads[2], ref_grads[2]) < 1e-4
    rounded = _fused(value16, shapes, starts, loc, x.to(dtype))
    assert not torch.equal(out, rounded), "the f32 logits were rounded to 16 bits"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("special", ["all -inf", "nan", "+inf"])
def test_special_rows_as_torch_softmax(dtype, special):
    value, shapes, starts, loc, x = _case(dtype, 27, margin=0.0)  # every point inside
    x[0, 1, 1, 0, 0] = -float("inf")  # one -inf: an ordinary row, that point weighs 0
    row = x[1, 2, 0]
    if special == "all -inf":
        row.fill_(-float("inf"))
    else:
        row[1, 2] = float("nan") if special == "nan" else float("inf")
    grad_out = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(28)).to(dtype)
    out, grads = _grads(_fused, value, shapes, starts, loc, x, grad_out)
    # torch.softmax makes exactly that row NaN; the op follows it through.
    w = torch.softmax(x.double().view(2, 5, 2, -1), -1)
    assert torch.isnan(w[1, 2, 0]).all() and not torch.isnan(w[1, 2, 1]).any()
    out = out.view(2, 5, 2, 4)
    assert torch.isnan(out[1, 2, 0]).all()
    assert not torch.isnan(out[1, 2, 1]).any()
    nan_out = torch.isnan(out).clone()
    nan_out[1, 2, 0] = False
    assert not nan_out.any()
    grad_loc, grad_x = grads[1], grads[2]
    assert torch.isnan(grad_x[1, 2, 0]).all() and torch.isnan(grad_loc[1, 2, 0]).all()
    finite = torch.ones(2, 5, 2, dtype=torch.bool)
    finite[1, 2, 0] = False
    assert torch.isfinite(grad_x[finite]).all() and torch.isfinite(grad_loc[finite]).all()
    assert grad_x[0, 1, 1, 0, 0] == 0  # the lone -inf logit
    # The finite rows as the reference gives them.
    keep = x.double().clone()
    keep[1, 2, 0] = 0.0
    ref_out, ref_grads = _grads(_softmaxed_reference, value.double(), shapes, starts,
                                loc.double(), keep, grad_out.double())
    tol = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 2e-2)
    assert rel_err(out[finite], ref_out.view(2, 5, 2, 4)[finite]) < tol
    assert rel_err(grad_x[finite], ref_grads[2][finite]) < 2 * tol


def test_keyword_only_and_default_off():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=29)
    with pytest.raises(TypeError):
        msda.ms_deform_attn(value, shapes, starts, loc, w, 64, True)
    assert torch.equal(msda.ms_deform_attn(value, shapes, starts, loc, w),
                       msda.ms_deform_attn(value, shapes, starts, loc, w,
                                           weights_are_logits=False))


@pytest.mark.skipif(not _torch_ops.HAS_CUSTOM_OP, reason="torch without torch.library.custom_op")
def test_registered_as_its_own_custom_op():
    value, shapes, starts, loc, x = _case(torch.float32, 30)
    out = torch.ops.msda.ms_deform_attn_logits(value, shapes, starts, loc, x)
    assert torch.equal(out, _fused(value, shapes, starts, loc, x))
    torch.library.opcheck(torch.ops.msda.ms_deform_attn_logits.default,
                          (value, shapes, starts, loc.requires_grad_(True),
                           x.requires_grad_(True)))


@pytest.mark.compile
@pytest.mark.skipif(not _torch_ops.HAS_CUSTOM_OP, reason="torch without torch.library.custom_op")
def test_compile_fullgraph():
    torch._dynamo.reset()
    value, shapes, starts, loc, x = _case(torch.float32, 31)
    compiled = torch.compile(lambda v, s, st, l, a: torch.tanh(_fused(v, s, st, l, a)),
                             backend="aot_eager", fullgraph=True)
    got = [t.clone().requires_grad_(True) for t in (value, loc, x)]
    compiled(got[0], shapes, starts, got[1], got[2]).sum().backward()
    ref = [t.clone().requires_grad_(True) for t in (value, loc, x)]
    torch.tanh(_softmaxed_reference(ref[0], shapes, starts, ref[1], ref[2])).sum().backward()
    for g, r in zip(got, ref):
        assert rel_err(g.grad, r.grad) < 1e-5


def test_module_option_is_the_same_layer():
    torch.manual_seed(32)
    plain = msda.MSDeformAttn(d_model=16, n_levels=2, n_heads=2, n_points=2)
    fused = msda.MSDeformAttn(d_model=16, n_levels=2, n_heads=2, n_points=2, fused_softmax=True)
    assert not plain.fused_softmax
    with torch.no_grad():
        for p in plain.parameters():
            p.normal_(0, 0.3)
    fused.load_state_dict(plain.state_dict())  # same parameters, same checkpoints
    shapes = torch.tensor([(4, 5), (2, 3)])
    starts = torch.tensor([0, 20])
    query, reference, flat = torch.randn(2, 6, 16), torch.rand(2, 6, 2, 2), torch.randn(2, 26, 16)
    a, b = plain(query, reference, flat, shapes, starts), fused(query, reference, flat, shapes,
                                                               starts)
    assert rel_err(b, a) < 1e-6
    b.sum().backward()
    a.sum().backward()
    for (name, p), q in zip(fused.named_parameters(), plain.parameters()):
        assert rel_err(p.grad, q.grad) < 1e-5, name


def test_numpy_cpu_path():
    value, shapes, starts, loc, x = _case(torch.float64, 33)
    grad_out = torch.randn(2, 5, 8, dtype=torch.float64)
    out = msda.cpu_forward(value.numpy(), shapes.numpy(), starts.numpy(), loc.numpy(), x.numpy(),
                           weights_are_logits=True)
    grads = msda.cpu_backward(value.numpy(), shapes.numpy(), starts.numpy(), loc.numpy(),
                              x.numpy(), grad_out.numpy(), weights_are_logits=True)
    ref_out, ref_grads = _grads(_fused, value, shapes, starts, loc, x, grad_out)
    assert rel_err(torch.from_numpy(out), ref_out) < 1e-13
    for g, r in zip(grads, ref_grads):
        assert rel_err(torch.from_numpy(g), r) < 1e-13
