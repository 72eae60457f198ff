"""libmsda on torch tensors, without autograd: one forward and one backward call.

Both the autograd paths (`_torch_ops`) and the drop-in `MultiScaleDeformableAttention` module
call these. CPU tensors run libmsda's CPU path with torch's thread count; CUDA tensors are
enqueued on torch's current stream of their device, with that device made current, because
libmsda launches in the calling thread's current CUDA context.

Made for small calls (a decoder layer's op runs in tens of microseconds on a GPU): the checks
are made once per combination of the inputs' shapes, types and devices (a _Plan), whose last
Call is reused while the level table (made once per tensor and version) and the library are
the same; the ctypes argument structs are reused per thread and refilled only for another
Call, and a level table on the GPU is handed to libmsda where it is,
so that no call copies it to the host or synchronises (models keep it on the GPU; a copy per
call would also forbid CUDA-graph capture).
"""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Callable, Dict, List, Optional, Tuple

import torch

from ._errors import GPU, MSDAInputError, Status, error_from_status
from ._library import (CoordType, DType, Library, Memory, Sampling, Sizes, Weights,
                       _BackwardArgs, _Error, _ForwardArgs, _Sizes, library)
from ._shapes import check_forward, check_forward_points, check_grad_output, output_shape

_DTYPES = {
    torch.float32: DType.F32,
    torch.float64: DType.F64,
    torch.float16: DType.F16,
    torch.bfloat16: DType.BF16,
}
_HALF = (torch.float16, torch.bfloat16)

# torch's current stream of a device as an integer, without building a Stream object.
_raw_stream: Optional[Callable[[int], int]] = getattr(torch._C, "_cuda_getCurrentRawStream",
                                                       None)


_INTEGER = frozenset(getattr(torch, name) for name in
                     ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64")
                     if hasattr(torch, name))
_CPU = torch.device("cpu")


def aligned(t: torch.Tensor) -> torch.Tensor:
    """t, or a copy of it where t is a CUDA tensor whose data does not start on a 16-byte boundary.
    libmsda's kernels take 16 bytes a lane where value, grad_output and the results start on
    one; elsewhere it stages the call into padded copies of its own, in memory outside torch's
    allocator, and its forward's fast path needs each point's x and y aligned as a pair
    (msda.h). A contiguous view can start anywhere in its storage (a flat buffer's x[1:]), and
    a copy starts where the allocator puts it."""
    return t.clone() if t.is_cuda and t.data_ptr() % 16 else t


# torch.use_deterministic_algorithms's state (torch 1.8 and later).
_deterministic: Callable[[], bool] = getattr(torch, "are_deterministic_algorithms_enabled",
                                             lambda: False)


def check_dtypes(value: torch.Tensor, spatial_shapes: torch.Tensor,
                 level_start_index: torch.Tensor, sampling_locations: torch.Tensor,
                 attention_weights: torch.Tensor) -> None:
    """Data types and devices; MSDAInputError naming the argument otherwise."""
    if value.dtype not in _DTYPES:
        raise MSDAInputError(f"msda: value has dtype {value.dtype}; the op computes in "
                             f"float32, float64, float16 or bfloat16")
    device = value.device
    for name, t in (("sampling_locations", sampling_locations),
                    ("attention_weights", attention_weights)):
        if not t.is_floating_point():
            raise MSDAInputError(f"msda: {name} has dtype {t.dtype}; it must be floating point")
        if t.device != device:
            raise MSDAInputError(f"msda: {name} is on {t.device} and value on {device}; "
                                 f"the op needs them on one device")
    for name, t in (("spatial_shapes", spatial_shapes), ("level_start_index", level_start_index)):
        if t.dtype not in _INTEGER:
            raise MSDAInputError(f"msda: {name} has dtype {t.dtype}; it must be an integer "
                                 f"tensor (int64, as in Deformable-DETR)")
        where = t.device
        if where != device and where != _CPU:
            raise MSDAInputError(f"msda: {name} is on {where} and value on {device}; "
                                 f"the level table must be on the CPU or on value's device")


def coord_dtype(value: torch.dtype, locations: torch.dtype, weights: torch.dtype) -> torch.dtype:
    """The type the op computes sampling_locations and attention_weights (and returns their
    gradients) in: value's, except beside an f16/bf16 value where either is in another type
    (as autocast gives): then f32, so that locations are never rounded to 16 bits."""
    if value in _HALF and (locations != value or weights != value):
        return torch.float32
    return value


