"""msda.ms_deform_attn on CPU tensors against the grid_sample reference."""
import threading
import warnings

import pytest
import torch

import msda
from msda import _torch_ops
from reference import make_inputs, ms_deform_attn_reference, rel_err

SHAPES = [(6, 7), (3, 4), (2, 2), (1, 1)]  # 4 levels, odd sizes, one of a single pixel


def _grads(fn, value, shapes_t, starts, loc, w, grad_out):
    vs = [t.detach().clone().requires_grad_(True) for t in (value, loc, w)]
    out = fn(vs[0], shapes_t, starts, vs[1], vs[2])
    out.backward(grad_out)
    return out.detach(), [v.grad for v in vs]


def _reference(value, shapes_t, starts, loc, w):
    return ms_deform_attn_reference(value, shapes_t.tolist(), loc, w)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_forward_matches_reference(dtype, tol):
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=dtype)
    out = msda.ms_deform_attn(value, shapes, starts, loc, w)
    assert out.shape == (2, 5, 2 * 4) and out.dtype == dtype
    assert rel_err(out, _reference(value, shapes, starts, loc, w)) < tol


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_backward_matches_reference(dtype, tol):
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=dtype, seed=1)
    grad_out = torch.randn(2, 5, 8, dtype=dtype, generator=torch.Generator().manual_seed(7))
    out, grads = _grads(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    ref_out, ref_grads = _grads(_reference, value, shapes, starts, loc, w, grad_out)
    assert rel_err(out, ref_out) < tol
    for name, g, r in zip(("value", "locations", "weights"), grads, ref_grads):
        assert g.dtype == dtype
        assert rel_err(g, r) < tol, name


def test_gradcheck_f64():
    value, shapes, starts, loc, w = make_inputs([(2, 3), (1, 2)], batch=1, queries=2, heads=2,
                                                channels=2, points=2, dtype=torch.float64,
                                                seed=3)
    inputs = [t.requires_grad_(True) for t in (value, loc, w)]
    fn = lambda v, l, a: msda.ms_deform_attn(v, shapes, starts, l, a)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


def test_autograd_function_fallback_matches_custom_op():
    # What torch older than 2.4 runs: the same numbers and gradients.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=4)
    grad_out = torch.randn(2, 5, 8, dtype=torch.float64)
    out, grads = _grads(_torch_ops.MSDAFunction.apply, value, shapes, starts, loc, w, grad_out)
    ref_out, ref_grads = _grads(_reference, value, shapes, starts, loc, w, grad_out)
    assert rel_err(out, ref_out) < 1e-12
    for g, r in zip(grads, ref_grads):
        assert rel_err(g, r) < 1e-12


def test_fallback_gradcheck_f64():
    value, shapes, starts, loc, w = make_inputs([(3, 2)], batch=1, queries=2, heads=1,
                                                channels=3, points=2, dtype=torch.float64,
                                                seed=5)
    inputs = [t.requires_grad_(True) for t in (value, loc, w)]
    fn = lambda v, l, a: _torch_ops.MSDAFunction.apply(v, shapes, starts, l, a)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


@pytest.mark.skipif(not _torch_ops.HAS_CUSTOM_OP, reason="torch without torch.library.custom_op")
def test_registered_as_custom_op():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=6)
    out = torch.ops.msda.ms_deform_attn(value, shapes, starts, loc, w)
    assert torch.equal(out, msda.ms_deform_attn(value, shapes, starts, loc, w))
    torch.library.opcheck(torch.ops.msda.ms_deform_attn.default,
                          (value, shapes, starts, loc.requires_grad_(True), w))


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), (torch.bfloat16, 1e-2)])
def test_half_types_against_f32(dtype, tol):
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=dtype, seed=8)
    grad_out = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(9)).to(dtype)
    out, grads = _grads(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    assert out.dtype == dtype and all(g.dtype == dtype for g in grads)
    # f32 on the same (rounded) inputs: what is left is the rounding of results in dtype.
    up = [t.float() for t in (value, loc, w)]
    ref_out, ref_grads = _grads(_reference, up[0], shapes, starts, up[1], up[2],
                                grad_out.float())
    assert rel_err(out, ref_out) < tol
    for name, g, r in zip(("value", "locations", "weights"), grads, ref_grads):
        assert rel_err(g, r) < 2 * tol, name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mixed_precision_keeps_f32_coordinates(dtype):
    # As under autocast: value 16-bit, locations and weights float32. They are used as they are
    # (not rounded to 16 bits), and each gradient comes back in its input's dtype.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float32, seed=10)
    value16 = value.to(dtype).requires_grad_(True)
    loc.requires_grad_(True)
    w.requires_grad_(True)
    out = msda.ms_deform_attn(value16, shapes, starts, loc, w)
    assert out.dtype == dtype
    rounded = msda.ms_deform_attn(value16.detach(), shapes, starts, loc.detach().to(dtype),
                                  w.detach().to(dtype))
    assert not torch.equal(out, rounded), "the f32 locations were rounded to 16 bits"
    out.float().sum().backward()
    assert value16.grad.dtype == dtype
    assert loc.grad.dtype == torch.float32 and w.grad.dtype == torch.float32


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), (torch.bfloat16, 1e-2)])
def test_mixed_precision_against_f64(dtype, tol):
    # The f64 reference on the same inputs (value and grad_output rounded to dtype, locations and
    # weights f32): the output and grad_value carry the rounding of their results, the f32
    # location and weight gradients are far closer than 16-bit ones could be.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float32, seed=16)
    value = value.to(dtype)
    grad_out = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(17)).to(dtype)
    out, grads = _grads(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    up = [t.double() for t in (value, loc, w)]
    ref_out, ref_grads = _grads(_reference, up[0], shapes, starts, up[1], up[2],
                                grad_out.double())
    assert rel_err(out, ref_out) < tol
    assert rel_err(grads[0], ref_grads[0]) < 2 * tol
    for name, g, r in zip(("locations", "weights"), grads[1:], ref_grads[1:]):
        assert g.dtype == torch.float32
        assert rel_err(g, r) < 1e-4, name


def test_coordinates_in_another_type_are_cast():
    # f32 value, f16 locations: computed in f32, gradients back in f16.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float32, seed=18)
    loc16 = loc.half().requires_grad_(True)
    out = msda.ms_deform_attn(value, shapes, starts, loc16, w)
    assert torch.equal(out, msda.ms_deform_attn(value, shapes, starts, loc16.detach().float(), w))
    out.sum().backward()
    assert loc16.grad.dtype == torch.float16


def test_non_contiguous_inputs_and_int32_levels():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=11)
    expected = msda.ms_deform_attn(value, shapes, starts, loc, w)
    # The same tensors as views with other strides, and the level table as int32.
    value_t = value.transpose(0, 1).contiguous().transpose(0, 1)
    loc_t = loc.permute(5, 0, 1, 2, 3, 4).contiguous().permute(1, 2, 3, 4, 5, 0)
    assert not value_t.is_contiguous() and not loc_t.is_contiguous()
    out = msda.ms_deform_attn(value_t, shapes.int(), starts.int(), loc_t, w)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("batch", [1, 3, 65, 130])
