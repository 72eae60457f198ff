"""The CUDA path: run on a machine with a GPU (skipped elsewhere)."""
import threading

import pytest
import torch

import msda
from msda import _torch_ops
from reference import make_inputs, ms_deform_attn_reference, rel_err

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

SHAPES = [(13, 17), (7, 9), (4, 5), (2, 3)]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def _run(fn, value, shapes, starts, loc, w, grad_out):
    vs = [t.detach().clone().requires_grad_(True) for t in (value, loc, w)]
    out = fn(vs[0], shapes, starts, vs[1], vs[2])
    out.backward(grad_out)
    return out.detach(), [v.grad for v in vs]


@pytest.mark.parametrize("dtype", list(TOL))
def test_cuda_matches_reference(dtype):
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=3, queries=40, heads=4,
                                                channels=32, points=4, dtype=dtype,
                                                device="cuda", seed=80)
    grad_out = torch.randn(3, 40, 128, device="cuda").to(dtype)
    out, grads = _run(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    assert out.dtype == dtype and out.device == value.device
    # The reference on the same (rounded) inputs, in f64 on the CPU.
    cpu = [t.double().cpu() for t in (value, loc, w)]
    ref_out, ref_grads = _run(lambda v, s, st, l, a: ms_deform_attn_reference(
        v, SHAPES, l, a), cpu[0], None, None, cpu[1], cpu[2], grad_out.double().cpu())
    tol = TOL[dtype]
    assert rel_err(out, ref_out) < tol
    for name, g, r in zip(("value", "locations", "weights"), grads, ref_grads):
        assert g.dtype == dtype and g.is_cuda
        assert rel_err(g, r) < 4 * tol, name


@pytest.mark.parametrize("logits", [False, True])
@pytest.mark.parametrize("grad_scale,weight_scale",
                         [(1e-30, 1.0), (1e-6, 1e-6), (1.0, 1.0), (1.0, 1e3), (1e30, 1.0)])
def test_bf16_value_gradient_is_as_accurate_at_any_scale(grad_scale, weight_scale, logits):
    # On sm_90 bf16's value gradient adds as f16 scaled from grad_output's and the weights'
    # largest magnitudes (kernels/msda_device.cuh, MSDA_BF16_HALF_SUMS), on the levels where
    # few points meet (level 0 here; level 3, with 1333 adds an element, takes the f32 buffer):
    # f16 alone would lose 1e-30 to zero and overflow at 1e30.
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=2, queries=500, heads=4,
                                                channels=32, points=4, dtype=torch.bfloat16,
                                                device="cuda", seed=84)
    w = (w.float() * weight_scale).to(torch.bfloat16)
    grad_out = (torch.randn(2, 500, 128, device="cuda") * grad_scale).to(torch.bfloat16)
    op = lambda v, s, st, l, a: msda.ms_deform_attn(v, s, st, l, a, weights_are_logits=logits)
    out, grads = _run(op, value, shapes, starts, loc, w, grad_out)
    ref_out, ref_grads = _run(op, value.double(), shapes, starts, loc.double(), w.double(),
                              grad_out.double())
    assert torch.isfinite(grads[0]).all()
    assert rel_err(grads[0], ref_grads[0]) < 3e-3
    assert rel_err(out, ref_out) < 3e-3


@pytest.mark.parametrize("channels", [32, 3])  # vectorised and scalar kernels
def test_cuda_agrees_with_the_cpu_path(channels):
    value, shapes, starts, loc, w = make_inputs(SHAPES, channels=channels, dtype=torch.float64,
                                                device="cuda", seed=81)
    grad_out = torch.randn(2, 5, 2 * channels, device="cuda", dtype=torch.float64)
    out, grads = _run(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    cpu_out, cpu_grads = _run(msda.ms_deform_attn, value.cpu(), shapes.cpu(), starts.cpu(),
                              loc.cpu(), w.cpu(), grad_out.cpu())
    assert rel_err(out, cpu_out) < 1e-12
    for g, c in zip(grads, cpu_grads):
        assert rel_err(g, c) < 1e-12


def test_level_table_on_the_host_or_the_device():
    value, shapes, starts, loc, w = make_inputs(SHAPES, device="cuda", seed=82)
    on_device = msda.ms_deform_attn(value, shapes, starts, loc, w)
    on_host = msda.ms_deform_attn(value, shapes.cpu(), starts.cpu(), loc, w)
    assert torch.equal(on_device, on_host)


def test_runs_on_the_current_stream():
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=8, queries=500, heads=8,
                                                channels=32, points=4, device="cuda", seed=83)
    expected = msda.ms_deform_attn(value, shapes, starts, loc, w)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = msda.ms_deform_attn(value, shapes, starts, loc, w)
        # Consumed on the same stream: correct only if the op was enqueued on it.
        total = out.double().sum()
    torch.cuda.current_stream().wait_stream(side)
    assert total.item() == pytest.approx(expected.double().sum().item(), rel=1e-12)