# ---- shapes ----------------------------------------------------------------------------------
class _Plan:
    """What prepare's checks found for one combination of the five tensors' shapes, dtypes and
    devices and the weights' kind: found once, then looked up by that combination. `call` is
    the last Call made under it, which the next call takes where its table and library are the
    same ones (a model's layers pass one table)."""

    __slots__ = ("sizes", "c_sizes", "cdt", "out_shape", "call", "points", "points_address",
                 "sampling")

    def __init__(self, sizes: Sizes, c_sizes: _Sizes, cdt: torch.dtype,
                 points: Optional[Tuple[int, ...]] = None, discrete: bool = False) -> None:
        self.sizes = sizes
        self.c_sizes = c_sizes
        self.cdt = cdt
        self.out_shape = output_shape(sizes)
        self.call: Optional["Call"] = None
        # A point count per level (msda.h, level_points): the C array, kept alive here.
        self.points = None if points is None else (ctypes.c_int64 * len(points))(*points)
        self.points_address = None if points is None else ctypes.addressof(self.points)
        self.sampling = Sampling.DISCRETE if discrete else Sampling.BILINEAR


_plans: Dict[tuple, _Plan] = {}


# ---- the level table ---------------------------------------------------------------------------
class _Table:
    """A level table as libmsda takes it: addresses of int64 data on the host or the device,
    and what keeps that memory alive."""

    __slots__ = ("memory", "shapes", "starts", "keep", "host", "refs", "versions", "checked",
                 "__weakref__")

    def __init__(self, memory: Memory, shapes: int, starts: int, keep: tuple,
                 host: Optional[tuple], refs: tuple, versions: tuple) -> None:
        self.memory = memory
        self.shapes = shapes
        self.starts = starts
        self.keep = keep
        self.host = host          # the table's numbers where they are known on the host
        self.refs = refs          # weak references to the caller's two tensors
        self.versions = versions  # their _version when this was made
        self.checked: set = set()  # the S values a device table was found consistent with


# (id(spatial_shapes), id(level_start_index)) -> _Table; an entry goes when either tensor does.
_tables: Dict[Tuple[int, int], _Table] = {}
_tables_lock = threading.Lock()


def _drop(key: Tuple[int, int]) -> Callable[[object], None]:
    # The lock and the dict bound now: at interpreter exit a tensor can outlive this module's
    # globals, and its weakref callback would find them None.
    def drop(_ref: object, lock: threading.Lock = _tables_lock, tables: dict = _tables) -> None:
        with lock:
            tables.pop(key, None)
    return drop


def _make_table(shapes: torch.Tensor, starts: torch.Tensor, key: Tuple[int, int]) -> _Table:
    refs = (weakref.ref(shapes, _drop(key)), weakref.ref(starts, _drop(key)))
    versions = (shapes._version, starts._version)
    if shapes.device.type == "cuda":
        # int64 and dense, where it is: no copy to the host. (Another integer type is converted
        # on the device, once per tensor version.)
        d_shapes = shapes.detach().to(torch.int64).contiguous()
        d_starts = starts.detach().to(torch.int64).contiguous()
        # Only converted copies are held: a strong reference to the caller's own tensors would
        # keep them, and this entry, alive for ever.
        keep = (None if d_shapes is shapes else d_shapes, None if d_starts is starts else d_starts)
        return _Table(Memory.DEVICE, d_shapes.data_ptr(), d_starts.data_ptr(), keep, None, refs,
                      versions)
    host_shapes = shapes.detach().to(torch.int64).reshape(-1).tolist()
    host_starts = starts.detach().to(torch.int64).reshape(-1).tolist()
    a_shapes = (ctypes.c_int64 * max(len(host_shapes), 1))(*host_shapes)
    a_starts = (ctypes.c_int64 * max(len(host_starts), 1))(*host_starts)
    return _Table(Memory.HOST, ctypes.addressof(a_shapes), ctypes.addressof(a_starts),
                  (a_shapes, a_starts), (tuple(host_shapes), tuple(host_starts)), refs, versions)


def level_table(shapes: torch.Tensor, starts: torch.Tensor) -> _Table:
    """The _Table of these two tensors: made once per pair and per version of their contents
    (an in-place change bumps a tensor's _version, so it is seen)."""
    key = (id(shapes), id(starts))
    t = _tables.get(key)
    if (t is None or t.refs[0]() is not shapes or t.refs[1]() is not starts
            or t.versions != (shapes._version, starts._version)):
        t = _make_table(shapes, starts, key)
        with _tables_lock:
            _tables[key] = t
    return t


