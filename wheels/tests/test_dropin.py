"""`import MultiScaleDeformableAttention as MSDA` with the original op's signatures, used the way
Deformable-DETR's own autograd.Function uses it."""
import inspect

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import MultiScaleDeformableAttention as MSDA
from reference import make_inputs, ms_deform_attn_reference, rel_err

SHAPES = [(5, 4), (3, 2), (1, 1)]


class OriginalStyleFunction(Function):
    """The calling pattern of Deformable-DETR's ms_deform_attn_func.py."""

    @staticmethod
    def forward(ctx, value, spatial_shapes, level_start_index, sampling_locations,
                attention_weights, im2col_step):
        ctx.im2col_step = im2col_step
        output = MSDA.ms_deform_attn_forward(value, spatial_shapes, level_start_index,
                                             sampling_locations, attention_weights,
                                             ctx.im2col_step)
        ctx.save_for_backward(value, spatial_shapes, level_start_index, sampling_locations,
                              attention_weights)
        return output

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights = \
            ctx.saved_tensors
        grad_value, grad_sampling_loc, grad_attn_weight = MSDA.ms_deform_attn_backward(
            value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
            grad_output, ctx.im2col_step)
        return grad_value, None, None, grad_sampling_loc, grad_attn_weight, None


def test_signatures_are_the_original_ones():
    assert list(inspect.signature(MSDA.ms_deform_attn_forward).parameters) == [
        "value", "spatial_shapes", "level_start_index", "sampling_loc", "attn_weight",
        "im2col_step"]
    assert list(inspect.signature(MSDA.ms_deform_attn_backward).parameters) == [
        "value", "spatial_shapes", "level_start_index", "sampling_loc", "attn_weight",
        "grad_output", "im2col_step"]


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_original_style_function_matches_reference(dtype, tol):
    value, shapes, starts, loc, w = make_inputs(SHAPES, batch=3, dtype=dtype, seed=40)
    grad_out = torch.randn(3, 5, 8, dtype=dtype)
    got = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    out = OriginalStyleFunction.apply(got[0], shapes, starts, got[1], got[2], 2)
    out.backward(grad_out)
    ref = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    ref_out = ms_deform_attn_reference(ref[0], SHAPES, ref[1], ref[2])
    ref_out.backward(grad_out)
    assert rel_err(out, ref_out) < tol
    for g, r in zip(got, ref):
        assert rel_err(g.grad, r.grad) < tol


def test_backward_returns_a_list_of_three_in_input_dtypes():
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=41)
    value = value.half()
    grads = MSDA.ms_deform_attn_backward(value, shapes, starts, loc, w,
                                         torch.ones(2, 5, 8, dtype=torch.float16), 64)
    assert isinstance(grads, list) and len(grads) == 3
    assert [g.dtype for g in grads] == [torch.float16, torch.float32, torch.float32]
    assert [g.shape for g in grads] == [value.shape, loc.shape, w.shape]


def test_forward_records_no_graph():
    # As the compiled original: the autograd.Function around it owns the graph.
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=42)
    out = MSDA.ms_deform_attn_forward(value.requires_grad_(True), shapes, starts, loc, w, 64)
    assert out.grad_fn is None and not out.requires_grad