def test_any_batch_size_ignores_im2col_step(batch):
    # The original op needed the batch to be a multiple of min(batch, im2col_step).
    value, shapes, starts, loc, w = make_inputs([(3, 3), (2, 1)], batch=batch, queries=2,
                                                seed=12)
    out = msda.ms_deform_attn(value, shapes, starts, loc, w, im2col_step=64)
    assert rel_err(out, _reference(value, shapes, starts, loc, w)) < 1e-5


def test_points_outside_the_maps_contribute_nothing():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=13)
    far = loc.clone()
    far[..., 0] = 1.0 + 1.0 / 1  # at x = 2 every level's w = 2*W - 0.5 >= W
    out = msda.ms_deform_attn(value, shapes, starts, far, w)
    assert torch.count_nonzero(out) == 0
    nan = torch.full_like(loc, float("nan"))
    assert torch.count_nonzero(msda.ms_deform_attn(value, shapes, starts, nan, w)) == 0


def test_empty_batch_and_queries_give_empty_results():
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=0, seed=14)
    value.requires_grad_(True)
    out = msda.ms_deform_attn(value, shapes, starts, loc, w)
    assert out.shape == (0, 5, 8)
    out.sum().backward()
    assert value.grad.shape == value.shape
    value, shapes, starts, loc, w = make_inputs(SHAPES, queries=0, seed=14)
    assert msda.ms_deform_attn(value, shapes, starts, loc, w).shape == (2, 0, 8)


