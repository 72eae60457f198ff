"""The fused softmax (weights_are_logits=True) on the CUDA path: run on a machine with a GPU
(skipped elsewhere). Against the f64 reference (torch.softmax, then grid_sample) and against the
CPU path, every dtype and mixed precision, the vector and scalar kernels, the level table on the
GPU (every level of the 16-bit value gradient in the f32 buffer: the all-buffer kernels), rows
torch.softmax makes NaN, a CUDA graph, and the module under autocast."""
import pytest
import torch

import msda
from reference import make_inputs, ms_deform_attn_reference, rel_err

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

SHAPES = [(13, 17), (7, 9), (4, 5), (2, 3)]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def _case(dtype, seed, coord_dtype=None, **kw):
    """Op inputs on the GPU with logits in [-4, 4] for attention_weights."""
    value, shapes, starts, loc, w = make_inputs(SHAPES, dtype=dtype, device="cuda", seed=seed, **kw)
    g = torch.Generator().manual_seed(seed + 1)
    x = (torch.rand(w.shape, generator=g, dtype=torch.float64) * 8 - 4)
    cdt = coord_dtype or dtype
    return value, shapes, starts, loc.to(cdt), x.to(device="cuda", dtype=cdt)


def _fused(value, shapes, starts, loc, x):
    return msda.ms_deform_attn(value, shapes, starts, loc, x, weights_are_logits=True)


def _reference(value, shapes, starts, loc, x):
    w = torch.softmax(x.reshape(*x.shape[:3], -1), -1).view(x.shape)
    return ms_deform_attn_reference(value, SHAPES, loc, w)


def _run(fn, value, shapes, starts, loc, x, grad_out):
    vs = [t.detach().clone().requires_grad_(True) for t in (value, loc, x)]
    out = fn(vs[0], shapes, starts, vs[1], vs[2])
    out.backward(grad_out)
    return out.detach(), [v.grad for v in vs]


def _on_cpu(*ts):
    return [t.detach().cpu() for t in ts]


@pytest.mark.parametrize("dtype", list(TOL))
def test_cuda_fused_matches_reference(dtype):
    value, shapes, starts, loc, x = _case(dtype, 120, batch=3, queries=40, heads=4, channels=32,
                                          points=4)
    grad_out = torch.randn(3, 40, 128, device="cuda").to(dtype)
    out, grads = _run(_fused, value, shapes, starts, loc, x, grad_out)
    assert out.dtype == dtype and all(g.dtype == dtype and g.is_cuda for g in grads)
    cpu = [t.double().cpu() for t in (value, loc, x)]
    ref_out, ref_grads = _run(_reference, cpu[0], None, None, cpu[1], cpu[2],
                              grad_out.double().cpu())
    tol = TOL[dtype]
    assert rel_err(out, ref_out) < tol
    for name, g, r in zip(("value", "locations", "logits"), grads, ref_grads):
        assert rel_err(g, r) < 4 * tol, name


@pytest.mark.parametrize("channels", [32, 3])  # vectorised and scalar kernels
@pytest.mark.parametrize("table", ["host", "device"])
def test_cuda_fused_agrees_with_the_cpu_path(channels, table):
    value, shapes, starts, loc, x = _case(torch.float64, 121, channels=channels)
    if table == "host":
        shapes, starts = shapes.cpu(), starts.cpu()
    grad_out = torch.randn(2, 5, 2 * channels, device="cuda", dtype=torch.float64)
    out, grads = _run(_fused, value, shapes, starts, loc, x, grad_out)
    cpu_out, cpu_grads = _run(_fused, *_on_cpu(value, shapes, starts, loc, x), grad_out.cpu())
    assert rel_err(out, cpu_out) < 1e-12
    for g, c in zip(grads, cpu_grads):
        assert rel_err(g, c) < 1e-12


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("table", ["host", "device"])
def test_cuda_fused_16_bit_against_the_cpu_path(dtype, table):
    # Many queries on few pixels: the mixed and all-buffer strategies of the 16-bit backward
    # (a device table buffers every level), with f32 logits and locations (autocast's types).
    value, shapes, starts, loc, x = _case(dtype, 122, coord_dtype=torch.float32, batch=2,
                                          queries=300, heads=8, channels=32, points=4)
    if table == "host":
        shapes, starts = shapes.cpu(), starts.cpu()
    grad_out = torch.randn(2, 300, 256, device="cuda").to(dtype)
    out, grads = _run(_fused, value, shapes, starts, loc, x, grad_out)
    assert [g.dtype for g in grads] == [dtype, torch.float32, torch.float32]
    cpu_out, cpu_grads = _run(_fused, *_on_cpu(value, shapes, starts, loc, x), grad_out.cpu())
    tol = TOL[dtype]
    assert rel_err(out, cpu_out) < tol
    assert rel_err(grads[0], cpu_grads[0]) < 4 * tol
    assert rel_err(grads[1], cpu_grads[1]) < 1e-4
    assert rel_err(grads[2], cpu_grads[2]) < 1e-4


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("special", ["all -inf", "nan", "+inf"])
def test_cuda_special_rows_as_the_cpu_path(dtype, special):
    value, shapes, starts, loc, x = _case(dtype, 123, margin=0.0)
    x[0, 1, 1, 0, 0] = -float("inf")
    row = x[1, 2, 0]
    if special == "all -inf":
        row.fill_(-float("inf"))
    else:
        row[1, 2] = float("nan") if special == "nan" else float("inf")
    grad_out = torch.randn(2, 5, 8, device="cuda").to(dtype)
    out, grads = _run(_fused, value, shapes, starts, loc, x, grad_out)
    cpu_out, cpu_grads = _run(_fused, *_on_cpu(value, shapes, starts, loc, x), grad_out.cpu())
    for g, c in zip([out] + grads, [cpu_out] + cpu_grads):
        assert torch.equal(torch.isnan(g.cpu()), torch.isnan(c)), "NaN in other places"
        finite = ~torch.isnan(c)
        assert rel_err(g.cpu()[finite], c[finite]) < 4 * TOL[dtype]
    assert torch.isnan(out.view(2, 5, 2, 4)[1, 2, 0]).all()


