"""msda.cpu_forward and msda.cpu_backward with points_per_level and method (libmsda's
level_points and sampling, msda.h ABI 5) on numpy arrays, without torch: outputs and the three
gradients against an f64 reference written here in numpy (bilinear as grid_sample's,
align_corners=False, zeros outside; "discrete" the nearest pixel, trunc(x * W + 0.5) clamped,
found in the library's accumulation type), for counts that differ and one count on every level,
in f64, f32 and (forward) f16; against the old API on the same points padded to the largest
count with zero weights; "discrete" on pixel edges, outside the maps and at non-finite
locations; the logits' softmax over sum(points_per_level); what reaches the C structs; every bad
argument; and a run where torch cannot be imported.

Locations are random and spread past [0, 1], so that points partly and wholly outside the maps
are covered and none falls on a pixel edge of "discrete" (the edge test puts them there)."""
import ctypes
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import msda
from msda import _library
from padding import padded, unpadded

np = pytest.importorskip("numpy")  # the only package these tests need besides msda

SHAPES = [(7, 6), (4, 5), (2, 3)]
POINTS = [[3, 6, 3], [2, 4, 8], [4, 4, 4]]
METHODS = ("bilinear", "discrete")
# The type libmsda finds a point's place in (msda.h): f32 beside f16 and f32 values, f64 beside f64.
ACCUMULATION = {np.float16: np.float32, np.float32: np.float32, np.float64: np.float64}


def _table(shapes):
    starts = np.concatenate(([0], np.cumsum([h * w for h, w in shapes])[:-1])).astype(np.int64)
    return np.array(shapes, dtype=np.int64), starts


def _inputs(points, *, seed, dtype=np.float64, batch=2, queries=5, heads=2, channels=4,
            shapes=SHAPES):
    """value, the level table, locations (N, Lq, M, sum, 2), weights (N, Lq, M, sum) and a
    grad_output, rounded to dtype (the reference computes on the rounded numbers)."""
    rng = np.random.default_rng(seed)
    shapes = shapes[:len(points)]
    spatial = sum(h * w for h, w in shapes)
    value = rng.standard_normal((batch, spatial, heads, channels)).astype(dtype)
    loc = (rng.random((batch, queries, heads, sum(points), 2)) * 1.4 - 0.2).astype(dtype)
    w = rng.random((batch, queries, heads, sum(points))).astype(dtype)
    grad_out = rng.standard_normal((batch, queries, heads * channels)).astype(dtype)
    return (shapes, *_table(shapes), value, loc, w, grad_out)


def _nearest(v, n, acc):
    """The "discrete" pixel of one coordinate: f = v * n + 0.5, each step rounded in acc as
    libmsda rounds it (numpy scalars round every operation), trunc(f) clamped to [0, n - 1]."""
    f = acc(v) * acc(n) + acc(0.5)
    return 0 if f < 1 else n - 1 if f >= n else int(f)


