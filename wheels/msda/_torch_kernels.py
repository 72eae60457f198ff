"""libmsda on torch tensors, without autograd: one forward and one backward call.

Both the autograd paths (`_torch_ops`) and the drop-in `MultiScaleDeformableAttention` module
call these. CPU tensors run libmsda's CPU path with torch's thread count; CUDA tensors are
enqueued on torch's current stream of their device, with that device made current, because
libmsda launches in the calling thread's current CUDA context.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

from ._errors import GPU, MSDAError, MSDAInputError, Status
from ._library import DType, Sizes, library
from ._shapes import check_forward, check_grad_output, output_shape

_DTYPES = {
    torch.float32: DType.F32,
    torch.float64: DType.F64,
    torch.float16: DType.F16,
    torch.bfloat16: DType.BF16,
}


@dataclass
class _Inputs:
    """The arguments made ready for libmsda: contiguous, in value's dtype, levels on the host."""

    sizes: Sizes
    dtype: DType
    shapes: List[int]
    starts: List[int]
    value: torch.Tensor
    locations: torch.Tensor
    weights: torch.Tensor


def check_dtypes(value: torch.Tensor, spatial_shapes: torch.Tensor,
                 level_start_index: torch.Tensor, sampling_locations: torch.Tensor,
                 attention_weights: torch.Tensor) -> None:
    """Data types and devices; MSDAInputError naming the argument otherwise."""
    if value.dtype not in _DTYPES:
        raise MSDAInputError(f"msda: value has dtype {value.dtype}; the op computes in "
                             f"float32, float64, float16 or bfloat16")
    for name, t in (("sampling_locations", sampling_locations),
                    ("attention_weights", attention_weights)):
        if not t.is_floating_point():
            raise MSDAInputError(f"msda: {name} has dtype {t.dtype}; it must be floating point "
                                 f"(it is cast to value's {value.dtype})")
        if t.device != value.device:
            raise MSDAInputError(f"msda: {name} is on {t.device} and value on {value.device}; "
                                 f"the op needs them on one device")
    for name, t in (("spatial_shapes", spatial_shapes), ("level_start_index", level_start_index)):
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise MSDAInputError(f"msda: {name} has dtype {t.dtype}; it must be an integer "
                                 f"tensor (int64, as in Deformable-DETR)")


def _host_ints(t: torch.Tensor) -> List[int]:
    # At most 2 * MSDA_MAX_LEVELS numbers: copying them to the host is cheap, and libmsda wants
    # them there so that it validates the level table before any launch.
    return t.detach().to("cpu", torch.int64).reshape(-1).tolist()


def _prepare(value: torch.Tensor, spatial_shapes: torch.Tensor,
             level_start_index: torch.Tensor, sampling_locations: torch.Tensor,
             attention_weights: torch.Tensor) -> _Inputs:
    check_dtypes(value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    sizes = check_forward(value.shape, spatial_shapes.shape, level_start_index.shape,
                          sampling_locations.shape, attention_weights.shape)
    return _Inputs(sizes, _DTYPES[value.dtype], _host_ints(spatial_shapes),
                   _host_ints(level_start_index), value.contiguous(),
                   sampling_locations.to(value.dtype).contiguous(),
                   attention_weights.to(value.dtype).contiguous())


def _gpu(device: torch.device) -> Callable[[], Optional[GPU]]:
    def describe() -> Optional[GPU]:
        try:
            index = device.index if device.index is not None else torch.cuda.current_device()
            return GPU(index, torch.cuda.get_device_name(index),
                       tuple(torch.cuda.get_device_capability(index)))
        except Exception:  # the message must not fail for want of a device name
            return None
    return describe


def _launch(device: torch.device, call: Callable[..., None]) -> None:
    """Runs call(cuda_stream=..., gpu=...) for CUDA devices, call(threads=...) for the CPU."""
    if device.type == "cpu":
        call(threads=torch.get_num_threads())
        return
    if device.type != "cuda":
        raise MSDAInputError(f"msda: tensors on {device} are not supported (CPU and CUDA are)")
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        try:
            call(cuda_stream=stream, gpu=_gpu(device))
        except MSDAError as exc:
            if exc.status != Status.NO_CONTEXT:
                raise
            # A thread that has not yet made a CUDA runtime call (an autograd worker, a new
            # thread) may have no current context even though torch's current device is
            # right: a runtime call that needs one binds the device's primary context.
            torch.cuda.synchronize(device)
            call(cuda_stream=stream, gpu=_gpu(device))


@torch.no_grad()
def forward(value: torch.Tensor, spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
            sampling_locations: torch.Tensor, attention_weights: torch.Tensor) -> torch.Tensor:
    """The op's output (N, Lq, M * D) in value's dtype, on value's device."""
    p = _prepare(value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    shape = output_shape(p.sizes)
    if p.sizes.empty:
        return p.value.new_zeros(shape)
    output = p.value.new_empty(shape)

    def call(**where) -> None:
        library().forward(p.dtype, p.sizes, p.shapes, p.starts, p.value.data_ptr(),
                          p.locations.data_ptr(), p.weights.data_ptr(), output.data_ptr(),
                          **where)
    _launch(p.value.device, call)
    return output


@torch.no_grad()
def backward(value: torch.Tensor, spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
             sampling_locations: torch.Tensor, attention_weights: torch.Tensor,
             grad_output: torch.Tensor) -> List[torch.Tensor]:
    """[grad_value, grad_sampling_locations, grad_attention_weights], each in value's dtype."""
    p = _prepare(value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    check_grad_output(p.sizes, grad_output.shape)
    if grad_output.device != p.value.device:
        raise MSDAInputError(f"msda: grad_output is on {grad_output.device} and value on "
                             f"{p.value.device}")
    grad_output = grad_output.to(p.value.dtype).contiguous()
    if p.sizes.empty:
        return [torch.zeros_like(p.value), torch.zeros_like(p.locations),
                torch.zeros_like(p.weights)]
    grads = [torch.empty_like(p.value), torch.empty_like(p.locations), torch.empty_like(p.weights)]

    held: List[torch.Tensor] = []

    def workspace(nbytes: int) -> int:
        # From torch's caching allocator, on the call's stream: freed after the call, the
        # memory is reused only by work ordered after it on that stream.
        held.append(torch.empty(nbytes, dtype=torch.uint8, device=p.value.device))
        return held[-1].data_ptr()

    def call(**where) -> None:
        if "cuda_stream" in where:
            where["workspace"] = workspace
        library().backward(p.dtype, p.sizes, p.shapes, p.starts, p.value.data_ptr(),
                           p.locations.data_ptr(), p.weights.data_ptr(), grad_output.data_ptr(),
                           *(g.data_ptr() for g in grads), **where)
    _launch(p.value.device, call)
    return grads
