"""msda.MSDeformAttn: Deformable-DETR's layer, its initialisation, both kinds of reference
points, the padding mask, and training through it."""
import math

import pytest
import torch
import torch.nn.functional as F

import msda
from reference import ms_deform_attn_reference, rel_err

SHAPES = [(8, 10), (4, 5), (2, 3), (1, 2)]
S = sum(h * w for h, w in SHAPES)


def _inputs(batch=2, queries=7, d_model=32, ref_dim=2, seed=50, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(batch, queries, d_model, generator=g).to(dtype)
    reference = torch.rand(batch, queries, len(SHAPES), ref_dim, generator=g).to(dtype)
    if ref_dim == 4:
        reference[..., 2:] = reference[..., 2:] * 0.5  # box sizes
    flat = torch.randn(batch, S, d_model, generator=g).to(dtype)
    shapes = torch.tensor(SHAPES)
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])
    return query, reference, flat, shapes, starts


def _by_hand(m, query, reference, flat, shapes, mask=None):
    """The layer's forward computed from its parameters with the grid_sample reference."""
    n, lq, _ = query.shape
    heads, levels, points = m.n_heads, m.n_levels, m.n_points
    value = flat @ m.value_proj.weight.T + m.value_proj.bias
    if mask is not None:
        value = value * (~mask)[..., None]
    value = value.view(n, -1, heads, m.d_model // heads)
    offsets = (query @ m.sampling_offsets.weight.T + m.sampling_offsets.bias).view(
        n, lq, heads, levels, points, 2)
    logits = (query @ m.attention_weights.weight.T + m.attention_weights.bias).view(
        n, lq, heads, levels * points)
    weights = logits.softmax(-1).view(n, lq, heads, levels, points)
    if reference.shape[-1] == 2:
        wh = shapes.flip(-1).to(query.dtype)  # (W, H) per level
        loc = reference[:, :, None, :, None, :] + offsets / wh[None, None, None, :, None, :]
    else:
        loc = (reference[:, :, None, :, None, :2]
               + offsets / points * reference[:, :, None, :, None, 2:] / 2)
    out = ms_deform_attn_reference(value, SHAPES, loc, weights)
    return out @ m.output_proj.weight.T + m.output_proj.bias


def _randomise(m, seed=51):
    # The initial weights make the offsets and weights independent of the query; random ones
    # test that the layer wires every projection where it belongs.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def test_parameters_and_initialisation_are_deformable_detr_s():
    m = msda.MSDeformAttn()
    assert (m.d_model, m.n_levels, m.n_heads, m.n_points, m.im2col_step) == (256, 4, 8, 4, 64)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == {
        "sampling_offsets.weight": (256, 256), "sampling_offsets.bias": (256,),
        "attention_weights.weight": (128, 256), "attention_weights.bias": (128,),
        "value_proj.weight": (256, 256), "value_proj.bias": (256,),
        "output_proj.weight": (256, 256), "output_proj.bias": (256,)}
    assert torch.count_nonzero(m.sampling_offsets.weight) == 0
    assert torch.count_nonzero(m.attention_weights.weight) == 0
    assert torch.count_nonzero(m.attention_weights.bias) == 0
    bias = m.sampling_offsets.bias.view(8, 4, 4, 2)
    for h in range(8):
        angle = 2 * math.pi * h / 8
        direction = torch.tensor([math.cos(angle), math.sin(angle)])
        direction = direction / direction.abs().max()
        for p in range(4):
            for level in range(4):
                assert torch.allclose(bias[h, level, p], direction * (p + 1), atol=1e-6)
    assert bias[2, 0, 3].tolist() == pytest.approx([0.0, 4.0], abs=1e-6)  # head 2 looks down


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match=r"d_model \(30\) is not a multiple of n_heads \(8\)"):
        msda.MSDeformAttn(d_model=30)
    with pytest.warns(UserWarning, match="12 channels per head"):
        msda.MSDeformAttn(d_model=24, n_heads=2)


@pytest.mark.parametrize("ref_dim", [2, 4])
def test_forward_matches_the_layer_by_hand(ref_dim):
    m = msda.MSDeformAttn(d_model=32, n_levels=4, n_heads=4, n_points=3)
    _randomise(m)
    query, reference, flat, shapes, starts = _inputs(ref_dim=ref_dim)
    out = m(query, reference, flat, shapes, starts)
    assert out.shape == (2, 7, 32)
    with torch.no_grad():
        expected = _by_hand(m, query, reference, flat, shapes)
    assert rel_err(out, expected) < 1e-5


def test_padding_mask_zeroes_the_masked_values():
    m = msda.MSDeformAttn(d_model=32, n_levels=4, n_heads=4, n_points=3)
    _randomise(m, seed=52)
    query, reference, flat, shapes, starts = _inputs(seed=53)
    mask = torch.zeros(2, S, dtype=torch.bool)
    mask[0, 60:] = True
    mask[1, :5] = True
    out = m(query, reference, flat, shapes, starts, mask)
    with torch.no_grad():
        expected = _by_hand(m, query, reference, flat, shapes, mask)
    assert rel_err(out, expected) < 1e-5
    assert rel_err(out, m(query, reference, flat, shapes, starts)) > 1e-3  # the mask matters


def test_bad_reference_points():
    m = msda.MSDeformAttn(d_model=32, n_heads=4)
    query, reference, flat, shapes, starts = _inputs(ref_dim=2)
    with pytest.raises(ValueError, match=r"must end in 2 \(points\) or 4 \(boxes\), its shape "
                                         r"is \(2, 7, 4, 3\)"):
        m(query, torch.cat([reference, reference[..., :1]], -1), flat, shapes, starts)


def test_backward_reaches_every_parameter_and_input():
    m = msda.MSDeformAttn(d_model=32, n_levels=4, n_heads=4, n_points=2)
    _randomise(m, seed=54)
    query, reference, flat, shapes, starts = _inputs(ref_dim=4, seed=55)
    query.requires_grad_(True)
    flat.requires_grad_(True)
    m(query, reference, flat, shapes, starts).square().mean().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) > 0, name
    assert torch.count_nonzero(query.grad) > 0 and torch.count_nonzero(flat.grad) > 0


def test_training_steps_reduce_the_loss():
    torch.manual_seed(56)
    m = msda.MSDeformAttn(d_model=32, n_levels=4, n_heads=4, n_points=2)
    query, reference, flat, shapes, starts = _inputs(seed=57)
    target = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(58))
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = F.mse_loss(m(query, reference, flat, shapes, starts), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_cpu_autocast_bfloat16():
    # Under autocast the projections give bfloat16 values while locations stay float32: the op
    # casts them to the value's dtype instead of failing (finding dtype-mismatch).
    m = msda.MSDeformAttn(d_model=32, n_levels=4, n_heads=4, n_points=2)
    _randomise(m, seed=59)
    query, reference, flat, shapes, starts = _inputs(seed=60)
    flat.requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(query, reference, flat, shapes, starts)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert flat.grad.dtype == torch.float32
    assert rel_err(out, m(query, reference, flat, shapes, starts)) < 3e-2
