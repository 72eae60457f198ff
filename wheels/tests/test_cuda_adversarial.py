"""Hostile inputs on the CUDA path, mirroring what the CPU suites (test_op.py, test_errors.py,
tests/kernels) check there: non-finite and huge locations and weights, degenerate sizes, views
with odd strides or a storage offset of one element, and level tables that disagree with
`value`. Each case runs forward and backward on the CPU path and on the GPU: either both give the
same result (same non-finite positions, finite values within the dtype's tolerance) or both
refuse with the same MSDAInputError. After every case the device must still run a known-good call
(a fault would leave the context unusable), so a kernel that wrote out of bounds fails here, not
in a later test."""
import pytest
import torch

import msda
from reference import make_inputs, rel_err

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

SHAPES = [(6, 7), (3, 4), (1, 1)]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 1e-2, torch.bfloat16: 3e-2}


def _fwd_bwd(value, shapes, starts, loc, w, grad_out):
    """Output and the three gradients, or the MSDAInputError the call raised."""
    leaves = [t.detach().requires_grad_(True) for t in (value, loc, w)]
    try:
        out = msda.ms_deform_attn(leaves[0], shapes, starts, leaves[1], leaves[2])
        out.backward(grad_out)
    except msda.MSDAInputError as err:
        return err
    return [out.detach()] + [t.grad for t in leaves]


def _same(gpu, cpu, tol, what):
    gpu, cpu = gpu.detach().cpu(), cpu.detach().cpu()
    assert gpu.shape == cpu.shape and gpu.dtype == cpu.dtype, what
    finite_g, finite_c = torch.isfinite(gpu), torch.isfinite(cpu)
    assert torch.equal(finite_g, finite_c), f"{what}: non-finite at other positions"
    assert torch.equal(torch.isnan(gpu), torch.isnan(cpu)), f"{what}: NaN at other positions"
    if finite_c.any():
        assert rel_err(gpu[finite_g], cpu[finite_c]) < tol, what


def _device_still_works():
    value, shapes, starts, loc, w = make_inputs([(3, 4)], device="cuda", seed=1)
    out = msda.ms_deform_attn(value, shapes, starts, loc, w)
    torch.cuda.synchronize()  # raises here if an earlier kernel faulted
    ref = msda.ms_deform_attn(*(t.cpu() for t in (value, shapes, starts, loc, w)))
    assert rel_err(out, ref) < 1e-5


def _agree(value, shapes, starts, loc, w, *, cuda_args=None, grad_seed=0):
    """Runs the case on the CPU and on CUDA (cuda_args: the CUDA inputs where they are special
    views of the same numbers) and checks that both agree."""
    dtype = value.dtype
    g = torch.Generator().manual_seed(grad_seed)
    out_shape = (value.shape[0], loc.shape[1], value.shape[2] * value.shape[3])
    grad_out = torch.randn(out_shape, generator=g, dtype=torch.float64).to(dtype)
    cpu = _fwd_bwd(value, shapes, starts, loc, w, grad_out)
    args = cuda_args or [t.cuda() for t in (value, shapes, starts, loc, w)]
    gpu = _fwd_bwd(*args, grad_out.cuda())
    if isinstance(cpu, Exception):
        assert isinstance(gpu, msda.MSDAInputError), f"CPU refused ({cpu}), CUDA gave {gpu!r}"
        assert str(gpu) == str(cpu) and gpu.status == cpu.status
    else:
        assert not isinstance(gpu, Exception), f"CUDA refused what the CPU ran: {gpu}"
        tol = TOL[dtype]
        for what, a, b, k in zip(("output", "grad_value", "grad_locations", "grad_weights"),
                                 gpu, cpu, (1, 4, 4, 4)):
            assert a.is_cuda, what
            _same(a, b, k * tol, what)
    _device_still_works()
    return cpu


def _inputs(dtype, **kw):
    kw.setdefault("shapes", SHAPES)
    shapes = kw.pop("shapes")
    kw.setdefault("batch", 2)
    kw.setdefault("queries", 9)
    kw.setdefault("heads", 2)
    kw.setdefault("channels", 8)
    kw.setdefault("points", 3)
    return list(make_inputs(shapes, dtype=dtype, seed=kw.pop("seed", 40), **kw))


SPECIALS = [float("nan"), float("inf"), float("-inf"), 1e30, -1e30]


# points=4 takes the forward's fast path (kernels/README.md, "Work layout"), 3 the general one.
@pytest.mark.parametrize("points", [3, 4])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("special", SPECIALS, ids=["nan", "inf", "-inf", "1e30", "-1e30"])
def test_special_sampling_locations(dtype, special, points):
    value, shapes, starts, loc, w = _inputs(dtype, points=points)
    flat = loc.view(-1)
    flat[::7] = torch.tensor(special).to(dtype)  # x of some points, y of others; 1e30 is inf in f16
    _agree(value, shapes, starts, loc, w)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("special", SPECIALS, ids=["nan", "inf", "-inf", "1e30", "-1e30"])
