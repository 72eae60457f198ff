"""The CPU path on numpy arrays, for installs without torch (numpy is needed here only)."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from ._errors import MSDAInputError
from ._library import DType, library
from ._shapes import (check_counts, check_forward, check_forward_points, check_grad_output, check_method,
                      output_shape)


def _np() -> Any:
    try:
        import numpy
    except ImportError as exc:
        raise ImportError("msda.cpu_forward and msda.cpu_backward need numpy "
                          "(pip install numpy), or use msda.ms_deform_attn with torch") from exc
    return numpy


def _prepare(value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
             points: Optional[Tuple[int, ...]], op: str):
    np = _np()
    value = np.ascontiguousarray(value)
    dtypes = {np.dtype(np.float32): DType.F32, np.dtype(np.float64): DType.F64,
              np.dtype(np.float16): DType.F16}
    if value.dtype not in dtypes:
        raise MSDAInputError(f"msda: value has dtype {value.dtype}; cpu_forward computes in "
                             f"float32, float64 or float16 (bfloat16 needs torch)")
    shapes, starts = np.asarray(spatial_shapes), np.asarray(level_start_index)
    for name, a in (("spatial_shapes", shapes), ("level_start_index", starts)):
        if a.dtype.kind not in "iu":
            raise MSDAInputError(f"msda: {name} has dtype {a.dtype}; it must hold integers")
    locations, weights = np.asarray(sampling_locations), np.asarray(attention_weights)
    for name, a in (("sampling_locations", locations), ("attention_weights", weights)):
        if a.dtype.kind != "f":
            raise MSDAInputError(f"msda: {name} has dtype {a.dtype}; it must be floating point")
    if points is None:
        sizes = check_forward(value.shape, shapes.shape, starts.shape, locations.shape,
                              weights.shape)
    else:
        sizes = check_forward_points(value.shape, shapes.shape, starts.shape, locations.shape,
                                     weights.shape, points, op=f"{op} with points_per_level")
    return (sizes, dtypes[value.dtype], shapes.astype(np.int64).ravel().tolist(),
            starts.astype(np.int64).ravel().tolist(), value,
            np.ascontiguousarray(locations, dtype=value.dtype),
            np.ascontiguousarray(weights, dtype=value.dtype))


def cpu_forward(value, spatial_shapes, level_start_index, sampling_locations,
                attention_weights, *, threads: int = 0, weights_are_logits: bool = False,
                points_per_level: Optional[Sequence[int]] = None, method: str = "bilinear"):
    """The op's output (N, Lq, M * D) as a numpy array in value's dtype.

    Arguments as msda.ms_deform_attn's, as numpy arrays (or anything numpy.asarray takes).
    threads: CPU threads to use, 0 for one per CPU. weights_are_logits: attention_weights are
    logits, softmaxed by the op over the L*P points of each (n, q, m) (over the
    sum(points_per_level) of them with points_per_level).

    points_per_level and method as msda.ms_deform_attn_points_per_level's, without torch:
    points_per_level, L integers, gives level l points_per_level[l] points, so that
    sampling_locations is (N, Lq, M, sum(points_per_level), 2) and attention_weights
    (N, Lq, M, sum(points_per_level)), the points level by level (RT-DETR v2's
    num_points_list); None (the default) takes the (N, Lq, M, L, P, ...) layout above.
    method "bilinear" (the default): grid_sample's bilinear sample, align_corners=False, zeros
    outside; "discrete": the nearest pixel, column clamp(trunc(x * W + 0.5), 0, W - 1) (row
    likewise from y and H), found in f32 (f64 beside a float64 value), as transformers'
    multi_scale_deformable_attention_v2 takes it; a NaN location contributes nothing. Beside a
    float16 value the locations are float16 (cast to value's dtype, as every array here), so
    the pixel is that of the rounded location. Either method goes with either layout. Any
    other method raises MSDAInputError.
    """
    np = _np()
    sampling = check_method(method, "cpu_forward")
    points = None if points_per_level is None else check_counts(points_per_level, "cpu_forward")
    sizes, dtype, shapes, starts, value, locations, weights = _prepare(
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights, points,
        "cpu_forward")
    output = np.zeros(output_shape(sizes), dtype=value.dtype)
    if not sizes.empty:
        library().forward(dtype, sizes, shapes, starts, value.ctypes.data, locations.ctypes.data,
                          weights.ctypes.data, output.ctypes.data, threads=threads,
                          weights_are_logits=weights_are_logits, level_points=points,
                          sampling=sampling)
    return output


def cpu_backward(value, spatial_shapes, level_start_index, sampling_locations,
                 attention_weights, grad_output, *, threads: int = 0,
                 weights_are_logits: bool = False,
                 points_per_level: Optional[Sequence[int]] = None,
                 method: str = "bilinear") -> Tuple[Any, Any, Any]:
    """(grad_value, grad_sampling_locations, grad_attention_weights) as numpy arrays in
    value's dtype, given the gradient of a loss with respect to the output (with
    weights_are_logits, the last is the gradient with respect to the logits).

    points_per_level and method as cpu_forward's; the gradients have the shapes of value, of
    sampling_locations and of attention_weights in either layout. Under method "discrete"
    grad_sampling_locations is all zeros (+0.0 in every element, NaN locations' too: libmsda
    writes them so, the nearest pixel being constant in the location between pixel edges, so
    that no gradient reaches the locations); ms_deform_attn_points_per_level's autograd gives
    None there, this API an array of zeros of the locations' shape and dtype.
    """
    np = _np()
    sampling = check_method(method, "cpu_backward")
    points = None if points_per_level is None else check_counts(points_per_level, "cpu_backward")
    sizes, dtype, shapes, starts, value, locations, weights = _prepare(
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights, points,
        "cpu_backward")
    grad_output = np.ascontiguousarray(grad_output, dtype=value.dtype)
    check_grad_output(sizes, grad_output.shape)
    grads = (np.zeros_like(value), np.zeros_like(locations), np.zeros_like(weights))
    if not sizes.empty:
        library().backward(dtype, sizes, shapes, starts, value.ctypes.data,
                           locations.ctypes.data, weights.ctypes.data, grad_output.ctypes.data,
                           *(g.ctypes.data for g in grads), threads=threads,
                           weights_are_logits=weights_are_logits, level_points=points,
                           sampling=sampling)
    return grads