# One int32 per device where the kernels store the status of an inconsistent device table.
_device_status: Dict[int, torch.Tensor] = {}


def _status_tensor(index: int) -> torch.Tensor:
    st = _device_status.get(index)
    if st is None:
        st = _device_status.setdefault(
            index, torch.zeros(1, dtype=torch.int32, device=torch.device("cuda", index)))
    return st


def _table_error(status: int, where: str) -> MSDAInputError:
    return error_from_status(status, f"{where}: {library().status_string(status)}")


def check_level_tables(device: Optional[torch.device] = None) -> None:
    """Raises MSDAInputError if a call on this GPU (torch's current one by default) since the
    last check was given an inconsistent level table in GPU memory; such calls index nothing and
    return NaN. Synchronises with the device: for use after CUDA-graph replays, say, whose calls
    no Python code sees. Eager calls check each new table themselves."""
    index = torch.device(device).index if device is not None else None
    if index is None:
        index = torch.cuda.current_device()
    st = _device_status.get(index)
    if st is None:
        return
    status = int(st.item())
    if status:
        st.zero_()
        raise _table_error(status, f"a level table on cuda:{index} was inconsistent in a call "
                                   f"since the last check")


def _check_device_table(t: _Table, shapes: torch.Tensor, starts: torch.Tensor, sizes: Sizes,
                        index: int) -> None:
    """The one host check of a device table (per tensor version and S): one copy, one sync.
    Skipped while a CUDA graph is being captured (no sync may happen then): the kernels check
    the table themselves and record a bad one for check_level_tables."""
    if sizes.spatial in t.checked or torch.cuda.is_current_stream_capturing():
        return
    shapes = t.keep[0] if t.keep[0] is not None else shapes
    starts = t.keep[1] if t.keep[1] is not None else starts
    status = _status_tensor(index)
    numbers = torch.cat([shapes.reshape(-1), starts.reshape(-1), status.to(torch.int64)]).tolist()
    n = 2 * sizes.levels
    if numbers[-1]:
        status.zero_()
        raise _table_error(int(numbers[-1]), f"a level table on cuda:{index} was inconsistent in "
                                             f"an earlier call (e.g. a CUDA graph replay)")
    lib = library()
    host_shapes = (ctypes.c_int64 * n)(*numbers[:n])
    host_starts = (ctypes.c_int64 * sizes.levels)(*numbers[n:n + sizes.levels])
    # Every pointer but the table's is a placeholder: validation reads only the table.
    args = _ForwardArgs(int(DType.F32), _Sizes(*sizes), ctypes.addressof(host_shapes),
                        ctypes.addressof(host_starts), 1, 1, 1, 1)
    err = _Error()
    lib.check(lib.validate_forward(ctypes.byref(args), ctypes.byref(err)), err)
    t.checked.add(sizes.spatial)


# ---- the calls ---------------------------------------------------------------------------------
class _PerThread(threading.local):
    """Argument structs reused by every call of a thread (libmsda reads them only during the
    call). `fwd_call` and `bwd_call`: the Call whose fields other than the tensors' addresses
    each struct holds now (a model's calls mostly repeat one Call)."""

    def __init__(self) -> None:
        self.fwd = _ForwardArgs()
        self.bwd = _BackwardArgs()
        self.err = _Error()
        self.fwd_ref = ctypes.byref(self.fwd)
        self.bwd_ref = ctypes.byref(self.bwd)
        self.err_ref = ctypes.byref(self.err)
        self.nbytes = ctypes.c_size_t(0)
        self.nbytes_ref = ctypes.byref(self.nbytes)
        self.fwd_call: Optional[Call] = None
        self.bwd_call: Optional[Call] = None


_per_thread = _PerThread()


def _gpu(device: torch.device) -> Callable[[], Optional[GPU]]:
    def describe() -> Optional[GPU]:
        try:
            index = device.index if device.index is not None else torch.cuda.current_device()
            return GPU(index, torch.cuda.get_device_name(index),
                       tuple(torch.cuda.get_device_capability(index)))
        except Exception:  # the message must not fail for want of a device name
            return None
    return describe


def _cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _stream(index: int) -> int:
    """torch's current stream of the device, as the integer libmsda takes."""
    return _raw_stream(index) if _raw_stream else torch.cuda.current_stream(index).cuda_stream


