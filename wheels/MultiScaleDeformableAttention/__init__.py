"""Drop-in replacement for Deformable-DETR's compiled `MultiScaleDeformableAttention` extension.

Existing code keeps working unchanged, without building anything:

    import MultiScaleDeformableAttention as MSDA
    output = MSDA.ms_deform_attn_forward(value, spatial_shapes, level_start_index,
                                         sampling_loc, attn_weight, im2col_step)
    grad_value, grad_sampling_loc, grad_attn_weight = MSDA.ms_deform_attn_backward(
        value, spatial_shapes, level_start_index, sampling_loc, attn_weight, grad_output,
        im2col_step)

Unlike the original, these take CPU as well as CUDA tensors, f16 and bf16 as well as f32 and
f64, and any batch size (im2col_step is accepted and ignored). Like the original, they record
no autograd graph: the model's own autograd.Function calls them. Unlike the original, the CUDA
backward follows torch.use_deterministic_algorithms(True): there its grad_value, added with
atomics otherwise, is summed exactly, the same bits on every run.
"""
from typing import List

from torch import Tensor

from msda import _torch_kernels


def ms_deform_attn_forward(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                           sampling_loc: Tensor, attn_weight: Tensor,
                           im2col_step: int) -> Tensor:
    """The output (N, Lq, M * D) in value's dtype."""
    del im2col_step
    return _torch_kernels.forward(value, spatial_shapes, level_start_index, sampling_loc,
                                  attn_weight)


def ms_deform_attn_backward(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                            sampling_loc: Tensor, attn_weight: Tensor, grad_output: Tensor,
                            im2col_step: int) -> List[Tensor]:
    """[grad_value, grad_sampling_loc, grad_attn_weight], a list as the original returns, each
    in the dtype of its input."""
    del im2col_step
    grads = _torch_kernels.backward(value, spatial_shapes, level_start_index, sampling_loc,
                                    attn_weight, grad_output)
    return [g.to(t.dtype) for g, t in zip(grads, (value, sampling_loc, attn_weight))]