def test_torch_thread_count_does_not_change_results():
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=3, queries=17, seed=15)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = msda.ms_deform_attn(value, shapes, starts, loc, w)
        torch.set_num_threads(4)
        four = msda.ms_deform_attn(value, shapes, starts, loc, w)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, four)


def test_concurrent_calls_from_threads():
    cases = [make_inputs(SHAPES, seed=100 + i) for i in range(4)]
    expected = [msda.ms_deform_attn(*c) for c in cases]
    results = [None] * len(cases)

    def work(i):
        for _ in range(20):
            results[i] = msda.ms_deform_attn(*cases[i])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        assert torch.equal(got, want)


def test_calls_with_nothing_to_differentiate_skip_the_function(monkeypatch):
    # no_grad, inference_mode and inputs that require no grad run the kernels directly: the same
    # output as the autograd path, and no graph. The Function is not called for them.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=11)
    with_grad = msda.ms_deform_attn(value.requires_grad_(True), shapes, starts, loc, w)
    assert with_grad.grad_fn is not None
    value = value.detach()
    calls = []
    real = _torch_ops.MSDAFunction.apply
    monkeypatch.setattr(_torch_ops.MSDAFunction, "apply",
                        lambda *a: calls.append(1) or real(*a))
    outs = [msda.ms_deform_attn(value, shapes, starts, loc, w)]
    with torch.no_grad():
        outs.append(msda.ms_deform_attn(value.requires_grad_(True), shapes, starts, loc, w))
    with torch.inference_mode():
        outs.append(msda.ms_deform_attn(value, shapes, starts, loc, w))
    assert calls == []
    for out in outs:
        assert out.grad_fn is None and not out.requires_grad
        assert torch.equal(out, with_grad.detach())
    msda.ms_deform_attn(value, shapes, starts, loc.requires_grad_(True), w)
    assert calls == [1]


def test_forward_mode_ad_is_refused_rather_than_dropped():
    # The op has no forward-mode derivative: a dual input must fail, not lose its tangent,
    # under no_grad too (forward-mode AD does not follow grad mode).
    import torch.autograd.forward_ad as fwad
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=12)
    for mode in (torch.enable_grad, torch.no_grad):
        with fwad.dual_level(), mode():
            dual = fwad.make_dual(value, torch.ones_like(value))
            with pytest.raises(RuntimeError):
                msda.ms_deform_attn(dual, shapes, starts, loc, w)


def test_torch_func_transforms_get_the_functions_refusal():
    # vmap of a call with nothing to differentiate: torch's own message about autograd.Function
    # and transforms, not a failure to read a batched tensor's data.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=14)
    with pytest.raises(RuntimeError, match="autograd.Function"):
        torch.func.vmap(lambda v: msda.ms_deform_attn(v, shapes, starts, loc, w))(
            torch.stack([value, value]))


def test_create_graph_gives_the_gradients_and_refuses_a_second_derivative():
    # The backward is not itself differentiable: under create_graph=True it must still return
    # the same gradients, and differentiating them must raise rather than give zeros.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=15)
    vs = [t.requires_grad_(True) for t in (value, loc, w)]
    grad_out = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    plain = torch.autograd.grad(msda.ms_deform_attn(vs[0], shapes, starts, vs[1], vs[2]), vs,
                                grad_out)
    graphed = torch.autograd.grad(msda.ms_deform_attn(vs[0], shapes, starts, vs[1], vs[2]), vs,
                                  grad_out, create_graph=True)
    for a, b in zip(plain, graphed):
        assert torch.equal(a, b.detach())
    assert graphed[0].requires_grad
    with pytest.raises(RuntimeError, match="differentiate twice"):
        graphed[0].sum().backward()


def test_level_table_changed_between_forward_and_backward_is_refused():
    # The backward reuses the forward's table: autograd's check of saved tensors must see an
    # in-place change of it and refuse, rather than the backward reading the new numbers.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=13)
    out = msda.ms_deform_attn(value.requires_grad_(True), shapes, starts, loc, w)
    shapes[0, 0] = 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward(torch.ones_like(out))


