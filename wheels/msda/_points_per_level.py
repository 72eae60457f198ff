"""ms_deform_attn_points_per_level: multi-scale deformable attention with a point count of its
own for each level, and a "discrete" mode that takes the nearest pixel instead of the bilinear
sample (RT-DETR v2, D-FINE and DEIMv2 call it so), composed over msda's op, which takes the same
count P on every level.

- The same count on every level: the locations (N, Lq, M, L * P, 2) are viewed as the op's
  (N, Lq, M, L, P, 2), no copy.
- Counts that differ: each level is padded to the largest count with zero weights at an in-map
  location (the map's centre), by a pad and an index_select with a permutation that is cached per
  (counts, device): no host synchronisation, nothing a CUDA graph or torch.compile cannot take.
  The padded entries' gradients fall on the padding, which is dropped. It costs the kernels the
  padded points (L * max P instead of sum P) and two copies of the locations and weights.
- "discrete": the pixel (ix, iy) that transformers takes, ix = clamp(int(x * W + 0.5), 0, W - 1)
  (likewise iy with H), found in the locations' own dtype as transformers finds it, then its
  centre ((ix + 0.5) / W, (iy + 0.5) / H) in f32 (f64 beside an f64 value), detached: the
  bilinear sample at a pixel's centre is that pixel, value and weights get their gradients and
  the locations none (no graph reaches them, as with transformers' integer indices).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ._errors import MSDAInputError
from ._level_table_cache import level_tables
from ._torch_ops import _is_compiling, ms_deform_attn

METHODS = ("bilinear", "discrete")
_LAYOUT = ("sampling_locations (N, Lq, M, sum(points_per_level), 2), attention_weights "
           "(N, Lq, M, sum(points_per_level))")

# Models use a few point layouts and a few image sizes; a program that cycles through more starts over.
_LIMIT = 256
_Key = Tuple[int, ...]
_Shapes = Tuple[Tuple[int, int], ...]
# (counts, device) -> the index that puts the padded levels in order (see _pad_index)
_pad_indices: Dict[Tuple[_Key, torch.device], Tensor] = {}
# (counts, device) -> each point's level, int64 (sum P,)
_point_levels: Dict[Tuple[_Key, torch.device], Tensor] = {}
# (sizes, counts, device, dtype) -> each point's (W, H), (sum P, 2)
_point_sizes: Dict[Tuple[_Shapes, _Key, torch.device, torch.dtype], Tensor] = {}


def _fail(what: str) -> MSDAInputError:
    return MSDAInputError(f"msda: {what}; ms_deform_attn_points_per_level takes {_LAYOUT}")


def _cached(cache: dict, key: tuple, make) -> Tensor:
    t = cache.get(key)
    if t is None:
        if len(cache) >= _LIMIT:
            cache.clear()
        t = cache[key] = make()
    return t


def _pad_index(counts: _Key, device: torch.device) -> Tensor:
    """For locations and weights padded at the end with L * max P - sum P entries: the index
    (L * max P,) whose level l, slot p is point p of level l where p < P_l, else a padding entry
    of its own (a permutation: index_select's backward adds no two gradients together)."""

    def make() -> Tensor:
        widest, total = max(counts), sum(counts)
        index, start, pad = [], 0, total
        for count in counts:
            index += range(start, start + count)
            index += range(pad, pad + widest - count)
            start, pad = start + count, pad + widest - count
        return torch.tensor(index, dtype=torch.int64, device=device)

    return _cached(_pad_indices, (counts, device), make)


def _sizes_of_points(spatial_shapes: "Tensor | _Shapes", counts: _Key, device: torch.device,
                     dtype: torch.dtype) -> Tensor:
    """Each point's level's (W, H), (sum P, 2) in DTYPE on DEVICE: made once per list of sizes,
    or gathered where a GPU table is (no copy of it to the host)."""
    if isinstance(spatial_shapes, tuple):
        def make() -> Tensor:
            rows = [(w, h) for (h, w), count in zip(spatial_shapes, counts) for _ in range(count)]
            return torch.tensor(rows, dtype=dtype, device=device)

        return _cached(_point_sizes, (spatial_shapes, counts, device, dtype), make)
    table = spatial_shapes.to(device)
    levels = _cached(_point_levels, (counts, device), lambda: torch.tensor(
        [level for level, count in enumerate(counts) for _ in range(count)], dtype=torch.int64, device=device))
    return table.flip(-1).index_select(0, levels).to(dtype)


def _pixel_centres(locations: Tensor, sizes: Tensor, dtype: torch.dtype) -> Tensor:
    """The centre of the pixel that "discrete" takes for each location, in DTYPE, detached."""
    with torch.no_grad():
        loc = locations.detach()
        scale = sizes.to(loc.dtype)
        # transformers: int64(x * W + 0.5), clamped to [0, W - 1]. Its conversion truncates
        # toward zero, which differs from floor only below 0, where both clamp to pixel 0.
        pixel = torch.floor(loc * scale + 0.5).to(dtype)
        pixel = torch.minimum(pixel.clamp_min(0), sizes - 1)
        return (pixel + 0.5) / sizes


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
    value and weights, with no gradient to the locations (they do not reach the graph).

    The same count on every level runs the op on a view of the locations; counts that differ
    pad every level to the largest count with zero weights, which costs the kernels
    L * max(points_per_level) points instead of sum(points_per_level)."""
    if method not in METHODS:
        raise MSDAInputError(f"msda: method '{method}' is not known; ms_deform_attn_points_per_level takes "
                             + " or ".join(f"'{m}'" for m in METHODS))
    counts = tuple(int(p) for p in points_per_level)
    if not counts or min(counts) < 1:
        raise _fail(f"points_per_level must be one positive count per level, it is {list(counts)}")
    if isinstance(spatial_shapes, Tensor):
        if level_start_index is None:
            raise _fail("level_start_index is None beside a spatial_shapes tensor; it may be None only "
                        "where spatial_shapes is a list of (H, W)")
        levels = spatial_shapes.shape[0] if spatial_shapes.dim() == 2 else -1
        shapes, starts = spatial_shapes, level_start_index
        sizes_key: "Tensor | _Shapes" = spatial_shapes
    else:
        sizes_key = tuple((int(h), int(w)) for h, w in spatial_shapes)
        levels = len(sizes_key)
        shapes, starts = level_tables(sizes_key)
    if levels != len(counts):
        raise _fail(f"points_per_level has {len(counts)} counts and spatial_shapes {levels} levels")
    total = sum(counts)
    if sampling_locations.dim() != 5 or sampling_locations.shape[3] != total or sampling_locations.shape[4] != 2:
        raise _fail(f"sampling_locations has shape {tuple(sampling_locations.shape)}, expected "
                    f"(N, Lq, M, {total}, 2) for points_per_level {list(counts)}")
    if attention_weights.shape != sampling_locations.shape[:4]:
        raise _fail(f"attention_weights has shape {tuple(attention_weights.shape)}, expected "
                    f"{tuple(sampling_locations.shape[:4])}")
    locations, weights = sampling_locations, attention_weights
    if method == "discrete":
        dtype = torch.float64 if value.dtype == torch.float64 else torch.float32
        if isinstance(sizes_key, Tensor) and sizes_key.device.type == "cpu" and not _is_compiling():
            # A host table read on the host: the per-point sizes cached, never copied per call.
            sizes_key = tuple((int(h), int(w)) for h, w in sizes_key.tolist())
        sizes = _sizes_of_points(sizes_key, counts, locations.device, dtype)
        locations = _pixel_centres(locations, sizes, dtype)
    n, queries, heads = locations.shape[:3]
    widest = max(counts)
    if widest * levels != total:
        index = _pad_index(counts, locations.device)
        extra = widest * levels - total
        # padding: the map's centre (inside every map), weight 0
        locations = torch.nn.functional.pad(locations, (0, 0, 0, extra), value=0.5).index_select(3, index)
        weights = torch.nn.functional.pad(weights, (0, extra)).index_select(3, index)
    return ms_deform_attn(value, shapes, starts, locations.reshape(n, queries, heads, levels, widest, 2),
                          weights.reshape(n, queries, heads, levels, widest))