def test_a_new_thread_without_cuda_calls_gets_a_context():
    value, shapes, starts, loc, w = make_inputs(SHAPES, device="cuda", seed=84)
    expected = msda.ms_deform_attn(value, shapes, starts, loc, w)
    box = {}

    def work():
        try:
            box["out"] = msda.ms_deform_attn(value, shapes, starts, loc, w)
        except BaseException as exc:  # reported by the assertion below
            box["error"] = exc
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in box, box.get("error")
    assert torch.equal(box["out"], expected)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device_while_another_is_current():
    value, shapes, starts, loc, w = make_inputs(SHAPES, device="cuda:1", seed=85)
    with torch.cuda.device(0):
        out = msda.ms_deform_attn(value, shapes, starts, loc, w)
    assert out.device == torch.device("cuda:1")
    ref = msda.ms_deform_attn(*(t.cpu() for t in (value, shapes, starts, loc, w)))
    assert rel_err(out, ref) < 1e-5


def test_autocast_float16_module():
    m = msda.MSDeformAttn(d_model=64, n_levels=4, n_heads=2, n_points=4).cuda()
    query = torch.randn(2, 30, 64, device="cuda", requires_grad=True)
    reference = torch.rand(2, 30, 4, 2, device="cuda")
    flat = torch.randn(2, sum(h * w for h, w in SHAPES), 64, device="cuda")
    shapes = torch.tensor(SHAPES, device="cuda")
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    with torch.autocast("cuda", dtype=torch.float16):
        out = m(query, reference, flat, shapes, starts)
    assert out.dtype == torch.float16
    out.float().sum().backward()
    assert query.grad.dtype == torch.float32 and torch.isfinite(query.grad).all()
    assert rel_err(out, m(query, reference, flat, shapes, starts)) < 1e-2


@pytest.mark.compile
@pytest.mark.skipif(not _torch_ops.HAS_CUSTOM_OP, reason="torch without custom_op")
def test_compile_inductor_cuda():
    torch._dynamo.reset()
    value, shapes, starts, loc, w = make_inputs(SHAPES, device="cuda", seed=86)
    fn = lambda v, l, a: torch.relu(msda.ms_deform_attn(v, shapes, starts, l, a))
    compiled = torch.compile(fn, fullgraph=True)
    got = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    out = compiled(*got)
    out.sum().backward()
    ref = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    ref_out = fn(*ref)
    ref_out.sum().backward()
    assert rel_err(out, ref_out) < 1e-6
    for g, r in zip(got, ref):
        assert rel_err(g.grad, r.grad) < 1e-6