def test_calls_of_one_problem_share_one_call():
    # prepare checks a combination of shapes, types and devices once and reuses the Call while
    # the table and the library are the same; anything else gets its own.
    from msda import _torch_kernels as tk
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float64, seed=15)
    first = tk.prepare(value, shapes, starts, loc, w)[0]
    assert tk.prepare(value, shapes, starts, loc, w)[0] is first
    assert tk.prepare(value.clone(), shapes, starts, loc.clone(), w.clone())[0] is first
    assert tk.prepare(value, shapes.clone(), starts, loc, w)[0] is not first  # another table
    assert tk.prepare(value, shapes, starts, loc, w, weights_are_logits=True)[0] is not first
    assert tk.prepare(value.float(), shapes, starts, loc, w)[0].cdt == torch.float32
    shapes[0, 0] = shapes[0, 0]  # in place: a new version of the table
    changed = tk.prepare(value, shapes, starts, loc, w)[0]
    assert changed is not first and changed.table is not first.table
    # A combination seen before passed its checks; a new one is checked again.
    with pytest.raises(msda.MSDAInputError, match="sampling_locations has dtype torch.int64"):
        tk.prepare(value, shapes, starts, loc.long(), w)
    with pytest.raises(msda.MSDAInputError, match="attention_weights has shape"):
        tk.prepare(value, shapes, starts, loc, w[:, :, :, :, :1])


def test_alternating_problems_on_one_thread_each_get_their_own_arguments():
    # The per-thread argument structs keep the fields of the last Call they were filled for:
    # calls that alternate between problems must refill them.
    problems = [make_inputs(SHAPES, dtype=torch.float64, seed=16),
                make_inputs([(3, 5), (2, 2)], batch=1, queries=3, heads=2, channels=3,
                            points=3, dtype=torch.float32, seed=17),
                make_inputs(SHAPES, dtype=torch.float32, seed=18)]
    for _ in range(2):
        for value, shapes, starts, loc, w in problems:
            tol = 1e-12 if value.dtype == torch.float64 else 1e-5
            grad_out = torch.randn(value.shape[0], loc.shape[1], value.shape[2] * value.shape[3],
                                   dtype=value.dtype)
            out, grads = _grads(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
            ref_out, ref_grads = _grads(_reference, value, shapes, starts, loc, w, grad_out)
            assert rel_err(out, ref_out) < tol
            for g, r in zip(grads, ref_grads):
                assert rel_err(g, r) < tol


def test_cpu_backward_runs_unchanged_under_deterministic_algorithms(deterministic_algorithms):
    # The CPU backward gives each thread its own (n, m) of grad_value: the same bits, no warning.
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float32, seed=19)
    grad_out = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(20))
    out, grads = _grads(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    deterministic_algorithms(True)
    import MultiScaleDeformableAttention as MSDA
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, again_grads = _grads(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
        dropin = MSDA.ms_deform_attn_backward(value, shapes, starts, loc, w, grad_out, 64)
    assert not [c for c in caught if "msda" in str(c.message)]
    assert torch.equal(again, out)
    for g, r, d in zip(again_grads, grads, dropin):
        assert torch.equal(g, r) and torch.equal(d, r)



@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[
    pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")])])
@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_recomputes_the_same_gradients(reentrant, device):
    # torch.utils.checkpoint, as models put around their encoder layers: the forward runs again
    # during the backward (the non-reentrant kind from saved-tensor hooks, on CUDA in autograd's
    # worker thread: its own per-thread argument structs, the same cached Call).
    from torch.utils.checkpoint import checkpoint
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=torch.float32, device=device,
                                                seed=21)
    grad_out = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(22)).to(device)
    layer = lambda v, l, a: torch.tanh(msda.ms_deform_attn(v * 2, shapes, starts, l, a))
    out, grads = _grads(lambda v, s, st, l, a: layer(v, l, a), value, shapes, starts, loc, w,
                        grad_out)
    kept, kept_grads = _grads(lambda v, s, st, l, a: checkpoint(layer, v, l, a,
                                                                use_reentrant=reentrant),
                              value, shapes, starts, loc, w, grad_out)
    assert torch.equal(kept, out)
    assert torch.equal(kept_grads[1], grads[1]) and torch.equal(kept_grads[2], grads[2])
    if device == "cpu":  # each thread its own (n, m) of grad_value
        assert torch.equal(kept_grads[0], grads[0])
    else:  # atomics, in any order
        assert rel_err(kept_grads[0], grads[0]) < 1e-6
