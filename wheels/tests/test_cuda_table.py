"""The op as models call it on a GPU: the level table on the GPU (no host copy or sync per call,
CUDA-graph capture, an inconsistent table caught without a fault) and mixed precision (f16/bf16
value, f32 locations and weights). Run on a machine with a GPU (skipped elsewhere)."""
import pytest
import torch

import msda
from reference import make_inputs, ms_deform_attn_reference, rel_err

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

SHAPES = [(13, 17), (7, 9), (4, 5), (2, 3)]
S = sum(h * w for h, w in SHAPES)


def _inputs(seed, dtype=torch.float32, **kw):
    sizes = dict(batch=2, queries=30, heads=4, channels=32, points=4)
    sizes.update(kw)
    return make_inputs(SHAPES, dtype=dtype, device="cuda", seed=seed, **sizes)


def _captured(capture, warm=None):
    """A CUDA graph of capture() and what it returned, after a call of warm (default: capture)
    on a side stream: capture needs the allocator and the loaded kernels settled first."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        (warm or capture)()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = capture()
    return g, out


def _run(value, shapes, starts, loc, w, grad_out):
    vs = [t.detach().clone().requires_grad_(True) for t in (value, loc, w)]
    out = msda.ms_deform_attn(vs[0], shapes, starts, vs[1], vs[2])
    out.backward(grad_out)
    return out.detach(), [v.grad for v in vs]


def test_no_host_sync_with_the_table_on_the_gpu():
    value, shapes, starts, loc, w = _inputs(100)
    grad_out = torch.randn(2, 30, 128, device="cuda")
    _run(value, shapes, starts, loc, w, grad_out)  # the table's one check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call now raises
    try:
        for _ in range(3):
            out, grads = _run(value, shapes, starts, loc, w, grad_out)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    host = _run(value, shapes.cpu(), starts.cpu(), loc, w, grad_out)
    assert torch.equal(out, host[0])
    for g, h in zip(grads, host[1]):  # grad_value: atomics, in any order
        assert rel_err(g, h) < 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_device_and_host_tables_agree(dtype):
    # A 16-bit value gradient: the kernels choose the f32 buffer's levels from a device table by
    # the rule the launcher applies to a host table (kernels/msda_plan.h); f16 here buffers
    # levels 2 and 3 and adds 0 and 1 natively, bf16 buffers every level.
    value, shapes, starts, loc, w = _inputs(101, dtype=dtype, batch=2, queries=900)
    grad_out = torch.randn(2, 900, 128, device="cuda").to(dtype)
    dev = _run(value, shapes, starts, loc, w, grad_out)
    dev32 = _run(value, shapes.int(), starts.int(), loc, w, grad_out)
    host = _run(value, shapes.cpu(), starts.cpu(), loc, w, grad_out)
    # f16 adds its sparse levels' value gradient with native f16 atomics on sm_70+ (mixed): two
    # runs differ by their order of additions, up to the 1e-2 that gpu-check allows f16.
    tol = {torch.float32: 1e-6, torch.float16: 1e-2, torch.bfloat16: 2e-2}[dtype]
    assert torch.equal(dev[0], host[0]) and torch.equal(dev32[0], dev[0])
    for d, h in zip(dev[1], host[1]):
        assert rel_err(d, h) < tol


# Small levels between large ones: the buffered levels are not one range, so the kernels pack
# them (rows 0-5 for level 0, 6-17 for level 2) and the conversion puts each back in its place.
# 100 queries: f16 (limit 256) buffers level 0 only, bf16 (32) levels 0 and 2; 900: f16 levels 0
# and 2, bf16 every level.
INTERLEAVED = [(2, 3), (13, 17), (3, 4), (9, 7)]


@pytest.mark.parametrize("queries", [100, 900])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_gpu_table_with_small_levels_between_large_ones(dtype, queries):
    value, shapes, starts, loc, w = make_inputs(INTERLEAVED, dtype=dtype, device="cuda", seed=104,
                                                batch=3, queries=queries, heads=4, channels=32,
                                                points=4)
    grad_out = torch.randn(3, queries, 128, device="cuda").to(dtype)
    dev = _run(value, shapes, starts, loc, w, grad_out)
    host = _run(value, shapes.cpu(), starts.cpu(), loc, w, grad_out)
    vs = [t.detach().double().requires_grad_(True) for t in (value, loc, w)]
    ref = ms_deform_attn_reference(vs[0], INTERLEAVED, vs[1], vs[2])
    ref.backward(grad_out.double())
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}[dtype]
    assert torch.equal(dev[0], host[0])
    for d, h, r in zip(dev[1], host[1], vs):
        assert rel_err(d, h) < tol
        assert rel_err(d, r.grad) < tol
    # Level by level: one the conversion missed or put in another's place fails on its own.
    sizes = [h * w for h, w in INTERLEAVED]
    for level, (d, r) in enumerate(zip(dev[1][0].split(sizes, 1), vs[0].grad.split(sizes, 1))):
        assert rel_err(d, r) < tol, f"level {level}"


@pytest.mark.parametrize("starts,status", [([0, 221, 285, 304], msda.Status.LEVEL_START),
                                           ([0, 221, 284, 305], msda.Status.LEVEL_START)])
def test_an_inconsistent_gpu_table_is_an_error_not_a_fault(starts, status):
    value, shapes, _, loc, w = _inputs(102)
    bad = torch.tensor(starts, device="cuda")
    with pytest.raises(msda.MSDAInputError) as info:
        msda.ms_deform_attn(value, shapes, bad, loc, w)
    assert info.value.status == status
    bad_shapes = shapes.clone()
    bad_shapes[1, 0] = -3
    with pytest.raises(msda.MSDAInputError, match=r"level 1 has shape \(-3, 9\)"):
        msda.ms_deform_attn(value, bad_shapes, torch.tensor([0, 221, 284, 304], device="cuda"),
                            loc, w)
    torch.cuda.synchronize()  # no asynchronous fault either


def test_the_kernels_check_a_table_changed_under_a_graph():
    value, shapes, starts, loc, w = _inputs(103)
    starts = starts.clone()
    msda.ms_deform_attn(value, shapes, starts, loc, w)  # checked while eager
    g, out = _captured(lambda: msda.ms_deform_attn(value, shapes, starts, loc, w))
    g.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    msda.check_level_tables()  # nothing stored
    starts[2] += 1  # the graph reads the table where it is: now inconsistent
    g.replay()
    torch.cuda.synchronize()
    assert torch.isnan(out).all()
    with pytest.raises(msda.MSDAInputError, match="inconsistent") as info:
        msda.check_level_tables()
    assert info.value.status == msda.Status.LEVEL_START
    msda.check_level_tables()  # reported once
    starts[2] -= 1
    g.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    # Now, not whenever the garbage collector breaks the cycle through `info`'s traceback: a
    # graph or its pool's memory released during a later test's capture invalidates that capture.
    del g, out


def test_a_table_first_seen_under_capture_is_checked_by_the_next_eager_call():
    # Capture skips the table's host check (no sync may happen then); the Call made there must
    # not be reused by eager calls as if the table had passed it.
    value, shapes, starts, loc, w = _inputs(107)
    msda.ms_deform_attn(value, shapes, starts, loc, w)  # the plan, kernels and allocator warm
    bad = torch.tensor([0, 221, 285, 304], device="cuda")  # level 2 starts one row late
    g, _ = _captured(lambda: msda.ms_deform_attn(value, shapes, bad, loc, w),
                     warm=lambda: msda.ms_deform_attn(value, shapes, starts, loc, w))
    with pytest.raises(msda.MSDAInputError, match=r"level_start\[2\] is 285"):
        msda.ms_deform_attn(value, shapes, bad, loc, w)
    del g
    torch.cuda.synchronize()
    msda.check_level_tables()  # the graph never ran: nothing stored


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cuda_graph_of_forward_and_backward_replays_new_data(dtype):
    value, shapes, starts, loc, w = _inputs(104, dtype=dtype)
    static = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    static_gout = torch.randn(2, 30, 128, device="cuda").to(dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (and the table's one check) before capture
        for _ in range(2):
            msda.ms_deform_attn(static[0], shapes, starts, static[1], static[2]).backward(static_gout)
    torch.cuda.current_stream().wait_stream(side)
    for t in static:
        t.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = msda.ms_deform_attn(static[0], shapes, starts, static[1], static[2])
        out.backward(static_gout)
    for seed in (105, 106):
        new_value, _, _, new_loc, new_w = _inputs(seed, dtype=dtype)
        new_gout = torch.randn(2, 30, 128, device="cuda").to(dtype)
        with torch.no_grad():
            for t, n in zip(static, (new_value, new_loc, new_w)):
                t.copy_(n)
            static_gout.copy_(new_gout)
        g.replay()
        ref_out, ref_grads = _run(new_value, shapes, starts, new_loc, new_w, new_gout)
        assert torch.equal(out, ref_out)
        for t, r in zip(static, ref_grads):
            tol = 1e-6 if dtype == torch.float32 else 3e-3  # atomics: in any order
            assert rel_err(t.grad, r) <= tol


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mixed_precision_against_f64(dtype):
    value, shapes, starts, loc, w = _inputs(107, batch=3, queries=40)
    value = value.to(dtype)
    grad_out = torch.randn(3, 40, 128, device="cuda").to(dtype)
    out, grads = _run(value, shapes, starts, loc, w, grad_out)
    assert out.dtype == dtype and grads[0].dtype == dtype
    assert grads[1].dtype == torch.float32 and grads[2].dtype == torch.float32
    ref = [t.detach().double().cpu().requires_grad_(True) for t in (value, loc, w)]
    ref_out = ms_deform_attn_reference(ref[0], SHAPES, ref[1], ref[2])
    ref_out.backward(grad_out.double().cpu())
    tol = {torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
    assert rel_err(out, ref_out) < tol
    assert rel_err(grads[0], ref[0].grad) < 4 * tol
    e_loc, e_w = rel_err(grads[1], ref[1].grad), rel_err(grads[2], ref[2].grad)
    # The same call with the locations and weights rounded to dtype, against the same reference.
    _, grads16 = _run(value, shapes, starts, loc.to(dtype), w.to(dtype), grad_out)
    e_loc16 = rel_err(grads16[1], ref[1].grad)
    print(f"\n{dtype}: grad_sampling_locations relative error against f64: f32 locations "
          f"{e_loc:.2e}, {dtype} locations {e_loc16:.2e}; grad_attention_weights {e_w:.2e}")
    assert e_loc < 1e-4 and e_w < 1e-4
    assert e_loc < e_loc16 / 10