def test_library_carries_code_for_this_gpu():
    major, minor = torch.cuda.get_device_capability()
    cc = major * 10 + minor
    names = msda.library_info().arch_names
    sass = {int(n[3:]) for n in names if n.startswith("sm_")}
    ptx = {int(n[8:]) for n in names if n.startswith("compute_")}
    # SASS of the same major and an equal or lower minor, or PTX at or below the device's CC.
    assert any(a // 10 == major and a <= cc for a in sass) or any(a <= cc for a in ptx), names


def test_no_kernel_image_error_from_a_library_without_code_for_this_gpu(monkeypatch):
    """MSDA_TEST_FOREIGN_LIBRARY: a libmsda.so built for other architectures only (e.g. for a
    Hopper GPU, the library out of `msda-doctor build --arch sm_80 --out build/variant-sm80/dist`,
    which carries sm_80 SASS and no PTX; tests/gpu/gpu-machine does that)."""
    import os
    foreign = os.environ.get("MSDA_TEST_FOREIGN_LIBRARY")
    if not foreign:
        pytest.skip("MSDA_TEST_FOREIGN_LIBRARY not set")
    monkeypatch.setenv("MSDA_LIBRARY", foreign)
    major, minor = torch.cuda.get_device_capability()
    archs = " ".join(msda.library_info().arch_names)
    value, shapes, starts, loc, w = make_inputs(SHAPES, device="cuda", seed=87)
    with pytest.raises(msda.MSDAError) as info:
        msda.ms_deform_attn(value, shapes, starts, loc, w)
    err = info.value
    assert err.finding_id == "no-kernel-image", str(err)
    assert err.status == msda.Status.NO_KERNEL_IMAGE and err.cuda_result == 209
    text = str(err)
    assert text.startswith("msda [no-kernel-image]: ")
    assert f"this build carries: {archs}" in text
    assert f"compute capability {major}.{minor}, sm_{major}{minor}" in text
    assert f"`msda-doctor build --arch sm_{major}{minor}`" in text
    assert "no kernel image is available for execution on the device" in text


def test_gradcheck_f64_cuda():
    value, shapes, starts, loc, w = make_inputs([(3, 4), (2, 2)], batch=2, queries=3, heads=2,
                                                channels=3, points=2, dtype=torch.float64,
                                                device="cuda", seed=90)
    inputs = [t.requires_grad_(True) for t in (value, loc, w)]
    fn = lambda v, l, a: msda.ms_deform_attn(v, shapes, starts, l, a)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_dropin_module_on_cuda_matches_reference(dtype, tol):
    # `import MultiScaleDeformableAttention as MSDA`, called the way Deformable-DETR's own
    # autograd.Function calls it, on the GPU, against the grid_sample reference in f64.
    from test_dropin import OriginalStyleFunction
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=3, queries=20, heads=2, channels=8,
                                                dtype=dtype, device="cuda", seed=91)
    grad_out = torch.randn(3, 20, 16, device="cuda", dtype=dtype)
    got = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    out = OriginalStyleFunction.apply(got[0], shapes, starts, got[1], got[2], 64)
    out.backward(grad_out)
    ref = [t.detach().double().cpu().requires_grad_(True) for t in (value, loc, w)]
    ref_out = ms_deform_attn_reference(ref[0], SHAPES, ref[1], ref[2])
    ref_out.backward(grad_out.double().cpu())
    assert out.is_cuda and rel_err(out, ref_out) < tol
    for g, r in zip(got, ref):
        assert g.grad.is_cuda and rel_err(g.grad, r.grad) < 4 * tol


def _off_alignment(t):
    """t's values in a contiguous view that starts one element past a 16-byte boundary."""
    view = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:].view(t.shape)
    view.copy_(t)
    assert view.is_contiguous() and view.data_ptr() % 16
    return view


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_tensors_off_their_alignment_get_the_aligned_calls_kernels(dtype):
    # libmsda stages a call whose value or grad_output starts off a 16-byte boundary into
    # padded copies of its own, and its forward's fast path needs the locations' pairs aligned
    # (msda.h); a contiguous view can start anywhere in its storage, so the package copies such
    # a tensor first. The output and the location and weight gradients are sums in an order
    # that follows the kernel (how many lanes a head takes, the forward's path): equal bit for
    # bit to the aligned call's only where both took the same kernels.
    import MultiScaleDeformableAttention as MSDA
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=2, queries=50, heads=4, channels=32,
                                                points=4, dtype=dtype, device="cuda", seed=92)
    grad_out = torch.randn(2, 50, 128, device="cuda").to(dtype)
    odd_value, odd_grad = _off_alignment(value), _off_alignment(grad_out)

    out = MSDA.ms_deform_attn_forward(value, shapes, starts, loc, w, 64)
    grads = MSDA.ms_deform_attn_backward(value, shapes, starts, loc, w, grad_out, 64)
    assert torch.equal(MSDA.ms_deform_attn_forward(odd_value, shapes, starts, loc, w, 64), out)
    odd_loc = _off_alignment(loc)
    assert torch.equal(MSDA.ms_deform_attn_forward(value, shapes, starts, odd_loc, w, 64), out)
    for odd in (MSDA.ms_deform_attn_backward(odd_value, shapes, starts, loc, w, grad_out, 64),
                MSDA.ms_deform_attn_backward(value, shapes, starts, loc, w, odd_grad, 64)):
        assert torch.equal(odd[1], grads[1]) and torch.equal(odd[2], grads[2])
        assert rel_err(odd[0], grads[0]) < TOL[dtype]

    # Through autograd, where the gradient reaches the view's own storage.
    leaf = odd_value.detach().requires_grad_(True)
    locs = loc.clone().requires_grad_(True)
    msda.ms_deform_attn(leaf, shapes, starts, locs, w).backward(grad_out)
    assert leaf.grad.shape == value.shape and torch.equal(locs.grad, grads[1])
    assert rel_err(leaf.grad, grads[0]) < TOL[dtype]


