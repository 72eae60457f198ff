"""msda for users of Hugging Face's `kernels` package, which transformers asks for the
`MultiScaleDeformableAttention` layer when a model is loaded with use_kernels=True (or kernelized):
a layer class and a repository object that the package accepts, so that

    from kernels import Mode, kernelize, use_kernel_mapping
    with use_kernel_mapping({"MultiScaleDeformableAttention": {"cuda": msda.kernels_repository()}}):
        model = kernelize(model, device="cuda", mode=Mode.TRAINING)

switches a model without msda.patch; nothing is downloaded. The layer is stateless, as the
package requires (no constructor, no members beyond forward and its two flags), with
transformers' forward signature."""
from __future__ import annotations

from typing import Any, Type

from torch import Tensor, nn

from ._patch_transformers import class_forward

LAYER_NAME = "MultiScaleDeformableAttention"


class MultiScaleDeformableAttention(nn.Module):
    """transformers' MultiScaleDeformableAttention on msda: the same forward, with autograd
    (has_backward) and as one node under torch.compile (can_torch_compile: msda's custom op)."""

    has_backward = True
    can_torch_compile = True

    def forward(self, value: Tensor, value_spatial_shapes: Tensor, value_spatial_shapes_list: Any,
                level_start_index: Tensor, sampling_locations: Tensor, attention_weights: Tensor,
                im2col_step: int) -> Tensor:
        return class_forward(self, value, value_spatial_shapes, value_spatial_shapes_list, level_start_index,
                             sampling_locations, attention_weights, im2col_step)


class KernelsRepository:
    """A repository for the `kernels` package's mappings (its RepositoryProtocol): load() gives the
    layer; nothing is fetched."""

    layer_name = LAYER_NAME

    def load(self) -> Type[nn.Module]:
        return MultiScaleDeformableAttention

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KernelsRepository)

    def __hash__(self) -> int:
        return hash((KernelsRepository, LAYER_NAME))

    def __str__(self) -> str:
        return f"msda's {LAYER_NAME} (in the msda wheel)"


def kernels_repository() -> KernelsRepository:
    """The repository object to map transformers' `MultiScaleDeformableAttention` to msda with the
    `kernels` package (kernels.use_kernel_mapping), for any device msda runs on ("cuda", "cpu")."""
    return KernelsRepository()
