"""The op with autograd: a torch custom op where torch has torch.library.custom_op (2.4 and
later), so that torch.compile traces it as one node, and a plain autograd.Function, which eager
calls take (a custom op's Python dispatch costs several times a Function's per call, and the
op's small calls are dominated by such costs), as does torch without custom_op. An eager call
with nothing to differentiate (no_grad, inference_mode) runs the kernels without either.

No `from __future__ import annotations` here: custom_op reads the type hints of the functions
it wraps to build the op's schema.
"""
from typing import Callable, List, Optional, Tuple

import torch
import torch.autograd.forward_ad as _forward_ad
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import _torch_kernels as kernels
from ._shapes import check_forward, check_forward_points, check_grad_output, output_shape

OpFn = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]


class MSDAFunction(torch.autograd.Function):
    """The op as an autograd.Function: what eager calls and torch without custom_op use. Its
    backward is not itself differentiable (as the original op's)."""

    @staticmethod
    def forward(ctx, value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                sampling_locations: Tensor, attention_weights: Tensor,
                weights_are_logits: bool = False, call: Optional[kernels.Call] = None) -> Tensor:
        # call (from ms_deform_attn): the inputs are checked, cast and contiguous already, and
        # call is kernels.prepare's for them. Without it, prepare here.
        if call is None:
            call, value, sampling_locations, attention_weights = kernels.prepare(
                value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
                weights_are_logits=weights_are_logits)
        # The table too: the call's table points into it, and autograd tells if it changes.
        ctx.save_for_backward(value, spatial_shapes, level_start_index, sampling_locations,
                              attention_weights)
        ctx.call = call
        return kernels.run_forward(call, value, sampling_locations, attention_weights)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor):
        value, _, _, sampling_locations, attention_weights = ctx.saved_tensors
        grad_value, grad_locations, grad_weights = kernels.run_backward(
            ctx.call, value, sampling_locations, attention_weights, grad_output,
            ctx.needs_input_grad[0])
        if ctx.call.discrete:  # the nearest pixel: no gradient reaches the locations
            grad_locations = None
        return grad_value, None, None, grad_locations, grad_weights, None, None


def _register_custom_op(name: str, logits: bool) -> OpFn:
    """Defines msda::NAME (and its backward, msda::NAME_backward): ms_deform_attn on weights,
    or ms_deform_attn_logits on logits (the fused softmax). Two ops rather than a flag
    argument: each schema stays five tensors, as torch versions without defaults in custom op
    schemas take it."""

    @torch.library.custom_op(f"msda::{name}", mutates_args=())
    def forward_op(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                   sampling_locations: Tensor, attention_weights: Tensor) -> Tensor:
        return kernels.forward(value, spatial_shapes, level_start_index, sampling_locations,
                               attention_weights, weights_are_logits=logits)

    @forward_op.register_fake
    def _forward_fake(value, spatial_shapes, level_start_index, sampling_locations,
                      attention_weights):
        sizes = check_forward(value.shape, spatial_shapes.shape, level_start_index.shape,
                              sampling_locations.shape, attention_weights.shape)
        return value.new_empty(output_shape(sizes))

    @torch.library.custom_op(f"msda::{name}_backward", mutates_args=())
    def backward_op(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                    sampling_locations: Tensor, attention_weights: Tensor,
                    grad_output: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        grad_value, grad_locations, grad_weights = kernels.backward(
            value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
            grad_output, weights_are_logits=logits)
        return grad_value, grad_locations, grad_weights

    @backward_op.register_fake
    def _backward_fake(value, spatial_shapes, level_start_index, sampling_locations,
                       attention_weights, grad_output):
        sizes = check_forward(value.shape, spatial_shapes.shape, level_start_index.shape,
                              sampling_locations.shape, attention_weights.shape)
        check_grad_output(sizes, grad_output.shape)
        # The real kernel returns contiguous tensors: grad_value in value's dtype, the others
        # in the coordinates' (kernels.coord_dtype).
        cdt = kernels.coord_dtype(value.dtype, sampling_locations.dtype, attention_weights.dtype)
        return (value.new_empty(value.shape), value.new_empty(sampling_locations.shape, dtype=cdt),
                value.new_empty(attention_weights.shape, dtype=cdt))

    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad_output: Tensor):
        grad_value, grad_locations, grad_weights = backward_op(*ctx.saved_tensors,
                                                               grad_output.contiguous())
        return grad_value, None, None, grad_locations, grad_weights

    forward_op.register_autograd(backward, setup_context=setup_context)
    return forward_op