def test_aligned_copies_only_what_starts_off_a_16_byte_boundary():
    from msda._torch_kernels import aligned
    t = torch.randn(2, 64, device="cuda")
    assert aligned(t) is t
    odd = _off_alignment(t)
    copy = aligned(odd)
    assert copy is not odd and copy.data_ptr() % 16 == 0 and torch.equal(copy, t)
    host = torch.empty(65)[1:]
    assert aligned(host) is host  # the CPU path takes any address


# The deterministic backward's bound on grad_value's error against f64: its sums are exact to
# about 2^-40 of the largest add; what is left is each add's own rounding (the bilinear weights
# and products in the value's accumulation type) and the one rounding of each element.
EXACT_TOL = {torch.float32: 1e-6, torch.float64: 1e-11, torch.float16: 1e-3, torch.bfloat16: 5e-3}


def _exact_case(dtype, coord, logits, seed):
    # 3000 queries of 4 points on maps of 6 to 221 positions: hundreds of adds meet at each
    # element, so atomics add in orders that differ from run to run.
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=2, queries=3000, heads=4,
                                                channels=32, points=4, dtype=coord or dtype,
                                                device="cuda", seed=seed)
    value = value.to(dtype)
    if logits:
        w = torch.randn_like(w) * 3
    grad_out = torch.randn(2, 3000, 128, device="cuda").to(dtype)
    op = lambda v, s, st, l, a: msda.ms_deform_attn(v, s, st, l, a, weights_are_logits=logits)
    return op, (value, shapes, starts, loc, w), grad_out


@pytest.mark.parametrize("dtype,coord,logits", [
    (torch.float32, None, False), (torch.float16, None, False), (torch.bfloat16, None, False),
    (torch.bfloat16, torch.float32, False), (torch.float16, torch.float32, True),
    (torch.float64, None, False), (torch.float32, None, True)])
def test_deterministic_backward_gives_the_same_bits_every_run(deterministic_algorithms, dtype,
                                                              coord, logits):
    op, inputs, grad_out = _exact_case(dtype, coord, logits, seed=90)
    out, usual = _run(op, *inputs, grad_out)
    deterministic_algorithms(True)
    runs = [_run(op, *inputs, grad_out) for _ in range(3)]
    for again, grads in runs:
        assert torch.equal(again, out)  # the forward is as always
        assert grads[0].dtype == dtype and grads[1].dtype == (coord or dtype)
        for g, first in zip(grads, runs[0][1]):
            assert torch.equal(g, first)
        # The location and weight gradients: as the usual kernels', whose lanes may take other
        # vector widths (the f32 buffer's 4 against 8 on sm_62 and sm_70), and so sum a point's
        # channels in another order.
        for g, u in zip(grads[1:], usual[1:]):
            assert rel_err(g, u) < EXACT_TOL[coord or dtype]
    value, shapes, starts, loc, w = inputs
    ref_out, ref = _run(op, value.double().cpu(), shapes.cpu(), starts.cpu(), loc.double().cpu(),
                        w.double().cpu(), grad_out.double().cpu())
    exact = rel_err(runs[0][1][0], ref[0])
    assert exact < EXACT_TOL[dtype]
    if dtype != torch.float64:  # f64's atomics keep 53 bits; the integer sums about 47 here
        assert exact <= rel_err(usual[0], ref[0]) * 1.05  # no less accurate than the atomics