def _cuda_status(fn: Callable[..., int], *args) -> int:
    """fn(*args), once more where it found no current CUDA context: a thread that has made no
    CUDA runtime call yet (an autograd worker, a new thread) may have none even though torch's
    current device is right, and a runtime call that needs one binds the device's primary
    context."""
    status = fn(*args)
    if status == Status.NO_CONTEXT:
        torch.cuda.synchronize()
        status = fn(*args)
    return status


class Call:
    """One call's inputs as libmsda takes them, apart from the tensors: checked and looked up
    by `prepare`, used by the forward, and handed to the backward, which has nothing left to
    check or look up (a decoder layer's op runs in tens of microseconds on a GPU, and every
    microsecond of Python shows). Calls of one plan, table and library share one Call."""

    __slots__ = ("sizes", "empty", "c_sizes", "out_shape", "dtype", "cdt", "logits", "device",
                 "table", "index", "status", "lib", "workspace", "plan", "discrete")

    def __init__(self, plan: _Plan, dtype: torch.dtype, logits: bool, device: torch.device,
                 table: Optional[_Table], index: int, status: int, lib: Library) -> None:
        self.sizes = plan.sizes
        self.empty = plan.sizes.empty  # libmsda is not called (it rejects sizes of 0)
        self.c_sizes = plan.c_sizes
        self.out_shape = plan.out_shape  # the output's shape, and grad_output's
        self.dtype = dtype      # value's, the output's and grad_value's
        self.cdt = plan.cdt     # coord_dtype: the locations', the weights' and their gradients'
        self.logits = logits    # attention_weights are logits (the fused softmax)
        self.device = device
        self.table = table      # None for an empty problem, which reaches no library call
        self.index = index      # the CUDA device's index; -1 for the CPU
        self.status = status    # the device status word's address for a GPU table, else 0
        self.lib = lib          # the library of the call's forward, which its backward takes too
        # The backward's workspace bytes, usual and deterministic (None: not asked yet); a
        # Call's table, sizes, types and device decide them.
        self.workspace: List[Optional[int]] = [None, None]
        self.plan = plan        # its level_points and sampling (held: the C array lives there)
        self.discrete = plan.sampling == Sampling.DISCRETE  # no gradient reaches the locations