def _reference(value, shapes, loc, w, points, method, grad_out, acc=np.float64):
    """The output and (grad_value, grad_locations, grad_weights) in f64, point by point."""
    value, loc, w, grad_out = (a.astype(np.float64) for a in (value, loc, w, grad_out))
    n_, _, m_, d_ = value.shape
    queries = loc.shape[1]
    level_of = [level for level, count in enumerate(points) for _ in range(count)]
    _, starts = _table(shapes)
    out = np.zeros((n_, queries, m_ * d_))
    gv, gl, gw = np.zeros_like(value), np.zeros_like(loc), np.zeros_like(w)
    for n in range(n_):
        for q in range(queries):
            for m in range(m_):
                g = grad_out[n, q, m * d_:(m + 1) * d_]
                for p, level in enumerate(level_of):
                    (x, y), a = loc[n, q, m, p], w[n, q, m, p]
                    H, W = shapes[level]
                    base = int(starts[level])
                    if method == "discrete":
                        if math.isnan(x) or math.isnan(y):
                            continue
                        s = base + _nearest(y, H, acc) * W + _nearest(x, W, acc)
                        out[n, q, m * d_:(m + 1) * d_] += a * value[n, s, m]
                        gw[n, q, m, p] = g @ value[n, s, m]
                        gv[n, s, m] += a * g
                        continue
                    h, c = y * H - 0.5, x * W - 0.5
                    if not (-1 < h < H and -1 < c < W):
                        continue
                    h0, c0 = math.floor(h), math.floor(c)
                    lh, lw = h - h0, c - c0
                    corners = [(h0, c0, (1 - lh) * (1 - lw)), (h0, c0 + 1, (1 - lh) * lw),
                               (h0 + 1, c0, lh * (1 - lw)), (h0 + 1, c0 + 1, lh * lw)]
                    inside = [0 <= r < H and 0 <= cc < W for r, cc, _ in corners]
                    v = [value[n, base + r * W + cc, m] if ok else np.zeros(d_)
                         for (r, cc, _), ok in zip(corners, inside)]
                    sample = sum(cw * vj for (_, _, cw), vj in zip(corners, v))
                    out[n, q, m * d_:(m + 1) * d_] += a * sample
                    gw[n, q, m, p] = g @ sample
                    d_lw = (1 - lh) * (v[1] - v[0]) + lh * (v[3] - v[2])
                    d_lh = (1 - lw) * (v[2] - v[0]) + lw * (v[3] - v[1])
                    gl[n, q, m, p] = a * W * (g @ d_lw), a * H * (g @ d_lh)
                    for (r, cc, cw), ok in zip(corners, inside):
                        if ok:
                            gv[n, base + r * W + cc, m] += a * cw * g
    return out, (gv, gl, gw)


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 1e-5)],
                         ids=["f64", "f32"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("points", POINTS, ids=str)
def test_forward_and_backward_against_the_reference(points, method, dtype, tol):
    shapes, table, starts, value, loc, w, grad_out = _inputs(points, seed=sum(points) + 7,
                                                             dtype=dtype)
    want, want_grads = _reference(value, shapes, loc, w, points, method, grad_out,
                                  ACCUMULATION[dtype])
    got = msda.cpu_forward(value, table, starts, loc, w, points_per_level=points, method=method)
    assert got.dtype == dtype and got.shape == (2, 5, 8)
    assert rel_err(got, want) < tol
    grads = msda.cpu_backward(value, table, starts, loc, w, grad_out, points_per_level=points,
                              method=method, threads=2)
    for name, g, like, r in zip(("value", "locations", "weights"), grads, (value, loc, w),
                                want_grads):
        assert g.dtype == dtype and g.shape == like.shape, name
        if method == "discrete" and name == "locations":
            # no gradient reaches the locations: libmsda writes +0.0 to every element
            assert not np.any(g) and not np.any(np.signbit(g))
        else:
            assert rel_err(g, r) < 4 * tol, name


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("points", POINTS[:2], ids=str)
def test_f16_forward_against_the_reference(points, method):
    """float16 value, locations and weights (the numpy API casts all three to value's dtype);
    the pixel of "discrete" found in f32 from the float16 locations, as libmsda does."""
    shapes, table, starts, value, loc, w, grad_out = _inputs(points, seed=3, dtype=np.float16)
    want, _ = _reference(value, shapes, loc, w, points, method, grad_out, np.float32)
    got = msda.cpu_forward(value, table, starts, loc, w, points_per_level=points, method=method)
    assert got.dtype == np.float16
    assert rel_err(got, want) < 2e-3


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("points", POINTS, ids=str)
def test_the_same_as_the_old_api_on_points_padded_with_zero_weights(points, method, dtype):
    """sum(points) points a group as they are give the very numbers of the uniform layout with
    every level padded to the largest count (a padded point adds 0 to each sum it reaches);
    [4, 4, 4] is the uniform layout itself, reshaped. "discrete" goes with either layout."""
    shapes, table, starts, value, loc, w, grad_out = _inputs(points, seed=40, dtype=dtype)
    pl, pw = padded(points, loc, w, np)
    got = msda.cpu_forward(value, table, starts, loc, w, points_per_level=points, method=method)
    want = msda.cpu_forward(value, table, starts, pl, pw, method=method)
    np.testing.assert_array_equal(got, want)
    g_value, g_loc, g_w = msda.cpu_backward(value, table, starts, loc, w, grad_out,
                                            points_per_level=points, method=method)
    p_value, p_loc, p_w = msda.cpu_backward(value, table, starts, pl, pw, grad_out,
                                            method=method)
    np.testing.assert_array_equal(g_value, p_value)
    np.testing.assert_array_equal(g_loc, unpadded(points, p_loc, np))
    np.testing.assert_array_equal(g_w, unpadded(points, p_w, np))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_without_the_new_arguments_the_old_api_is_unchanged(dtype):
    """No points_per_level and method "bilinear" (given or not) is the (N, Lq, M, L, P, ...) op of
    before: the same bits, and the reference on the same points."""
    points = [3, 3, 3]
    shapes, table, starts, value, loc, w, grad_out = _inputs(points, seed=41, dtype=dtype)
    loc6, w5 = loc.reshape(2, 5, 2, 3, 3, 2), w.reshape(2, 5, 2, 3, 3)
    old = msda.cpu_forward(value, table, starts, loc6, w5)
    np.testing.assert_array_equal(old, msda.cpu_forward(value, table, starts, loc6, w5,
                                                        points_per_level=None, method="bilinear"))
    want, (r_value, r_loc, r_w) = _reference(value, shapes, loc, w, points, "bilinear", grad_out)
    assert rel_err(old, want) < (1e-13 if dtype == np.float64 else 1e-5)
    grads = msda.cpu_backward(value, table, starts, loc6, w5, grad_out)
    again = msda.cpu_backward(value, table, starts, loc6, w5, grad_out, method="bilinear")
    for g, a, r in zip(grads, again, (r_value, r_loc.reshape(loc6.shape), r_w.reshape(w5.shape))):
        np.testing.assert_array_equal(g, a)
        assert rel_err(g, r) < (1e-12 if dtype == np.float64 else 4e-5)


class _Recorder:
    """Stands in for the CDLL: records the args struct's level_points (read through its
    address during the call) and sampling, and reports success."""

    def __init__(self):
        self.seen = []

    def _record(self, args_ref):
        a = args_ref._obj
        points = None if a.level_points is None else list(
            ctypes.cast(a.level_points, ctypes.POINTER(ctypes.c_int64))[:a.sizes.levels])
        self.seen.append((points, a.sampling, a.sizes.points))
        return 0

    def msda_forward_cpu(self, args_ref, threads, err_ref):
        return self._record(args_ref)

    def msda_backward_cpu(self, args_ref, threads, err_ref):
        return self._record(args_ref)


def test_what_reaches_the_c_structs(monkeypatch):
    """Without the new arguments level_points is NULL and sampling MSDA_SAMPLING_BILINEAR (0), as
    before ABI 5; with them, the counts as a C array alive during the call, and the method."""
    recorder = _Recorder()
    monkeypatch.setattr(_library.library(), "_lib", recorder)
    points = [3, 6, 3]
    _, table, starts, value, loc, w, grad_out = _inputs(points, seed=42)
    loc6, w5 = padded(points, loc, w, np)
    msda.cpu_forward(value, table, starts, loc6, w5)
    msda.cpu_backward(value, table, starts, loc6, w5, grad_out)
    msda.cpu_forward(value, table, starts, loc, w, points_per_level=points, method="discrete")
    msda.cpu_backward(value, table, starts, loc, w, grad_out, points_per_level=np.array(points),
                      method="discrete")
    msda.cpu_forward(value, table, starts, loc, w, points_per_level=(3, 6, 3))
    assert recorder.seen == [(None, 0, 6), (None, 0, 6), ([3, 6, 3], 1, 6), ([3, 6, 3], 1, 6),
                             ([3, 6, 3], 0, 6)]


def test_libmsda_writes_the_discrete_locations_gradient_itself():
    """The zeros cpu_backward returns under "discrete" are libmsda's, not the arrays' start:
    Library.backward over NaN-filled buffers leaves +0.0 in every location's gradient, NaN
    locations' included, and writes the other two gradients entirely."""
    points = [2, 4, 8]
    shapes, table, starts, value, loc, w, grad_out = _inputs(points, seed=43)
    loc[0, 0, 0, 1] = np.nan
    grads = [np.full_like(a, np.nan) for a in (value, loc, w)]
    sizes = _library.Sizes(batch=2, spatial=value.shape[1], heads=2, channels=4, queries=5,
                           levels=3, points=8)
    _library.library().backward(_library.DType.F64, sizes, table.ravel().tolist(),
                                starts.tolist(), value.ctypes.data, loc.ctypes.data,
                                w.ctypes.data, grad_out.ctypes.data,
                                *(g.ctypes.data for g in grads), level_points=points,
                                sampling=_library.Sampling.DISCRETE)
    assert not np.any(grads[1]) and not np.any(np.signbit(grads[1]))
    assert np.isfinite(grads[0]).all() and np.isfinite(grads[2]).all()
    assert grads[2][0, 0, 0, 1] == 0  # the NaN location contributes nothing
    _, (r_value, _, r_w) = _reference(value, shapes, loc, w, points, "discrete", grad_out)
    assert rel_err(grads[0], r_value) < 1e-13 and rel_err(grads[2], r_w) < 1e-13


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_discrete_takes_the_pixel_written_out_here(dtype):
    """One level of one row (then of one column) of 4 pixels whose values are 10 + their index:
    each location's output is the pixel it takes. On a pixel edge (x * 4 + 0.5 a whole number)
    the pixel above it; outside [0, 1] and at infinities the edge pixel; NaN, nothing."""
    cases = [(0.0, 0), (0.12499, 0), (0.125, 1), (0.375, 2), (0.625, 3), (0.875, 3), (1.0, 3),
             (-0.2, 0), (-1.0, 0), (1.7, 3), (np.inf, 3), (-np.inf, 0), (np.nan, None)]
    coords = np.array([c for c, _ in cases], dtype=dtype)
    want = np.array([0.0 if p is None else 10.0 + p for _, p in cases])
    value = (10 + np.arange(4, dtype=dtype)).reshape(1, 4, 1, 1)
    weights = np.ones((1, len(cases), 1, 1), dtype=dtype)
    for axis, shape in ((0, (1, 4)), (1, (4, 1))):  # x along a row, then y down a column
        loc = np.full((1, len(cases), 1, 1, 2), 0.5, dtype=dtype)
        loc[0, :, 0, 0, axis] = coords
        out = msda.cpu_forward(value, [shape], [0], loc, weights, points_per_level=[1],
                               method="discrete")
        np.testing.assert_array_equal(out[0, :, 0], want.astype(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_discrete_on_pixel_edges_outside_and_non_finite(dtype):
    """Locations on every pixel edge of each level (x * W + 0.5 a whole number) and one step of
    dtype either side of it, at 0 and 1, outside [0, 1] on both sides, far and infinite: the
    pixel the reference finds, each step rounded in the accumulation type. Among them some whose
    pixel in f32 is not the one in f64 (x * W rounded up onto the edge), so that the type the
    pixel is found in matters. A NaN coordinate contributes nothing, with either coordinate."""
    points = [2, 3, 1]
    shapes = [(3, 7), (5, 3), (2, 6)]
    _, table, starts, value, _, _, grad_out = _inputs(points, seed=44, dtype=dtype,
                                                      shapes=shapes, queries=1, batch=1)
    sizes = sorted({n for shape in shapes for n in shape})
    edges = np.array([(k - 0.5) / n for n in sizes for k in range(n + 1)]
                     + [0.0, 1.0, -0.3, 1.7, 0.4999, 0.5001, 50.0, -50.0], dtype=dtype)
    xs = np.unique(np.concatenate((edges, np.nextafter(edges, dtype(-np.inf)),
                                   np.nextafter(edges, dtype(np.inf)),
                                   np.array([np.inf, -np.inf], dtype=dtype))))
    grid = np.array([(x, y) for x in xs for y in xs[::7]], dtype=dtype)
    queries = len(grid)
    loc = np.ascontiguousarray(np.broadcast_to(grid[None, :, None, None, :],
                                               (1, queries, 2, sum(points), 2)))
    w = np.random.default_rng(45).random((1, queries, 2, sum(points))).astype(dtype)
    grad_out = np.random.default_rng(46).standard_normal((1, queries, 8)).astype(dtype)
    if dtype == np.float32:
        moved = [x for x in xs if np.isfinite(x) and any(
            _nearest(x, n, np.float32) != _nearest(x, n, np.float64) for n in sizes)]
        assert moved, "no location whose f32 pixel differs from its f64 one"
    got = msda.cpu_forward(value, table, starts, loc, w, points_per_level=points,
                           method="discrete")
    want, (r_value, _, r_w) = _reference(value, shapes, loc, w, points, "discrete", grad_out,
                                         ACCUMULATION[dtype])
    tol = 1e-14 if dtype == np.float64 else 1e-6
    assert rel_err(got, want) < tol
    g_value, g_loc, g_w = msda.cpu_backward(value, table, starts, loc, w, grad_out,
                                            points_per_level=points, method="discrete")
    assert rel_err(g_value, r_value) < tol and rel_err(g_w, r_w) < tol
    assert not np.any(g_loc)
    nan_loc = loc.copy()
    nan_loc[0, :, :, 1, 0] = np.nan  # the second point of level 0: x
    nan_loc[0, :, :, 4, 1] = np.nan  # the third point of level 1: y
    masked = w.copy()
    masked[0, :, :, [1, 4]] = 0
    got_nan = msda.cpu_forward(value, table, starts, nan_loc, w, points_per_level=points,
                               method="discrete")
    np.testing.assert_array_equal(
        got_nan, msda.cpu_forward(value, table, starts, loc, masked, points_per_level=points,
                                  method="discrete"))


@pytest.mark.parametrize("method", METHODS)
def test_logits_are_softmaxed_over_the_sum_of_the_counts(method):
    """weights_are_logits with a count per level: the softmax over each group's
    sum(points_per_level) logits, and the backward's gradient with respect to the logits."""
    points = [3, 6, 3]
    shapes, table, starts, value, loc, logits, grad_out = _inputs(points, seed=47)
    soft = np.exp(logits - logits.max(-1, keepdims=True))
    soft /= soft.sum(-1, keepdims=True)
    want, (r_value, r_loc, r_soft) = _reference(value, shapes, loc, soft, points, method,
                                                grad_out)
    got = msda.cpu_forward(value, table, starts, loc, logits, weights_are_logits=True,
                           points_per_level=points, method=method)
    assert rel_err(got, want) < 1e-13
    g_value, g_loc, g_logits = msda.cpu_backward(value, table, starts, loc, logits, grad_out,
                                                 weights_are_logits=True,
                                                 points_per_level=points, method=method)
    r_logits = soft * (r_soft - (soft * r_soft).sum(-1, keepdims=True))
    assert rel_err(g_value, r_value) < 1e-12 and rel_err(g_logits, r_logits) < 1e-12
    if method == "bilinear":
        assert rel_err(g_loc, r_loc) < 1e-12
    else:
        assert not np.any(g_loc)


_LAYOUT = (r"; cpu_(forward|backward) with points_per_level takes value \(N, S, M, D\), .*"
           r"sampling_locations \(N, Lq, M, sum\(points_per_level\), 2\), attention_weights "
           r"\(N, Lq, M, sum\(points_per_level\)\)$")


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_bad_counts_shapes_and_methods_are_named(backward):
    points = [3, 6, 3]
    _, table, starts, value, loc, w, grad_out = _inputs(points, seed=48)
    name = "cpu_backward" if backward else "cpu_forward"

    def call(loc=loc, w=w, **kw):
        if backward:
            return msda.cpu_backward(value, table, starts, loc, w, grad_out, **kw)
        return msda.cpu_forward(value, table, starts, loc, w, **kw)

    def fails(match, **kw):
        with pytest.raises(msda.MSDAInputError, match=match):
            call(**kw)

    for method in ("nearest", "Discrete", "", None, ["bilinear"]):
        fails(rf"^msda: method '{method}' is not known; {name} takes 'bilinear' or 'discrete'$"
              .replace("[", r"\[").replace("]", r"\]"), points_per_level=points, method=method)
    fails(rf"^msda: method 'nearest' is not known; {name} takes", method="nearest")  # old layout
    for counts in ([6, 6], [3, 6, 3, 1], [], [3, 0, 9], [3, -1, 10], [12]):
        fails(r"^msda: points_per_level must be one positive count per level \(3\), it is "
              + f"{counts}".replace("[", r"\[").replace("]", r"\]") + _LAYOUT,
              points_per_level=counts)
    fails(r"sampling_locations has shape \(2, 5, 2, 12, 2\), expected \(2, 5, 2, 11, 2\) from "
          r"value \(2, 68, 2, 4\) and points_per_level \[3, 5, 3\]" + _LAYOUT,
          points_per_level=[3, 5, 3])
    fails(r"sampling_locations has shape \(2, 5, 2, 12, 2\), expected \(2, 5, 2, 13, 2\)",
          points_per_level=[3, 6, 4])
    fails(r"attention_weights has shape \(2, 5, 2, 11\), expected \(2, 5, 2, 12\) from "
          r"sampling_locations \(2, 5, 2, 12, 2\)" + _LAYOUT, w=w[..., 1:], points_per_level=points)
    fails(r"sampling_locations must have 5 dimensions \(N, Lq, M, 12, 2\), it has shape "
          r"\(2, 5, 2, 3, 4, 2\)", loc=loc.reshape(2, 5, 2, 3, 4, 2), points_per_level=points)
    for counts in ([3.0, 6.0, 3.0], np.array([3.5, 6, 2.5]), 12, "363", [3, None, 3]):
        fails(r"^msda: points_per_level must be a sequence of integers, one per level, it is "
              r".*; " + name + " takes a point count per level$", points_per_level=counts)


# ---- without torch ---------------------------------------------------------------------------
_HIDE_TORCH = textwrap.dedent("""
    import importlib.abc, sys
    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "torch":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Hide())
""")


def test_points_per_level_and_discrete_without_torch(tmp_path):
    """The numpy API's new arguments in an interpreter where torch cannot be imported."""
    points = [3, 6, 3]
    _, table, starts, value, loc, w, grad_out = _inputs(points, seed=49)
    out = msda.cpu_forward(value, table, starts, loc, w, points_per_level=points,
                           method="discrete")
    grads = msda.cpu_backward(value, table, starts, loc, w, grad_out, points_per_level=points)
    np.savez(tmp_path / "case.npz", value=value, table=table, starts=starts, loc=loc, w=w,
             grad_out=grad_out, out=out, g0=grads[0], g1=grads[1], g2=grads[2])
    script = _HIDE_TORCH + textwrap.dedent("""
        import numpy as np
        import msda
        c = np.load("case.npz")
        args = (c["value"], c["table"], c["starts"], c["loc"], c["w"])
        out = msda.cpu_forward(*args, points_per_level=[3, 6, 3], method="discrete")
        np.testing.assert_array_equal(out, c["out"])
        grads = msda.cpu_backward(*args, c["grad_out"], points_per_level=[3, 6, 3])
        for k, g in enumerate(grads):
            np.testing.assert_array_equal(g, c[f"g{k}"])
        assert "torch" not in sys.modules
        print("ok")
    """)
    # the msda these tests imported: the sources, or an installed wheel (make check-python)
    package_root = str(Path(msda.__file__).resolve().parent.parent)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=package_root))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