def _register_points_op() -> OpFn:
    """msda::ms_deform_attn_points (and msda::ms_deform_attn_points_backward): the op with a
    point count per level and the sampling method, for torch.compile to trace as one node."""

    @torch.library.custom_op("msda::ms_deform_attn_points", mutates_args=())
    def forward_op(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                   sampling_locations: Tensor, attention_weights: Tensor, points: List[int],
                   discrete: bool) -> Tensor:
        return kernels.forward(value, spatial_shapes, level_start_index, sampling_locations,
                               attention_weights, points=tuple(points), discrete=discrete)

    @forward_op.register_fake
    def _forward_fake(value, spatial_shapes, level_start_index, sampling_locations,
                      attention_weights, points, discrete):
        sizes = check_forward_points(value.shape, spatial_shapes.shape, level_start_index.shape,
                                     sampling_locations.shape, attention_weights.shape, points)
        return value.new_empty(output_shape(sizes))

    @torch.library.custom_op("msda::ms_deform_attn_points_backward", mutates_args=())
    def backward_op(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                    sampling_locations: Tensor, attention_weights: Tensor, grad_output: Tensor,
                    points: List[int], discrete: bool) -> Tuple[Tensor, Tensor, Tensor]:
        grad_value, grad_locations, grad_weights = kernels.backward(
            value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
            grad_output, points=tuple(points), discrete=discrete)
        return grad_value, grad_locations, grad_weights

    @backward_op.register_fake
    def _backward_fake(value, spatial_shapes, level_start_index, sampling_locations,
                       attention_weights, grad_output, points, discrete):
        sizes = check_forward_points(value.shape, spatial_shapes.shape, level_start_index.shape,
                                     sampling_locations.shape, attention_weights.shape, points)
        check_grad_output(sizes, grad_output.shape)
        cdt = kernels.coord_dtype(value.dtype, sampling_locations.dtype, attention_weights.dtype)
        return (value.new_empty(value.shape), value.new_empty(sampling_locations.shape, dtype=cdt),
                value.new_empty(attention_weights.shape, dtype=cdt))

    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs[:5])
        ctx.points, ctx.discrete = inputs[5], inputs[6]

    def backward(ctx, grad_output: Tensor):
        grad_value, grad_locations, grad_weights = backward_op(
            *ctx.saved_tensors, grad_output.contiguous(), ctx.points, ctx.discrete)
        return (grad_value, None, None, None if ctx.discrete else grad_locations, grad_weights,
                None, None)

    forward_op.register_autograd(backward, setup_context=setup_context)
    return forward_op


# Feature test, not a version test: custom_op, register_fake and register_autograd came
# together in torch 2.4.
HAS_CUSTOM_OP: bool = hasattr(torch.library, "custom_op")
_custom_op: Optional[OpFn] = (_register_custom_op("ms_deform_attn", False) if HAS_CUSTOM_OP
                              else None)
_custom_op_logits: Optional[OpFn] = (_register_custom_op("ms_deform_attn_logits", True)
                                     if HAS_CUSTOM_OP else None)
_custom_op_points: Optional[Callable[..., Tensor]] = (_register_points_op() if HAS_CUSTOM_OP
                                                      else None)


_is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling",
                                           lambda: False)


_peek_transforms: Callable[[], object] = getattr(getattr(torch._C, "_functorch", None),
                                                 "peek_interpreter_stack", lambda: None)


def _transformed() -> bool:
    """Whether forward-mode AD (a dual level of torch.autograd.forward_ad) or a torch.func
    transform (vmap, grad, jvp, ...) is active: the op then goes through the autograd.Function,
    whose refusal of them torch words clearly."""
    return getattr(_forward_ad, "_current_level", -1) >= 0 or _peek_transforms() is not None


