"""More than 2**31 elements in `value` and in its gradient (about 4.6 GB each in 16 bits): the
element offsets the kernels form past that point (batch base, level start, corner offset,
the f32 buffer and its conversion) must be 64-bit. Run only where MSDA_TEST_BIG=1 and the GPU
has the memory (tests/gpu/gpu-machine big does both); up to about 30 GB (f32).

The sampling points all land in the last rows of the big level and in a small level placed
after it, so the exact answer needs only those rows: the test cuts them out into a small
problem with the same arithmetic (the locations shifted into the cut-out level exactly, in
f64) and compares with the grid_sample reference in f64 on the CPU. Everything else in the
value gradient must be zero."""
import os

import pytest
import torch

import msda
from reference import ms_deform_attn_reference, rel_err

NEEDED_GIB = 40

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.skipif(os.environ.get("MSDA_TEST_BIG") != "1", reason="MSDA_TEST_BIG=1 not set"),
]

# TAIL rows hold every level-0 point: bf16 has only 1 - 2**-8 and 1.0 near the bottom, and
# 0.99609 * 3000 - 0.5 is row 2987.8, 13 rows up.
M, D, P, TAIL = 8, 32, 4, 16
SMALL = (4, 6)
# f32: y*H - 0.5 rounded in f32 at H = 3000 moves a point by up to 2e-4 pixels against the f64
# reference (1.3e-5 relative already at H = 300, the same test on the CPU path).
TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.float32: 1e-3}


@pytest.fixture(autouse=True)
def _enough_memory():
    free, _ = torch.cuda.mem_get_info()
    if free < NEEDED_GIB << 30:
        pytest.skip(f"needs {NEEDED_GIB} GiB free on the GPU, has {free >> 30}")
    yield
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dtype,batch,height", [
    (torch.float16, 1, 3000),   # S*M*D = 2.3e9 in one batch element
    (torch.bfloat16, 1, 3000),  # the f32 buffer (mixed or all-buffer strategy) past 2**31
    (torch.float16, 2, 1500),   # batch 1 starts at 1.15e9 elements and ends past 2**31
    # A batch element of 4.15e9 bytes, just under 2**32: the forward's points kernel (32-bit
    # unsigned byte offsets within a batch element, here past 2**31), batch 1 ending past 2**32
    (torch.float16, 2, 2700),
    (torch.float32, 3, 1300),   # the same in f32: 4.0e9 bytes a batch element, 12 GB in all
    (torch.float32, 1, 3000),   # 9.2 GB each: byte offsets past 2**33
], ids=["f16", "bf16", "f16_batch2", "f16_fast_path", "f32_fast_path", "f32"])
def test_value_past_two_to_the_31(dtype, batch, height):
    width = 3000
    big, small = height * width, SMALL[0] * SMALL[1]
    spatial = big + small
    assert batch * spatial * M * D > 2**31
    queries = 16
    dev = "cuda"
    shapes = torch.tensor([(height, width), SMALL], device=dev)
    starts = torch.tensor([0, big], device=dev)
    g = torch.Generator(device=dev).manual_seed(5)
    value = torch.randn(batch, spatial, M, D, device=dev, generator=g, dtype=torch.float32).to(dtype)
    # Level 0: y*H - 0.5 from H-2.5 to H-0.3 before rounding to dtype, so both corner rows stay in
    # the last TAIL rows, or fall off the bottom edge as they do in the full map; level 1
    # anywhere, partly outside.
    loc = torch.rand(batch, queries, M, 2, P, 2, device=dev, generator=g, dtype=torch.float64)
    lo, hi = (height - 2.0) / height, (height + 0.2) / height
    loc[:, :, :, 0, :, 1] = lo + (hi - lo) * loc[:, :, :, 0, :, 1]
    loc[:, :, :, 1] = loc[:, :, :, 1] * 1.2 - 0.1
    loc = loc.to(dtype)
    w = torch.rand(batch, queries, M, 2 * P, device=dev, generator=g).softmax(-1)
    w = w.view(batch, queries, M, 2, P).to(dtype)
    grad_out = torch.randn(batch, queries, M * D, device=dev, generator=g).to(dtype)

    # value itself is the leaf: a copy would be another 4.6 to 9.2 GB.
    leaves = [value.requires_grad_(True)] + [t.clone().requires_grad_(True) for t in (loc, w)]
    out = msda.ms_deform_attn(leaves[0], shapes, starts, leaves[1], leaves[2])
    out.backward(grad_out)
    torch.cuda.synchronize()
    grad_value = leaves[0].grad
    assert grad_value.shape == value.shape and grad_value.dtype == dtype

    # The cut-out problem: the last TAIL rows of level 0, then level 1, in f64 on the CPU.
    tail_start = big - TAIL * width
    cut = torch.cat([value[:, tail_start:big], value[:, big:]], dim=1).detach().double().cpu()
    cut_loc = loc.double().cpu().clone()
    # h = y*H - 0.5 in the full map is (y'*TAIL - 0.5) + (H - TAIL) in the cut-out one.
    cut_loc[:, :, :, 0, :, 1] = (cut_loc[:, :, :, 0, :, 1] * height - (height - TAIL)) / TAIL
    ref = [t.requires_grad_(True) for t in (cut, cut_loc, w.double().cpu())]
    ref_out = ms_deform_attn_reference(ref[0], [(TAIL, width), SMALL], ref[1], ref[2])
    ref_out.backward(grad_out.double().cpu())
    tol = TOL[dtype]
    assert rel_err(out, ref_out) < tol, "output"
    got_tail = torch.cat([grad_value[:, tail_start:big], grad_value[:, big:]], dim=1)
    assert rel_err(got_tail, ref[0].grad) < 4 * tol, "grad_value in the sampled rows"
    # Nothing written before the sampled rows (a wrapped offset would land there).
    assert grad_value[:, :tail_start].abs().amax().item() == 0, "grad_value outside the sampled rows"
    # The level-0 location gradient: y' = (y*H - (H - TAIL)) / TAIL, so d/dy = d/dy' * H / TAIL.
    gl = leaves[1].grad.double().cpu()
    rg = ref[1].grad.clone()
    rg[:, :, :, 0, :, 1] *= height / TAIL
    assert rel_err(gl, rg) < 4 * tol, "grad_locations"
    assert rel_err(leaves[2].grad, ref[2].grad) < 4 * tol, "grad_weights"
