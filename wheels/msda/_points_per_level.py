"""ms_deform_attn_points_per_level: multi-scale deformable attention with a point count of its
own for each level, and a "discrete" mode that takes the nearest pixel instead of the bilinear
sample (RT-DETR v2, D-FINE and DEIMv2 call it so): libmsda's level_points and sampling
(msda.h), the same kernels as the op's, on the points as they are (sum(points_per_level) a
group, no padding).

- "discrete": the pixel (ix, iy) that transformers takes, ix = clamp(trunc(x * W + 0.5), 0,
  W - 1) (likewise iy with H), found in f32 (f64 beside an f64 value), each step rounded as
  torch rounds it; value and weights get their gradients and the locations none (None, as
  transformers' integer indices give). Beside a float16 value with float16 locations (no
  autocast) transformers rounds x * W + 0.5 to float16 first, so a location within a float16
  step of a pixel edge can land in the neighbouring pixel there.
"""
from __future__ import annotations

from typing import Optional, Sequence

from torch import Tensor

from ._errors import MSDAInputError
from ._level_table_cache import level_tables
from ._library import Sampling
from ._shapes import check_counts, check_method
from ._torch_ops import ms_deform_attn_points

OP = "ms_deform_attn_points_per_level"


def ms_deform_attn_points_per_level(value: Tensor, spatial_shapes: "Tensor | Sequence[Sequence[int]]",
                                    level_start_index: Optional[Tensor], sampling_locations: Tensor,
                                    attention_weights: Tensor, points_per_level: Sequence[int],
                                    method: str = "bilinear") -> Tensor:
    """Multi-scale deformable attention with points_per_level[l] sampling points on level l.

    value (N, S, M, D); spatial_shapes (L, 2) integer rows (H_l, W_l) with level_start_index
    (L,), as for ms_deform_attn, or a list of L (H, W) pairs (level_start_index then None: the
    tables are made once per list and kept in host memory); sampling_locations
    (N, Lq, M, sum(points_per_level), 2) normalised (x, y), level by level; attention_weights
    (N, Lq, M, sum(points_per_level)). Returns (N, Lq, M * D), as ms_deform_attn.

    method "bilinear": bilinear sampling (grid_sample's, align_corners=False, zeros outside),
    differentiable in value, locations and weights. "discrete": the nearest pixel, clamped into
    the map, as transformers' multi_scale_deformable_attention_v2 takes it; differentiable in
    value and weights, with no gradient to the locations."""
    discrete = check_method(method, OP) == Sampling.DISCRETE
    counts = check_counts(points_per_level, OP)
    if isinstance(spatial_shapes, Tensor):
        if level_start_index is None:
            raise MSDAInputError("msda: level_start_index is None beside a spatial_shapes tensor; it "
                                 "may be None only where spatial_shapes is a list of (H, W)")
        shapes, starts = spatial_shapes, level_start_index
    else:
        shapes, starts = level_tables(spatial_shapes)
    return ms_deform_attn_points(value, shapes, starts, sampling_locations, attention_weights,
                                 counts, discrete)