def ms_deform_attn(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                   sampling_locations: Tensor, attention_weights: Tensor,
                   im2col_step: int = 64, *, weights_are_logits: bool = False) -> Tensor:
    """Multi-scale deformable attention, differentiable in value, sampling_locations and
    attention_weights.

    value (N, S, M, D); spatial_shapes (L, 2) integer rows (H_l, W_l); level_start_index (L,);
    sampling_locations (N, Lq, M, L, P, 2) normalised (x, y); attention_weights
    (N, Lq, M, L, P). Returns (N, Lq, M * D) in value's dtype.

    weights_are_logits=True: attention_weights are logits, and the op applies the softmax over
    the L*P of each (n, q, m) inside the kernels (what Deformable-DETR does with
    `softmax(x.view(N, Lq, M, L*P), -1)` before the op), with the gradient of the logits in
    the backward; a row is softmaxed as torch.softmax does it (max-subtracted; a row with a NaN,
    a +inf, or only -inf gives NaN), in f32 for f16 and bf16 inputs.

    With a float16 or bfloat16 value, sampling_locations and attention_weights in float32
    (as autocast gives them) are taken as they are, never rounded to 16 bits, and their
    gradients come back in float32; otherwise they are cast to value's dtype. The level table
    may be on the CPU or on value's GPU; on the GPU no call copies it to the host (a table is
    checked once, when first seen, and by the kernels on every call). im2col_step is accepted
    for the original signature and ignored: libmsda takes any batch size in one call.

    The CUDA backward's grad_value is summed with atomics, in an order that changes from run to
    run; under torch.use_deterministic_algorithms(True) it is summed exactly in 64-bit integers
    instead, the same bits on every run, at some cost in time and workspace.
    """
    del im2col_step
    if _is_compiling() and HAS_CUSTOM_OP:
        # The custom op, traced as one node; sizes are symbolic, so nothing is cached by them.
        kernels.check_dtypes(value, spatial_shapes, level_start_index, sampling_locations,
                             attention_weights)
        check_forward(value.shape, spatial_shapes.shape, level_start_index.shape,
                      sampling_locations.shape, attention_weights.shape)
        cdt = kernels.coord_dtype(value.dtype, sampling_locations.dtype, attention_weights.dtype)
        op = _custom_op_logits if weights_are_logits else _custom_op
        assert op is not None
        return op(value.contiguous(), spatial_shapes, level_start_index,
                  sampling_locations.to(cdt).contiguous(), attention_weights.to(cdt).contiguous())
    # Cast (in prepare) before the Function, so that autograd casts the gradients back.
    call, value, sampling_locations, attention_weights = kernels.prepare(
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
        weights_are_logits=weights_are_logits)
    return _run_eager(call, value, spatial_shapes, level_start_index, sampling_locations,
                      attention_weights, weights_are_logits)


def _run_eager(call: kernels.Call, value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
               sampling_locations: Tensor, attention_weights: Tensor, weights_are_logits: bool) -> Tensor:
    """An eager call on prepared inputs: through the Function where autograd needs it."""
    if ((torch.is_grad_enabled() and (value.requires_grad or sampling_locations.requires_grad
                                      or attention_weights.requires_grad))
            or _transformed()):
        return MSDAFunction.apply(value, spatial_shapes, level_start_index, sampling_locations,
                                  attention_weights, weights_are_logits, call)
    # Nothing to differentiate (no_grad, inference_mode, or no input that requires grad): the
    # kernels without the Function, whose apply costs about as much as the rest of the call.
    # (Under forward-mode AD and torch.func transforms the Function stays, which refuses them
    # as it always did, rather than dropping tangents or failing on a batched tensor's data.)
    return kernels.run_forward(call, value, sampling_locations, attention_weights)


def ms_deform_attn_points(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                          sampling_locations: Tensor, attention_weights: Tensor,
                          points: Tuple[int, ...], discrete: bool = False) -> Tensor:
    """The op with points[l] sampling points on level l (sampling_locations
    (N, Lq, M, sum(points), 2), attention_weights (N, Lq, M, sum(points))), bilinear or, with
    discrete, the nearest pixel (no gradient to the locations then): libmsda's level_points and
    sampling (msda.h). As ms_deform_attn otherwise: casts, level tables, torch.compile."""
    if _is_compiling() and HAS_CUSTOM_OP:
        kernels.check_dtypes(value, spatial_shapes, level_start_index, sampling_locations,
                             attention_weights)
        check_forward_points(value.shape, spatial_shapes.shape, level_start_index.shape,
                             sampling_locations.shape, attention_weights.shape, points)
        cdt = kernels.coord_dtype(value.dtype, sampling_locations.dtype, attention_weights.dtype)
        assert _custom_op_points is not None
        return _custom_op_points(value.contiguous(), spatial_shapes, level_start_index,
                                 sampling_locations.to(cdt).contiguous(),
                                 attention_weights.to(cdt).contiguous(), list(points), discrete)
    call, value, sampling_locations, attention_weights = kernels.prepare(
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
        points=points, discrete=discrete)
    return _run_eager(call, value, spatial_shapes, level_start_index, sampling_locations,
                      attention_weights, False)
