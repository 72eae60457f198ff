"""Level tables in host memory for callers that know the levels' sizes as a Python list
(transformers passes `spatial_shapes_list` beside the tensors, and Mask2Former, OneFormer and
RT-DETR v2 pass only the list): one (spatial_shapes, level_start_index) pair of CPU tensors per
list, made on first use and kept. A table in host memory goes to the kernels with the call's
parameters, and msda checks a table it has not seen once: a GPU table that a model makes anew
each forward costs that check, a copy to the host, which waits for the GPU (measured on
GroundingDino under bf16 autocast: 0.91x its own path's speed with the model's GPU tables)."""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import torch
from torch import Tensor

# Models use a handful of image sizes; a program that cycles through more starts over.
_LIMIT = 256
_tables: Dict[Tuple[Tuple[int, int], ...], Tuple[Tensor, Tensor]] = {}


def level_tables(shapes: "Sequence[Sequence[int]] | Tensor") -> Tuple[Tensor, Tensor]:
    """(spatial_shapes (L, 2), level_start_index (L,)) for SHAPES: for a list of (H, W), int64
    tensors in host memory, the same two for the same list; for an (L, 2) tensor, that tensor
    and its start index, computed where it is."""
    if isinstance(shapes, Tensor):
        sizes = shapes[:, 0] * shapes[:, 1]
        return shapes, torch.cat((sizes.new_zeros(1), sizes.cumsum(0)[:-1]))
    key = tuple((int(h), int(w)) for h, w in shapes)
    table = _tables.get(key)
    if table is None:
        if len(_tables) >= _LIMIT:
            _tables.clear()
        starts, at = [], 0
        for h, w in key:
            starts.append(at)
            at += h * w
        table = (torch.tensor(key, dtype=torch.int64).reshape(-1, 2), torch.tensor(starts, dtype=torch.int64))
        _tables[key] = table
    return table