def test_deterministic_backward_is_exact_at_any_scale(deterministic_algorithms):
    # The sums' scale comes from the call's largest |grad_output| and |weight|: gradients of
    # 1e-30 keep their precision, 1e30 do not overflow.
    op, (value, shapes, starts, loc, w), grad_out = _exact_case(torch.float32, None, False, 91)
    deterministic_algorithms(True)
    for grad_scale, weight_scale in ((1e-30, 1.0), (1.0, 1e-20), (1e30, 1.0), (1.0, 1e6)):
        scaled_w, scaled_g = w * weight_scale, grad_out * grad_scale
        _, grads = _run(op, value, shapes, starts, loc, scaled_w, scaled_g)
        _, ref = _run(op, value.double(), shapes, starts, loc.double(), scaled_w.double(),
                      scaled_g.double())
        assert torch.isfinite(grads[0]).all()
        assert rel_err(grads[0], ref[0]) < 1e-6, (grad_scale, weight_scale)


@pytest.mark.parametrize("where", ["grad_output", "weights"])
def test_deterministic_backward_gives_inf_and_nan_where_the_sums_do(deterministic_algorithms,
                                                                   where):
    # An inf or NaN add cannot be an integer: its element's flags say +inf, -inf or NaN, as the
    # float sum would have it (inf and -inf meeting: NaN), whatever the order.
    op, (value, shapes, starts, loc, w), grad_out = _exact_case(torch.float32, None, False, 92)
    if where == "grad_output":
        grad_out[0, 5, 3] = float("inf")
        grad_out[0, 6, 3] = float("-inf")
        grad_out[1, 7, 40] = float("nan")
        grad_out[1, 8, 100] = float("inf")
    else:
        w[0, 5, 0, 0, 0] = float("inf")
        w[1, 9, 2, 3, 1] = float("nan")
    _, usual = _run(op, value, shapes, starts, loc, w, grad_out)
    deterministic_algorithms(True)
    _, grads = _run(op, value, shapes, starts, loc, w, grad_out)
    got, expected = grads[0], usual[0]
    assert torch.isnan(expected).any() and torch.isinf(expected).any()
    assert torch.equal(torch.isnan(got), torch.isnan(expected))
    assert torch.equal(torch.isposinf(got), torch.isposinf(expected))
    assert torch.equal(torch.isneginf(got), torch.isneginf(expected))
    finite = torch.isfinite(expected)
    assert rel_err(got[finite], expected[finite]) < 1e-6


def test_deterministic_backward_through_every_entry_point(deterministic_algorithms):
    # autograd, the drop-in module's backward and the custom op torch.compile calls all take
    # the deterministic path: the same bits.
    op, (value, shapes, starts, loc, w), grad_out = _exact_case(torch.float32, None, False, 93)
    _, usual = _run(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    deterministic_algorithms(True)
    _, grads = _run(msda.ms_deform_attn, value, shapes, starts, loc, w, grad_out)
    import MultiScaleDeformableAttention as MSDA
    dropin = MSDA.ms_deform_attn_backward(value, shapes, starts, loc, w, grad_out, 64)
    for g, d in zip(grads, dropin):
        assert torch.equal(g, d)
    if _torch_ops.HAS_CUSTOM_OP:
        custom = torch.ops.msda.ms_deform_attn_backward(value, shapes, starts, loc, w, grad_out)
        for g, c in zip(grads, custom):
            assert torch.equal(g, c)
    # Nothing asks for grad_value: the usual kernels, and the other two as always.
    l, a = (t.detach().clone().requires_grad_(True) for t in (loc, w))
    msda.ms_deform_attn(value, shapes, starts, l, a).backward(grad_out)
    assert torch.equal(l.grad, usual[1]) and torch.equal(a.grad, usual[2])

