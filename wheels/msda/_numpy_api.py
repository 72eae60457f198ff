"""The CPU path on numpy arrays, for installs without torch (numpy is needed here only)."""
from __future__ import annotations

from typing import Any, Tuple

from ._errors import MSDAInputError
from ._library import DType, library
from ._shapes import check_forward, check_grad_output, output_shape


def _np() -> Any:
    try:
        import numpy
    except ImportError as exc:
        raise ImportError("msda.cpu_forward and msda.cpu_backward need numpy "
                          "(pip install numpy), or use msda.ms_deform_attn with torch") from exc
    return numpy


def _prepare(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
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
    sizes = check_forward(value.shape, shapes.shape, starts.shape, locations.shape,
                          weights.shape)
    return (sizes, dtypes[value.dtype], shapes.astype(np.int64).ravel().tolist(),
            starts.astype(np.int64).ravel().tolist(), value,
            np.ascontiguousarray(locations, dtype=value.dtype),
            np.ascontiguousarray(weights, dtype=value.dtype))


def cpu_forward(value, spatial_shapes, level_start_index, sampling_locations,
                attention_weights, *, threads: int = 0, weights_are_logits: bool = False):
    """The op's output (N, Lq, M * D) as a numpy array in value's dtype.

    Arguments as msda.ms_deform_attn's, as numpy arrays (or anything numpy.asarray takes).
    threads: CPU threads to use, 0 for one per CPU. weights_are_logits: attention_weights are
    logits, softmaxed by the op over the L*P points of each (n, q, m).
    """
    np = _np()
    sizes, dtype, shapes, starts, value, locations, weights = _prepare(
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    output = np.zeros(output_shape(sizes), dtype=value.dtype)
    if not sizes.empty:
        library().forward(dtype, sizes, shapes, starts, value.ctypes.data, locations.ctypes.data,
                          weights.ctypes.data, output.ctypes.data, threads=threads,
                          weights_are_logits=weights_are_logits)
    return output


def cpu_backward(value, spatial_shapes, level_start_index, sampling_locations,
                 attention_weights, grad_output, *, threads: int = 0,
                 weights_are_logits: bool = False) -> Tuple[Any, Any, Any]:
    """(grad_value, grad_sampling_locations, grad_attention_weights) as numpy arrays in
    value's dtype, given the gradient of a loss with respect to the output (with
    weights_are_logits, the last is the gradient with respect to the logits)."""
    np = _np()
    sizes, dtype, shapes, starts, value, locations, weights = _prepare(
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    grad_output = np.ascontiguousarray(grad_output, dtype=value.dtype)
    check_grad_output(sizes, grad_output.shape)
    grads = (np.zeros_like(value), np.zeros_like(locations), np.zeros_like(weights))
    if not sizes.empty:
        library().backward(dtype, sizes, shapes, starts, value.ctypes.data,
                           locations.ctypes.data, weights.ctypes.data, grad_output.ctypes.data,
                           *(g.ctypes.data for g in grads), threads=threads,
                           weights_are_logits=weights_are_logits)
    return grads