def test_special_attention_weights(dtype, special):
    value, shapes, starts, loc, w = _inputs(dtype)
    w.view(-1)[::11] = torch.tensor(special).to(dtype)
    _agree(value, shapes, starts, loc, w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_locations_nan_give_zeros(dtype):
    value, shapes, starts, loc, w = _inputs(dtype)
    loc.fill_(float("nan"))
    cpu = _agree(value, shapes, starts, loc, w)
    assert torch.count_nonzero(cpu[0]) == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [
    dict(shapes=[(5, 4)], points=1),             # L = 1, P = 1
    dict(shapes=[(1, 1)], points=2),             # one 1x1 level only
    dict(shapes=[(1, 1), (6, 7)], points=4),     # a 1x1 level first
    dict(queries=0),                             # Lq = 0
    dict(batch=0),                               # N = 0
    dict(batch=1, queries=1, heads=1, channels=1, points=1, shapes=[(1, 1)]),
    dict(channels=3),                            # D that no vector width divides
    dict(channels=12, heads=3),                  # M * D = 36
], ids=["L1_P1", "only_1x1", "1x1_first", "Lq0", "N0", "all_ones", "D3", "M3_D12"])
def test_small_and_empty_sizes(dtype, case):
    _agree(*_inputs(dtype, **case))


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_views(dtype):
    value, shapes, starts, loc, w = _inputs(dtype, channels=16)
    cuda = [t.cuda() for t in (value, shapes, starts, loc, w)]
    # Same numbers, other strides: value (N, S, M, D) stored S-major, locations coordinate-major,
    # weights as every other element of a wider tensor.
    cuda[0] = cuda[0].transpose(0, 1).contiguous().transpose(0, 1)
    cuda[3] = cuda[3].permute(5, 0, 1, 2, 3, 4).contiguous().permute(1, 2, 3, 4, 5, 0)
    wide = torch.stack([cuda[4], torch.full_like(cuda[4], float("nan"))], dim=-1)
    cuda[4] = wide[..., 0]
    assert not any(t.is_contiguous() for t in (cuda[0], cuda[3], cuda[4]))
    _agree(value, shapes, starts, loc, w, cuda_args=cuda)


def _offset_by_one(t):
    """The same values, contiguous, starting one element past an aligned allocation."""
    base = torch.empty(t.numel() + 1, dtype=t.dtype, device="cuda")
    view = base[1:].view(t.shape)
    view.copy_(t)
    assert view.storage_offset() == 1 and view.is_contiguous()
    return view


@pytest.mark.parametrize("points", [3, 4])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [8, 32])  # vector widths of 2 to 8 elements if aligned
def test_misaligned_tensors(dtype, channels, points):
    value, shapes, starts, loc, w = _inputs(dtype, channels=channels, queries=33, points=points)
    cuda = [t.cuda() for t in (value, shapes, starts, loc, w)]
    for i in (0, 3, 4):
        cuda[i] = _offset_by_one(cuda[i])
    _agree(value, shapes, starts, loc, w, cuda_args=cuda)


@pytest.mark.parametrize("dtype", DTYPES)
def test_locations_alone_misaligned(dtype):
    # Four points a level, every other tensor aligned: only the pair alignment of x and y keeps
    # the forward off its fast path, which reads a point's x and y in one load.
    value, shapes, starts, loc, w = _inputs(dtype, channels=32, queries=33, points=4)
    cuda = [t.cuda() for t in (value, shapes, starts, loc, w)]
    cuda[3] = _offset_by_one(cuda[3])
    _agree(value, shapes, starts, loc, w, cuda_args=cuda)


@pytest.mark.parametrize("where", ["host", "device"])
@pytest.mark.parametrize("name,shapes,starts", [
    ("sum_below_S", [(6, 7), (3, 3), (1, 1)], [0, 42, 51]),
    ("sum_above_S", [(6, 7), (3, 4), (2, 1)], [0, 42, 54]),
    ("start_not_zero", SHAPES, [1, 42, 54]),
    ("start_too_far", SHAPES, [0, 43, 54]),
    ("starts_decreasing", SHAPES, [0, 54, 42]),
    ("negative_size", [(6, 7), (-3, 4), (13, 1)], [0, 42, 30]),
    ("negative_start", SHAPES, [0, -42, 54]),
    ("huge_level", [(6, 7), (3, 4), (1 << 40, 1 << 40)], [0, 42, 54]),
    ("zero_height_level", [(6, 7), (3, 4), (0, 5), (1, 1)], [0, 42, 54, 54]),
])
def test_level_table_inconsistent_with_value(where, name, shapes, starts):
    # value is built for SHAPES (S = 55); the level table says otherwise.
    value, _, _, _, _ = _inputs(torch.float32)
    levels = len(shapes)
    _, _, _, loc, w = _inputs(torch.float32, shapes=[(1, 1)] * levels)
    shapes_t = torch.tensor(shapes, dtype=torch.int64)
    starts_t = torch.tensor(starts, dtype=torch.int64)
    cuda = [t.cuda() for t in (value, shapes_t, starts_t, loc, w)]
    if where == "host":
        cuda[1], cuda[2] = shapes_t, starts_t
    cpu = _agree(value, shapes_t, starts_t, loc, w, cuda_args=cuda)
    assert isinstance(cpu, msda.MSDAInputError), f"{name}: the CPU path accepted it"


@pytest.mark.parametrize("levels", [16, 17])  # the most libmsda takes, and one more
def test_level_count_limit(levels):
    _agree(*_inputs(torch.float32, shapes=[(1, 1)] * levels, points=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_pixel_centre_samples_the_pixel_alone(dtype):
    # A 4x8 map: the centre of column 3, row 2 is (0.4375, 0.625), exact in every dtype.
    value, shapes, starts, loc, w = _inputs(dtype, shapes=[(4, 8)], batch=1, queries=1, heads=1,
                                            points=1)
    loc[..., 0], loc[..., 1] = (3 + 0.5) / 8, (2 + 0.5) / 4
    w.fill_(1)
    out = _agree(value, shapes, starts, loc, w)[0]
    assert torch.equal(out.view(-1), value[0, 2 * 8 + 3, 0])