def _make_plan(key: tuple, value: torch.Tensor, spatial_shapes: torch.Tensor,
               level_start_index: torch.Tensor, sampling_locations: torch.Tensor,
               attention_weights: torch.Tensor, points: Optional[Tuple[int, ...]] = None,
               discrete: bool = False) -> _Plan:
    check_dtypes(value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    if points is None:
        sizes = check_forward(value.shape, spatial_shapes.shape, level_start_index.shape,
                              sampling_locations.shape, attention_weights.shape)
    else:
        sizes = check_forward_points(value.shape, spatial_shapes.shape, level_start_index.shape,
                                     sampling_locations.shape, attention_weights.shape, points)
    plan = _Plan(sizes, _Sizes(*sizes), coord_dtype(value.dtype, sampling_locations.dtype,
                                                    attention_weights.dtype), points, discrete)
    if len(_plans) > 512:  # a model has a handful; a sweep must not grow it forever
        _plans.clear()
    _plans[key] = plan
    return plan


def prepare(value: torch.Tensor, spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
            sampling_locations: torch.Tensor, attention_weights: torch.Tensor, *,
            weights_are_logits: bool = False, points: Optional[Tuple[int, ...]] = None,
            discrete: bool = False
            ) -> Tuple[Call, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Call and the three tensors as the kernels take them: the locations and weights cast
    to coord_dtype, all three contiguous, value and the locations `aligned`. Type, device and
    shape errors and an inconsistent level table raise MSDAInputError here, before any work.
    points: a point count per level (the locations then (N, Lq, M, sum, 2)); discrete: the
    nearest pixel rather than the bilinear sample (msda.h, msda_sampling)."""
    device = value.device
    # Everything the checks read: a combination seen before passed them.
    key = (value.shape, value.dtype, device, sampling_locations.shape, sampling_locations.dtype,
           sampling_locations.device, attention_weights.shape, attention_weights.dtype,
           attention_weights.device, spatial_shapes.shape, spatial_shapes.dtype,
           spatial_shapes.device, level_start_index.shape, level_start_index.dtype,
           level_start_index.device, weights_are_logits, points, discrete)
    plan = _plans.get(key)
    if plan is None:
        plan = _make_plan(key, value, spatial_shapes, level_start_index, sampling_locations,
                          attention_weights, points, discrete)
    cdt = plan.cdt
    if sampling_locations.dtype != cdt:
        sampling_locations = sampling_locations.to(cdt)
    if attention_weights.dtype != cdt:
        attention_weights = attention_weights.to(cdt)
    lib = library()
    call = plan.call
    if plan.sizes.empty:
        if call is None or call.lib is not lib:
            call = plan.call = Call(plan, value.dtype, weights_are_logits, device, None, -1, 0,
                                    lib)
    else:
        table = level_table(spatial_shapes, level_start_index)
        if call is None or call.table is not table or call.lib is not lib:
            call = _new_call(plan, value.dtype, weights_are_logits, device, table,
                             spatial_shapes, level_start_index, lib)
    return (call, aligned(value.contiguous()), aligned(sampling_locations.contiguous()),
            attention_weights.contiguous())


def _new_call(plan: _Plan, dtype: torch.dtype, logits: bool, device: torch.device,
              table: _Table, spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
              lib: Library) -> Call:
    """A Call on this table; kept as the plan's where its table is checked (a device table
    seen first while a CUDA graph is captured is checked by a later call)."""
    index, status = -1, 0
    if device.type != "cpu":  # on the CPU, check_dtypes saw to it that the table is there too
        if device.type != "cuda":
            raise MSDAInputError(f"msda: tensors on {device} are not supported (CPU and CUDA "
                                 f"are)")
        if spatial_shapes.device.type != level_start_index.device.type:
            raise MSDAInputError(f"msda: spatial_shapes is on {spatial_shapes.device} and "
                                 f"level_start_index on {level_start_index.device}; the level "
                                 f"table must be in one place")
        index = _cuda_index(device)
        if table.memory == Memory.DEVICE:
            _check_device_table(table, spatial_shapes, level_start_index, plan.sizes, index)
            status = _status_tensor(index).data_ptr()
    call = Call(plan, dtype, logits, device, table, index, status, lib)
    if table.memory != Memory.DEVICE or plan.sizes.spatial in table.checked:
        plan.call = call
    return call


def _bind(a, held: Optional[Call], call: Call, value: torch.Tensor, loc: torch.Tensor,
          w: torch.Tensor) -> Call:
    """Points args struct `a` at the call's three inputs, refilling the fields a Call decides
    where `held`, the Call whose fields it holds now, is another one. Returns the Call it
    holds afterwards."""
    if held is not call:
        table = call.table
        a.dtype = _DTYPES[call.dtype]
        a.weights = Weights.LOGITS if call.logits else Weights.SOFTMAXED
        a.sizes = call.c_sizes
        a.spatial_shapes = table.shapes
        a.level_start = table.starts
        a.level_table = table.memory
        a.device_status = call.status
        a.coord_type = CoordType.F32 if call.cdt != call.dtype else CoordType.SAME
        a.level_points = call.plan.points_address
        a.sampling = call.plan.sampling
    a.value = value.data_ptr()
    a.sampling_locations = loc.data_ptr()
    a.attention_weights = w.data_ptr()
    return call


def run_forward(call: Call, value: torch.Tensor, loc: torch.Tensor,
                w: torch.Tensor) -> torch.Tensor:
    """The op's output (N, Lq, M * D) in value's dtype, on value's device, for tensors as
    `prepare` returned them. Records no autograd graph. CUDA tensors: on torch's current stream
    of their device, with that device made current."""
    if call.empty:
        return value.new_zeros(call.out_shape)
    index = call.index
    if index >= 0 and torch.cuda.current_device() != index:
        with torch.cuda.device(index):
            return run_forward(call, value, loc, w)
    output = value.new_empty(call.out_shape)
    pt = _per_thread
    a = pt.fwd
    pt.fwd_call = _bind(a, pt.fwd_call, call, value, loc, w)
    a.output = output.data_ptr()
    lib = call.lib
    if index < 0:
        status = lib.forward_cpu(pt.fwd_ref, torch.get_num_threads(), pt.err_ref)
    else:
        status = _cuda_status(lib.forward_cuda, pt.fwd_ref, _stream(index), pt.err_ref)
    if status:
        lib.check(status, pt.err, None if index < 0 else _gpu(call.device))
    return output


def run_backward(call: Call, value: torch.Tensor, loc: torch.Tensor, w: torch.Tensor,
                 grad_output: torch.Tensor, value_grad: bool = True) -> List[torch.Tensor]:
    """[grad_value, grad_sampling_locations, grad_attention_weights] for tensors as `prepare`
    returned them: the first in value's dtype, the others in coord_dtype's (with logits, the
    third is the gradient with respect to them). value_grad: whether the caller uses
    grad_value: under torch.use_deterministic_algorithms(True) a CUDA backward that returns it
    sums it exactly (msda.h, `deterministic`: the same bits on every run, at a cost); the other
    two are deterministic either way, so without it the usual kernels run."""
    if grad_output.shape != call.out_shape:
        check_grad_output(call.sizes, grad_output.shape)
    device = call.device
    if grad_output.device != device:
        raise MSDAInputError(f"msda: grad_output is on {grad_output.device} and value on "
                             f"{device}")
    if grad_output.dtype != call.dtype:
        grad_output = grad_output.to(call.dtype)
    grad_output = aligned(grad_output.contiguous())
    if call.empty:
        return [torch.zeros_like(value), torch.zeros_like(loc), torch.zeros_like(w)]
    index = call.index
    if index >= 0 and torch.cuda.current_device() != index:
        with torch.cuda.device(index):
            return run_backward(call, value, loc, w, grad_output, value_grad)
    deterministic = index >= 0 and value_grad and _deterministic()
    # Each is written entirely by the call (grad_value zeroed by it first).
    grads = [torch.empty_like(value), torch.empty_like(loc), torch.empty_like(w)]
    pt = _per_thread
    a = pt.bwd
    pt.bwd_call = _bind(a, pt.bwd_call, call, value, loc, w)
    a.grad_output = grad_output.data_ptr()
    a.grad_value = grads[0].data_ptr()
    a.grad_sampling_locations = grads[1].data_ptr()
    a.grad_attention_weights = grads[2].data_ptr()
    a.workspace = None
    a.workspace_bytes = 0
    a.deterministic = deterministic
    lib = call.lib
    if index < 0:
        status = lib.backward_cpu(pt.bwd_ref, torch.get_num_threads(), pt.err_ref)
        if status:
            lib.check(status, pt.err)
        return grads
    nbytes = call.workspace[deterministic]
    status = 0
    if nbytes is None:
        status = _cuda_status(lib.backward_cuda_workspace, pt.bwd_ref, pt.nbytes_ref, pt.err_ref)
        nbytes = pt.nbytes.value
        if not status:
            call.workspace[deterministic] = nbytes
    if not status:
        if nbytes:
            # From torch's caching allocator, on the call's stream: freed when this function
            # returns, the memory is reused only by work ordered after the call on that stream.
            # Left as it comes: the call zeroes what it uses.
            workspace = torch.empty(nbytes, dtype=torch.uint8, device=device)
            a.workspace = workspace.data_ptr()
            a.workspace_bytes = nbytes
        status = _cuda_status(lib.backward_cuda, pt.bwd_ref, _stream(index), pt.err_ref)
    if status:
        lib.check(status, pt.err, _gpu(device))
    return grads


def forward(value: torch.Tensor, spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
            sampling_locations: torch.Tensor, attention_weights: torch.Tensor, *,
            weights_are_logits: bool = False, points: Optional[Tuple[int, ...]] = None,
            discrete: bool = False) -> torch.Tensor:
    """prepare, then run_forward: the output for the op's five arguments as users pass them.
    weights_are_logits: the kernels softmax attention_weights over each (n, q, m)'s L*P."""
    call, value, loc, w = prepare(value, spatial_shapes, level_start_index, sampling_locations,
                                  attention_weights, weights_are_logits=weights_are_logits,
                                  points=points, discrete=discrete)
    return run_forward(call, value, loc, w)


def backward(value: torch.Tensor, spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
             sampling_locations: torch.Tensor, attention_weights: torch.Tensor,
             grad_output: torch.Tensor, *,
             weights_are_logits: bool = False, points: Optional[Tuple[int, ...]] = None,
             discrete: bool = False) -> List[torch.Tensor]:
    """prepare, then run_backward: the three gradients for the op's arguments and grad_output."""
    call, value, loc, w = prepare(value, spatial_shapes, level_start_index, sampling_locations,
                                  attention_weights, weights_are_logits=weights_are_logits,
                                  points=points, discrete=discrete)
    return run_backward(call, value, loc, w, grad_output)
