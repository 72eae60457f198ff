"""msda.ms_deform_attn_points_per_level against transformers' own multi_scale_deformable_attention_v2
(RT-DETR v2's; D-FINE's is the same code) on the same random inputs: outputs and the gradients of
value, weights and (bilinear) locations, for one point count on every level and for counts that
differ, both methods, in f64, and in f32 and bf16 against f64; "discrete" as the bilinear sample at
the pixel's centre; the uniform case a view; errors; torch.compile; on a GPU (skipped without one)
the same, and a CUDA graph.

Locations are random, so none falls on a pixel centre (where the bilinear gradient has a kink)
or on a rounding boundary of "discrete"; they spread past [0, 1] so that points partly and
wholly outside the maps are covered."""
import pytest
import torch

import msda
from msda import _points_per_level, _torch_ops
from reference import rel_err

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
    op = _points_per_level.ms_deform_attn
    monkeypatch.setattr(_points_per_level, "ms_deform_attn", lambda *a: seen.append(a[3].dtype) or op(*a))
    shapes, value, loc, w = _inputs(points, seed=11)
    loc32, w32 = loc.float(), w.float()
    want_in = [value.to(dtype).double().requires_grad_(), loc32.double().requires_grad_(), w32.double().requires_grad_()]
    want = own(want_in[0], shapes, want_in[1], want_in[2], points, METHODS[method])
    got_in = [value.to(dtype).requires_grad_(), loc32.clone().requires_grad_(), w32.clone().requires_grad_()]
    got = msda.ms_deform_attn_points_per_level(got_in[0], shapes, None, got_in[1], got_in[2], points, method)
    assert got.dtype == dtype and seen == [torch.float32]  # the pixel centres too: f32, not rounded to 16 bits
    assert rel_err(got, want) < tol
    for name, a, b in zip(("value", "locations", "weights"), _grads(got, got_in), _grads(want, want_in)):
        if method == "discrete" and name == "locations":
            assert a is None and b is None
            continue
        if name != "value":
            assert a.dtype == torch.float32  # never rounded to 16 bits
        assert rel_err(a, b) < tol * 4, name


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_a_bilinear_sample_at_a_pixel_centre_is_that_pixel(dtype):
    """What "discrete" rests on: msda's sample at ((ix + 0.5) / W, (iy + 0.5) / H) is value[iy, ix],
    on maps whose sides are not powers of two: there (ix + 0.5) / W is rounded, and the kernel's
    x * W - 0.5 lands a few ulp of W off ix, which weighs the neighbour by that much (measured: 4.6e-5
    of the values' size in f32 and 1.2e-13 in f64 on the 333-wide map)."""
    shapes = [(3, 7), (11, 5), (1, 333), (97, 1)]
    table = torch.tensor(shapes)
    starts = torch.tensor([0, 21, 76, 409])
    value = torch.randn(1, 506, 1, 3, generator=torch.Generator().manual_seed(5), dtype=dtype)
    for level, (h, w) in enumerate(shapes):
        iy, ix = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        centres = torch.stack(((ix.flatten().to(dtype) + 0.5) / w, (iy.flatten().to(dtype) + 0.5) / h), -1)
        loc = torch.full((1, h * w, 1, len(shapes), 1, 2), -5.0, dtype=dtype)  # other levels: outside
        loc[0, :, 0, level, 0] = centres
        weights = torch.zeros(1, h * w, 1, len(shapes), 1, dtype=dtype)
        weights[:, :, :, level] = 1
        got = msda.ms_deform_attn(value, table, starts, loc, weights)
        want = value[0, starts[level]:starts[level] + h * w, 0]
        tol = 4 * max(h, w) * torch.finfo(dtype).eps
        assert (got[0] - want).abs().max().item() <= tol * want.abs().max().item(), (h, w)


def test_one_count_on_every_level_is_the_op_on_a_view(monkeypatch):
    seen = []
    op = _points_per_level.ms_deform_attn
    monkeypatch.setattr(_points_per_level, "ms_deform_attn", lambda *a: seen.append(a) or op(*a))
    shapes, value, loc, w = _inputs([4, 4, 4], seed=3)
    msda.ms_deform_attn_points_per_level(value, shapes, None, loc, w, [4, 4, 4])
    (_, _, _, loc_in, w_in), = seen
    assert loc_in.shape == (2, 5, 2, 3, 4, 2) and loc_in.data_ptr() == loc.data_ptr() and loc_in._base is loc
    assert w_in.shape == (2, 5, 2, 3, 4) and w_in._base is w


def test_counts_that_differ_are_padded_with_one_cached_index():
    shapes, value, loc, w = _inputs([3, 6, 3], seed=4)
    _points_per_level._pad_indices.clear()
    msda.ms_deform_attn_points_per_level(value, shapes, None, loc, w, [3, 6, 3])
    index = _points_per_level._pad_indices[((3, 6, 3), loc.device)]
    # level 0: its 3 points, then 3 padding entries; level 1: its 6; level 2: 3 and 3 of padding
    assert index.tolist() == [0, 1, 2, 12, 13, 14, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17]
    msda.ms_deform_attn_points_per_level(value, shapes, None, loc, w, (3, 6, 3))
    assert _points_per_level._pad_indices[((3, 6, 3), loc.device)] is index


def test_wrong_counts_shapes_and_methods_are_named():
    shapes, value, loc, w = _inputs([3, 6, 3], seed=6)
    f = msda.ms_deform_attn_points_per_level
    with pytest.raises(msda.MSDAInputError, match=r"^msda: method 'nearest' is not known; "
                                                  r"ms_deform_attn_points_per_level takes 'bilinear' or 'discrete'$"):
        f(value, shapes, None, loc, w, [3, 6, 3], "nearest")
    with pytest.raises(msda.MSDAInputError, match=r"points_per_level has 2 counts and spatial_shapes 3 levels"):
        f(value, shapes, None, loc, w, [6, 6])
    with pytest.raises(msda.MSDAInputError, match=r"sampling_locations has shape \(2, 5, 2, 12, 2\), expected "
                                                  r"\(N, Lq, M, 11, 2\) for points_per_level \[3, 5, 3\]"):
        f(value, shapes, None, loc, w, [3, 5, 3])
    with pytest.raises(msda.MSDAInputError, match=r"one positive count per level, it is \[3, 0, 3\]"):
        f(value, shapes, None, loc, w, [3, 0, 3])
    with pytest.raises(msda.MSDAInputError, match=r"attention_weights has shape \(2, 5, 2, 11\), expected "
                                                  r"\(2, 5, 2, 12\)"):
        f(value, shapes, None, loc, w[..., 1:], [3, 6, 3])
    with pytest.raises(msda.MSDAInputError, match=r"level_start_index is None beside a spatial_shapes tensor"):
        f(value, torch.tensor(shapes), None, loc, w, [3, 6, 3])
    with pytest.raises(ValueError, match=r"takes sampling_locations \(N, Lq, M, sum\(points_per_level\), 2\)"):
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
def test_on_cuda_a_graph_captures_padded_levels(method):
    """Counts that differ, "discrete" too: after a warm-up call (which makes the cached index and
    sizes), the call is captured in a CUDA graph and replayed on new inputs."""
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
