"""msda.ms_deform_attn_points_per_level against transformers' own multi_scale_deformable_attention_v2
(RT-DETR v2's; D-FINE's is the same code) on the same random inputs: outputs and the gradients of
value, weights and (bilinear) locations, for one point count on every level and for counts that
differ, both methods, in f64, and in f32 and bf16 against f64; counts that differ against the op
on the same points padded with zero weights; "discrete" on pixel edges, outside the map and at
non-finite locations; errors; torch.compile; on a GPU (skipped without one) the same, and a CUDA
graph.

Locations are random, so none falls on a pixel centre (where the bilinear gradient has a kink)
or on a rounding boundary of "discrete"; they spread past [0, 1] so that points partly and
wholly outside the maps are covered."""
import pytest
import torch

import msda
from msda import _points_per_level, _torch_kernels, _torch_ops
from reference import rel_err
from padding import padded, unpadded

v2 = pytest.importorskip("transformers.models.rt_detr_v2.modeling_rt_detr_v2")
own = v2.multi_scale_deformable_attention_v2

SHAPES = [(7, 6), (4, 5), (2, 3), (3, 2)]
POINTS = [[4, 4, 4], [3, 6, 3], [1, 2, 3, 4]]
METHODS = {"bilinear": "default", "discrete": "discrete"}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _inputs(points, *, seed=0, dtype=torch.float64, device="cpu", batch=2, queries=5, heads=2, channels=4):
    g = torch.Generator().manual_seed(seed)
    shapes = SHAPES[:len(points)]
    value = torch.randn(batch, sum(h * w for h, w in shapes), heads, channels, generator=g, dtype=torch.float64)
    loc = torch.rand(batch, queries, heads, sum(points), 2, generator=g, dtype=torch.float64) * 1.4 - 0.2
    w = torch.rand(batch, queries, heads, sum(points), generator=g, dtype=torch.float64)
    return shapes, value.to(device, dtype), loc.to(device), w.to(device)


def _grads(out, inputs, seed=1):
    g_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.autograd.grad(out, inputs, g_out.to(out), allow_unused=True)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("points", POINTS, ids=str)
