"""The op in plain PyTorch, as Deformable-DETR's "ms_deform_attn_core_pytorch" computes it:
grid_sample per level (bilinear, align_corners=False, zero padding), then the attention-weighted
sum over levels and points. Autograd through it gives the reference gradients."""
from typing import Sequence, Tuple

import torch
import torch.nn.functional as F


def ms_deform_attn_reference(value: torch.Tensor, shapes: Sequence[Tuple[int, int]],
                             locations: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    n, _, heads, channels = value.shape
    _, queries, _, levels, points, _ = locations.shape
    per_level = value.split([h * w for h, w in shapes], dim=1)
    grids = 2 * locations - 1  # grid_sample's coordinates run from -1 to 1
    sampled = []
    for level, (h, w) in enumerate(shapes):
        # (N, H*W, M, D) -> (N*M, D, H, W)
        v = per_level[level].flatten(2).transpose(1, 2).reshape(n * heads, channels, h, w)
        # (N, Lq, M, P, 2) -> (N*M, Lq, P, 2)
        g = grids[:, :, :, level].transpose(1, 2).flatten(0, 1)
        sampled.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros",
                                     align_corners=False))  # (N*M, D, Lq, P)
    w = weights.transpose(1, 2).reshape(n * heads, 1, queries, levels * points)
    out = (torch.stack(sampled, dim=-2).flatten(-2) * w).sum(-1)  # (N*M, D, Lq)
    return out.view(n, heads * channels, queries).transpose(1, 2).contiguous()


def make_inputs(shapes: Sequence[Tuple[int, int]], *, batch: int = 2, queries: int = 5,
                heads: int = 2, channels: int = 4, points: int = 3, dtype=torch.float32,
                device: str = "cpu", seed: int = 0, margin: float = 0.1):
    """Random op inputs. Locations spread `margin` past [0, 1] on each side, so that points
    partly and wholly outside the maps are covered; weights are a softmax, as in models."""
    g = torch.Generator().manual_seed(seed)
    levels = len(shapes)
    spatial = sum(h * w for h, w in shapes)
    value = torch.randn(batch, spatial, heads, channels, generator=g, dtype=torch.float64)
    locations = (torch.rand(batch, queries, heads, levels, points, 2, generator=g,
                            dtype=torch.float64) * (1 + 2 * margin) - margin)
    weights = torch.rand(batch, queries, heads, levels * points, generator=g,
                         dtype=torch.float64).softmax(-1).view(batch, queries, heads, levels,
                                                               points)
    spatial_shapes = torch.tensor(shapes, dtype=torch.int64)
    starts = [0]
    for h, w in shapes[:-1]:
        starts.append(starts[-1] + h * w)
    level_start = torch.tensor(starts, dtype=torch.int64)
    to = dict(dtype=dtype, device=device)
    return (value.to(**to), spatial_shapes.to(device), level_start.to(device),
            locations.to(**to), weights.to(**to))


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()
