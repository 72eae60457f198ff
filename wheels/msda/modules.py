"""MSDeformAttn: Deformable-DETR's multi-scale deformable attention layer on libmsda.

Same constructor, parameters (names and shapes), initialisation and forward as the original,
so that its checkpoints load unchanged.
"""
from __future__ import annotations

import math
import warnings
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._torch_ops import ms_deform_attn


class MSDeformAttn(nn.Module):
    """Each query attends to n_points sampled points per head and level, around its reference
    point; offsets and weights are predicted from the query.

    d_model: channels of queries and values; n_levels: feature levels; n_heads: attention
    heads (d_model must divide into them); n_points: sampling points per head and level.
    fused_softmax (not in the original, off by default): the op applies the softmax over the
    attention logits inside its kernels rather than a separate F.softmax before it; the same
    function, parameters and checkpoints.
    """

    def __init__(self, d_model: int = 256, n_levels: int = 4, n_heads: int = 8,
                 n_points: int = 4, *, fused_softmax: bool = False) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"MSDeformAttn: d_model ({d_model}) is not a multiple of n_heads "
                             f"({n_heads})")
        head_dim = d_model // n_heads
        if head_dim & (head_dim - 1) != 0:
            # As the original: works, but the CUDA kernels are at their fastest with a power
            # of 2 channels per head.
            warnings.warn(f"MSDeformAttn: {head_dim} channels per head (d_model / n_heads); "
                          f"a power of 2 is faster on CUDA", stacklevel=2)
        self.im2col_step = 64  # kept for code that reads it; the op ignores it
        self.d_model = d_model
        self.n_levels = n_levels
        self.n_heads = n_heads
        self.n_points = n_points
        self.fused_softmax = fused_softmax

        self.sampling_offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model, n_heads * n_levels * n_points)
        self.value_proj = nn.Linear(d_model, d_model)
        self.output_proj = nn.Linear(d_model, d_model)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # Offsets start at zero weight, with a bias that places head h's points on the ray at
        # angle 2*pi*h/n_heads, point p at distance p + 1 (the direction scaled so that its
        # larger component is 1), the same at every level: the heads look in different
        # directions and the points spread outwards.
        nn.init.constant_(self.sampling_offsets.weight, 0.0)
        angles = torch.arange(self.n_heads, dtype=torch.float32) * (2.0 * math.pi / self.n_heads)
        directions = torch.stack([angles.cos(), angles.sin()], -1)
        directions = directions / directions.abs().max(-1, keepdim=True).values
        distances = torch.arange(1, self.n_points + 1, dtype=torch.float32)
        grid = directions[:, None, None, :] * distances[None, None, :, None]
        grid = grid.expand(self.n_heads, self.n_levels, self.n_points, 2)
        with torch.no_grad():
            self.sampling_offsets.bias.copy_(grid.reshape(-1))
        # Uniform attention over all points and levels at the start.
        nn.init.constant_(self.attention_weights.weight, 0.0)
        nn.init.constant_(self.attention_weights.bias, 0.0)
        nn.init.xavier_uniform_(self.value_proj.weight)
        nn.init.constant_(self.value_proj.bias, 0.0)
        nn.init.xavier_uniform_(self.output_proj.weight)
        nn.init.constant_(self.output_proj.bias, 0.0)

    def forward(self, query: Tensor, reference_points: Tensor, input_flatten: Tensor,
                input_spatial_shapes: Tensor, input_level_start_index: Tensor,
                input_padding_mask: Optional[Tensor] = None) -> Tensor:
        """
        query (N, Lq, C); reference_points (N, Lq, L, 2) as normalised (x, y) in [0, 1] with
        (0, 0) the top-left, or (N, Lq, L, 4) as boxes (x, y, w, h); input_flatten (N, S, C),
        the levels' feature maps flattened and concatenated; input_spatial_shapes (L, 2) rows
        (H_l, W_l); input_level_start_index (L,); input_padding_mask (N, S), True at padding.
        Returns (N, Lq, C).
        """
        n, n_queries, _ = query.shape
        _, n_in, _ = input_flatten.shape
        # The original asserts here that the levels add up to n_in; the op checks that itself,
        # without a device-to-host sync per layer (which also keeps torch.compile's graph whole).
        value = self.value_proj(input_flatten)
        if input_padding_mask is not None:
            value = value.masked_fill(input_padding_mask[..., None], 0.0)
        value = value.view(n, n_in, self.n_heads, self.d_model // self.n_heads)

        offsets = self.sampling_offsets(query).view(
            n, n_queries, self.n_heads, self.n_levels, self.n_points, 2)
        weights = self.attention_weights(query).view(
            n, n_queries, self.n_heads, self.n_levels * self.n_points)
        # Softmax over every point of every level of a head, jointly (in the op's kernels
        # with fused_softmax).
        if not self.fused_softmax:
            weights = F.softmax(weights, -1)
        weights = weights.view(n, n_queries, self.n_heads, self.n_levels, self.n_points)

        if reference_points.shape[-1] == 2:
            # Offsets are in pixels of each level: divide by (W_l, H_l) to normalise.
            normalizer = torch.stack([input_spatial_shapes[..., 1], input_spatial_shapes[..., 0]],
                                     -1)
            locations = (reference_points[:, :, None, :, None, :]
                         + offsets / normalizer[None, None, None, :, None, :])
        elif reference_points.shape[-1] == 4:
            # Offsets are in units of half the box size, divided by the points per level.
            locations = (reference_points[:, :, None, :, None, :2]
                         + offsets / self.n_points * reference_points[:, :, None, :, None, 2:]
                         * 0.5)
        else:
            raise ValueError(f"MSDeformAttn: reference_points must end in 2 (points) or 4 "
                             f"(boxes), its shape is {tuple(reference_points.shape)}")
        output = ms_deform_attn(value, input_spatial_shapes, input_level_start_index, locations,
                                weights, self.im2col_step, weights_are_logits=self.fused_softmax)
        return self.output_proj(output)