def test_f64_outputs_and_gradients_are_transformers_own(points, method):
    shapes, value, loc, w = _inputs(points, seed=len(points) + sum(points))
    ours = [t.clone().requires_grad_() for t in (value, loc, w)]
    theirs = [t.clone().requires_grad_() for t in (value, loc, w)]
    got = msda.ms_deform_attn_points_per_level(ours[0], shapes, None, ours[1], ours[2], points, method)
    want = own(theirs[0], shapes, theirs[1], theirs[2], points, METHODS[method])
    assert got.shape == want.shape and got.dtype == torch.float64
    assert rel_err(got, want) < 1e-13
    for name, a, b in zip(("value", "locations", "weights"), _grads(got, ours), _grads(want, theirs)):
        if method == "discrete" and name == "locations":
            assert a is None and b is None  # no graph reaches the locations, in either
        else:
            assert rel_err(a, b) < 1e-12, name
    # the same through a level table of tensors (where a caller has no list)
    table = torch.tensor(shapes)
    starts = torch.cat((table.new_zeros(1), (table[:, 0] * table[:, 1]).cumsum(0)[:-1]))
    again = msda.ms_deform_attn_points_per_level(value, table, starts, loc, w, points, method)
    assert rel_err(again, want) < 1e-13


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)], ids=["f32", "bf16"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("points", POINTS[1:2], ids=str)
def test_f32_and_bf16_values_with_f32_locations_against_f64(points, method, dtype, tol, monkeypatch):
    seen = []
    op = _points_per_level.ms_deform_attn_points
    monkeypatch.setattr(_points_per_level, "ms_deform_attn_points", lambda *a: seen.append(a[3].dtype) or op(*a))
    shapes, value, loc, w = _inputs(points, seed=11)
    loc32, w32 = loc.float(), w.float()
    want_in = [value.to(dtype).double().requires_grad_(), loc32.double().requires_grad_(), w32.double().requires_grad_()]
    want = own(want_in[0], shapes, want_in[1], want_in[2], points, METHODS[method])
    got_in = [value.to(dtype).requires_grad_(), loc32.clone().requires_grad_(), w32.clone().requires_grad_()]
    got = msda.ms_deform_attn_points_per_level(got_in[0], shapes, None, got_in[1], got_in[2], points, method)
    assert got.dtype == dtype and seen == [torch.float32]  # the locations stay f32, never rounded to 16 bits
    assert rel_err(got, want) < tol
    for name, a, b in zip(("value", "locations", "weights"), _grads(got, got_in), _grads(want, want_in)):
        if method == "discrete" and name == "locations":
            assert a is None and b is None
            continue
        if name != "value":
            assert a.dtype == torch.float32  # never rounded to 16 bits
        assert rel_err(a, b) < tol * 4, name


@pytest.mark.parametrize("points", POINTS[1:], ids=str)
def test_counts_that_differ_are_the_op_on_points_padded_with_zero_weights(points):
    """The kernels take sum(points) points a group as they are: the same numbers as the uniform
    op on every level padded to the largest count, gradients included, with no padding made."""
    shapes, value, loc, w = _inputs(points, seed=4)
    table = torch.tensor(shapes)
    starts = torch.cat((table.new_zeros(1), (table[:, 0] * table[:, 1]).cumsum(0)[:-1]))
    ours = [t.clone().requires_grad_() for t in (value, loc, w)]
    got = msda.ms_deform_attn_points_per_level(ours[0], table, starts, ours[1], ours[2], points)
    pl, pw = padded(points, loc, w, torch)
    theirs = [value.clone().requires_grad_(), pl.requires_grad_(), pw.requires_grad_()]
    want = msda.ms_deform_attn(theirs[0], table, starts, theirs[1], theirs[2])
    assert rel_err(got, want) < 1e-14
    a_value, a_loc, a_w = _grads(got, ours)
    b_value, b_loc, b_w = _grads(want, theirs)
    assert rel_err(a_value, b_value) < 1e-14
    assert rel_err(a_loc, unpadded(points, b_loc, torch)) < 1e-14
    assert rel_err(a_w, unpadded(points, b_w, torch)) < 1e-14


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_discrete_on_pixel_edges_outside_and_non_finite_is_transformers_own(dtype):
    """Locations where x * W + 0.5 is a whole number (a pixel edge, where rounding decides), at 0
    and 1, and outside [0, 1] on both sides: the pixel transformers' discrete method takes (its
    integer conversion and clamp). Infinite locations take the edge pixel, as far ones do, and a
    NaN location contributes nothing (transformers' conversion of either is undefined)."""
    points = [2, 3]
    shapes = [(3, 7), (5, 4)]
    value = torch.randn(1, 41, 1, 3, generator=torch.Generator().manual_seed(9), dtype=dtype)
    xs = [k / 7 - 0.5 / 7 for k in range(8)] + [k / 4 - 0.5 / 4 for k in range(5)]
    xs += [0.0, 1.0, -0.3, 1.7, 0.4999, 0.5001, 50.0, -50.0]
    grid = torch.tensor([(x, y) for x in xs for y in xs[::3]], dtype=dtype)
    queries = grid.shape[0]
    loc = grid[None, :, None, None, :].expand(1, queries, 1, sum(points), 2).contiguous()
    w = torch.rand(1, queries, 1, sum(points), generator=torch.Generator().manual_seed(10), dtype=dtype)
    got = msda.ms_deform_attn_points_per_level(value, shapes, None, loc, w, points, "discrete")
    want = own(value, shapes, loc, w, points, "discrete")
    assert rel_err(got, want) < (1e-14 if dtype == torch.float64 else 1e-6)
    far = loc.abs() == 50
    infinite = torch.where(far, loc.sign() * float("inf"), loc)
    assert torch.equal(msda.ms_deform_attn_points_per_level(value, shapes, None, infinite, w, points, "discrete"), got)
    nan_loc = loc.clone()
    nan_loc[0, :, 0, 1, 0] = float("nan")  # the second point of level 0
    masked = w.clone()
    masked[0, :, 0, 1] = 0
    got_nan = msda.ms_deform_attn_points_per_level(value, shapes, None, nan_loc, w, points, "discrete")
    assert rel_err(got_nan, own(value, shapes, loc, masked, points, "discrete")) < 1e-6


def test_the_points_reach_the_kernels_as_they_are(monkeypatch):
    """No copy, no padding: the caller's contiguous locations and weights are what libmsda reads."""
    seen = []
    run = _torch_kernels.run_forward
    monkeypatch.setattr(_torch_kernels, "run_forward", lambda call, v, l, w: seen.append((call, l, w)) or run(call, v, l, w))
    shapes, value, loc, w = _inputs([3, 6, 3], seed=3)
    with torch.no_grad():
        msda.ms_deform_attn_points_per_level(value, shapes, None, loc, w, [3, 6, 3])
    (call, loc_in, w_in), = seen
    assert loc_in.data_ptr() == loc.data_ptr() and w_in.data_ptr() == w.data_ptr()
    assert list(call.plan.points) == [3, 6, 3] and call.sizes.points == 6


def test_wrong_counts_shapes_and_methods_are_named():
    shapes, value, loc, w = _inputs([3, 6, 3], seed=6)
    f = msda.ms_deform_attn_points_per_level
    with pytest.raises(msda.MSDAInputError, match=r"^msda: method 'nearest' is not known; "
                                                  r"ms_deform_attn_points_per_level takes 'bilinear' or 'discrete'$"):
        f(value, shapes, None, loc, w, [3, 6, 3], "nearest")
    with pytest.raises(msda.MSDAInputError, match=r"points_per_level must be one positive count per level \(3\), "
                                                  r"it is \[6, 6\]"):
        f(value, shapes, None, loc, w, [6, 6])
    with pytest.raises(msda.MSDAInputError, match=r"^msda: points_per_level must be a sequence of integers, one "
                                                  r"per level, it is \[3\.0, 6, 3\]"):
        f(value, shapes, None, loc, w, [3.0, 6, 3])  # refused, not truncated
    with pytest.raises(msda.MSDAInputError, match=r"sampling_locations has shape \(2, 5, 2, 12, 2\), expected "
                                                  r"\(2, 5, 2, 11, 2\) from value \(2, 68, 2, 4\) and "
                                                  r"points_per_level \[3, 5, 3\]"):
        f(value, shapes, None, loc, w, [3, 5, 3])
    with pytest.raises(msda.MSDAInputError, match=r"one positive count per level \(3\), it is \[3, 0, 3\]"):
        f(value, shapes, None, loc, w, [3, 0, 3])
    with pytest.raises(msda.MSDAInputError, match=r"attention_weights has shape \(2, 5, 2, 11\), expected "
                                                  r"\(2, 5, 2, 12\)"):
        f(value, shapes, None, loc, w[..., 1:], [3, 6, 3])
    with pytest.raises(msda.MSDAInputError, match=r"level_start_index is None beside a spatial_shapes tensor"):
        f(value, torch.tensor(shapes), None, loc, w, [3, 6, 3])
    with pytest.raises(ValueError, match=r"takes value \(N, S, M, D\), .*sampling_locations \(N, Lq, M, sum\(points_per_level\), 2\)"):
        f(value, shapes, None, loc[..., :1], w, [3, 6, 3])


@pytest.mark.compile
@pytest.mark.skipif(not _torch_ops.HAS_CUSTOM_OP, reason="torch without torch.library.custom_op (before 2.4)")
@pytest.mark.parametrize("method", METHODS)
def test_compile_fullgraph_forward_and_backward(method):
    torch._dynamo.reset()
    points = [3, 6, 3]
    shapes, value, loc, w = _inputs(points, seed=8, dtype=torch.float32)
    table = torch.tensor(shapes)
    starts = torch.tensor([0, 42, 62])

    def layer(value, loc, w):
        out = msda.ms_deform_attn_points_per_level(value * 2, table, starts, loc, w.softmax(-1), points, method)
        return torch.tanh(out)

    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    got_in = [t.float().clone().requires_grad_() for t in (value, loc, w)]
    got = compiled(*got_in)
    want_in = [t.double().clone().requires_grad_() for t in (value, loc.float(), w.float())]
    want = torch.tanh(own(want_in[0] * 2, shapes, want_in[1], want_in[2].softmax(-1), points, METHODS[method]))
    assert rel_err(got, want) < 1e-5
    for name, a, b in zip(("value", "locations", "weights"), _grads(got, got_in), _grads(want, want_in)):
        if method == "discrete" and name == "locations":
            assert a is None and b is None
        else:
            assert rel_err(a, b) < 1e-5, name


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)], ids=["f32", "bf16"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("points", POINTS, ids=str)
def test_on_cuda_against_transformers_own_in_f64(points, method, dtype, tol):
    shapes, value, loc, w = _inputs(points, seed=21, queries=50, channels=32)
    loc32, w32 = loc.float(), w.float()
    want_in = [value.to(dtype).double().requires_grad_(), loc32.double().requires_grad_(), w32.double().requires_grad_()]
    want = own(want_in[0], shapes, want_in[1], want_in[2], points, METHODS[method])
    got_in = [value.to(dtype).cuda().requires_grad_(), loc32.cuda().requires_grad_(), w32.cuda().requires_grad_()]
    got = msda.ms_deform_attn_points_per_level(got_in[0], shapes, None, got_in[1], got_in[2], points, method)
    assert got.is_cuda and got.dtype == dtype
    assert rel_err(got, want) < tol
    for name, a, b in zip(("value", "locations", "weights"), _grads(got, got_in), _grads(want, want_in)):
        if method == "discrete" and name == "locations":
            assert a is None and b is None
        else:
            assert rel_err(a, b) < tol * 4, name


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("method", METHODS)
def test_on_cuda_a_graph_captures_counts_that_differ(method):
    """Counts that differ, "discrete" too: after a warm-up call (which checks the shapes and
    makes the level table), the call is captured in a CUDA graph and replayed on new inputs."""
    points = [3, 6, 3]
    shapes, value, loc, w = [x.cuda() if torch.is_tensor(x) else x for x in _inputs(points, seed=22, dtype=torch.float32)]
    loc, w = loc.float(), w.float()
    f = msda.ms_deform_attn_points_per_level
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f(value, shapes, None, loc, w, points, method)  # warm-up
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = f(value, shapes, None, loc, w, points, method)
    _, new_value, new_loc, new_w = _inputs(points, seed=23)
    value.copy_(new_value)
    loc.copy_(new_loc)
    w.copy_(new_w)
    graph.replay()
    torch.cuda.synchronize()
    want = own(new_value, shapes, new_loc.float().double(), new_w.float().double(), points, METHODS[method])
    assert rel_err(out, want) < 1e-5


@pytest.mark.parametrize("method", METHODS)
def test_finite_differences_in_f64(method):
    """torch.autograd.gradcheck: the kernels' gradients against finite differences of their own
    forward, per-level counts that differ (the locations' too where bilinear; off pixel edges,
    as random locations are)."""
    points = [2, 3, 1]
    shapes, value, loc, w = _inputs(points, seed=31, queries=3, channels=3)
    table = torch.tensor(shapes)
    starts = torch.cat((table.new_zeros(1), (table[:, 0] * table[:, 1]).cumsum(0)[:-1]))
    value.requires_grad_()
    w.requires_grad_()
    loc.requires_grad_(method == "bilinear")
    fn = lambda v, l, a: msda.ms_deform_attn_points_per_level(v, table, starts, l, a, points, method)
    assert torch.autograd.gradcheck(fn, (value, loc, w), eps=1e-6, atol=1e-7, rtol=1e-5)