def test_cuda_graph_replay():
    value, shapes, starts, loc, x = _case(torch.float32, 124)
    out = _fused(value, shapes, starts, loc, x)  # checks the table once, outside the capture
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph):
            captured = _fused(value, shapes, starts, loc, x)
    torch.cuda.current_stream().wait_stream(stream)
    x.mul_(0.5)  # new logits, same memory
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(captured, _fused(value, shapes, starts, loc, x)) < 1e-6
    assert rel_err(captured, out) > 1e-3


def test_cuda_gradcheck_f64():
    value, shapes, starts, loc, w = make_inputs([(3, 4), (2, 2)], batch=2, queries=3, heads=2,
                                                channels=3, points=2, dtype=torch.float64,
                                                device="cuda", seed=125)
    x = torch.randn(w.shape, dtype=torch.float64, device="cuda") * 2
    inputs = [t.requires_grad_(True) for t in (value, loc, x)]
    fn = lambda v, l, a: _fused(v, shapes, starts, l, a)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


def test_cuda_module_under_autocast():
    torch.manual_seed(126)
    plain = msda.MSDeformAttn(d_model=64, n_levels=4, n_heads=2, n_points=4).cuda()
    fused = msda.MSDeformAttn(d_model=64, n_levels=4, n_heads=2, n_points=4,
                              fused_softmax=True).cuda()
    with torch.no_grad():
        for p in plain.parameters():
            p.normal_(0, 0.2)
    fused.load_state_dict(plain.state_dict())
    query = torch.randn(2, 30, 64, device="cuda")
    reference = torch.rand(2, 30, 4, 2, device="cuda")
    flat = torch.randn(2, sum(h * w for h, w in SHAPES), 64, device="cuda")
    shapes = torch.tensor(SHAPES, device="cuda")
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    with torch.autocast("cuda", dtype=torch.bfloat16):
        a = plain(query, reference, flat, shapes, starts)
        b = fused(query, reference, flat, shapes, starts)
    assert b.dtype == torch.bfloat16
    assert rel_err(b, a) < 2e-2
    b.float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in fused.parameters())


@pytest.mark.compile
@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="torch without custom_op")
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_cuda_compile_fused_with_the_table_on_the_gpu(mode):
    # The logits op (msda::ms_deform_attn_logits) in a whole graph, CUDA graphs included.
    torch._dynamo.reset()
    layer = lambda v, s, st, l, a: torch.tanh(_fused(v * 2, s, st, l, a))
    compiled = torch.compile(layer, mode=mode, fullgraph=True)
    for step in range(4):
        torch.compiler.cudagraph_mark_step_begin()
        value, shapes, starts, loc, x = _case(torch.float32, 130 + step)
        got = [t.clone().requires_grad_(True) for t in (value, loc, x)]
        out = compiled(got[0], shapes, starts, got[1], got[2])
        out.sum().backward()
        out = out.detach().clone()
        ref = [t.clone().requires_grad_(True) for t in (value, loc, x)]
        ref_out = layer(ref[0], shapes, starts, ref[1], ref[2])
        ref_out.sum().backward()
        assert rel_err(out, ref_out) < 1e-5, step
        for g, r in zip(got, ref):
            assert rel_err(g.grad, r.grad) < 1e-5, step
