"""ctypes binding of libmsda (kernels/msda.h): loading, the argument structs, the calls.

Nothing here needs torch or numpy: callers pass raw addresses. ctypes releases the GIL for the
duration of each call, so the CPU path's threads and other Python threads run alongside.
"""
from __future__ import annotations

import ctypes
import enum
import os
import threading
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Sequence

from ._errors import GPU, MSDAError, error_from_status

ENV_LIBRARY = "MSDA_LIBRARY"
MAX_LEVELS = 16  # MSDA_MAX_LEVELS
# MSDA_ABI_VERSION of the msda.h these structs copy: a library of another one is refused.
ABI_VERSION = 5


class DType(enum.IntEnum):
    """msda_dtype."""

    F32 = 0
    F64 = 1
    F16 = 2
    BF16 = 3


class CoordType(enum.IntEnum):
    """msda_coord_type: the type of sampling_locations, attention_weights and their gradients."""

    SAME = 0  # value's
    F32 = 1   # f32 beside an f16/bf16 (or f32) value


class Weights(enum.IntEnum):
    """msda_weights: what attention_weights holds."""

    SOFTMAXED = 0  # weights, used as given
    LOGITS = 1     # logits: the op applies the softmax over each (n, q, m)'s L*P of them


class Sampling(enum.IntEnum):
    """msda_sampling: how a point samples its level."""

    BILINEAR = 0
    DISCRETE = 1   # the nearest pixel, clamped into the map (RT-DETR v2's "discrete")


class Memory(enum.IntEnum):
    """msda_memory: where the level table is."""

    HOST = 0
    DEVICE = 1


class _Sizes(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in
                ("batch", "spatial", "heads", "channels", "queries", "levels", "points")]


class _ForwardArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("sizes", _Sizes),
                ("spatial_shapes", ctypes.c_void_p), ("level_start", ctypes.c_void_p),
                ("value", ctypes.c_void_p), ("sampling_locations", ctypes.c_void_p),
                ("attention_weights", ctypes.c_void_p), ("output", ctypes.c_void_p),
                ("coord_type", ctypes.c_int), ("level_table", ctypes.c_int),
                ("device_status", ctypes.c_void_p), ("weights", ctypes.c_int),
                ("level_points", ctypes.c_void_p), ("sampling", ctypes.c_int)]


class _BackwardArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("sizes", _Sizes),
                ("spatial_shapes", ctypes.c_void_p), ("level_start", ctypes.c_void_p),
                ("value", ctypes.c_void_p), ("sampling_locations", ctypes.c_void_p),
                ("attention_weights", ctypes.c_void_p), ("grad_output", ctypes.c_void_p),
                ("grad_value", ctypes.c_void_p), ("grad_sampling_locations", ctypes.c_void_p),
                ("grad_attention_weights", ctypes.c_void_p),
                # msda.h's optional device workspace: the struct must match the C one exactly
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
                ("coord_type", ctypes.c_int), ("level_table", ctypes.c_int),
                ("device_status", ctypes.c_void_p), ("weights", ctypes.c_int),
                ("deterministic", ctypes.c_int32),
                ("level_points", ctypes.c_void_p), ("sampling", ctypes.c_int)]


class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("cuda_result", ctypes.c_int),
                ("cuda_name", ctypes.c_char * 64), ("message", ctypes.c_char * 320)]


class _Arch(ctypes.Structure):
    _fields_ = [("arch", ctypes.c_int), ("is_ptx", ctypes.c_int), ("fatbin", ctypes.c_int)]


class Sizes(NamedTuple):
    """The problem's sizes (docs/DESIGN.md, "The MSDA op"). A tuple: made on every call, cheaply."""

    batch: int     # N
    spatial: int   # S
    heads: int     # M
    channels: int  # D, per head
    queries: int   # Lq
    levels: int    # L
    points: int    # P

    @property
    def empty(self) -> bool:
        """True where some size is 0: the output is all zeros and libmsda is not called
        (it rejects sizes that are not positive)."""
        return min(self) == 0


@dataclass(frozen=True)
class Arch:
    """One code image embedded in libmsda."""

    arch: int
    is_ptx: bool
    fatbin: int

    @property
    def name(self) -> str:
        return f"{'compute' if self.is_ptx else 'sm'}_{self.arch}"


@dataclass(frozen=True)
class LibraryInfo:
    """What `msda.library_info()` returns."""

    version: str
    path: str
    archs: tuple[Arch, ...]
    fatbins: int

    @property
    def arch_names(self) -> tuple[str, ...]:
        """Each architecture and kind once, in the library's order: two toolkits' sm_90 (two
        images, one per fatbin, in `archs`) are one name."""
        return tuple(dict.fromkeys(a.name for a in self.archs))

    def __str__(self) -> str:
        archs = " ".join(self.arch_names) or "none (CPU only)"
        return f"libmsda {self.version} ({self.path}); device code: {archs}"


_SHIPPED = os.path.join(os.path.dirname(__file__), "libmsda.so")


def library_path() -> str:
    """$MSDA_LIBRARY if set, else the libmsda.so shipped inside this package."""
    return os.environ.get(ENV_LIBRARY) or _SHIPPED


def _declare(lib: ctypes.CDLL) -> None:
    err = ctypes.POINTER(_Error)
    signatures = {
        "msda_version": ([], ctypes.c_char_p),
        "msda_abi_version": ([], ctypes.c_int),
        "msda_validate_forward": ([ctypes.POINTER(_ForwardArgs), err], ctypes.c_int),
        "msda_status_string": ([ctypes.c_int], ctypes.c_char_p),
        "msda_forward_cpu": ([ctypes.POINTER(_ForwardArgs), ctypes.c_int, err], ctypes.c_int),
        "msda_backward_cpu": ([ctypes.POINTER(_BackwardArgs), ctypes.c_int, err], ctypes.c_int),
        "msda_forward_cuda": ([ctypes.POINTER(_ForwardArgs), ctypes.c_void_p, err], ctypes.c_int),
        "msda_backward_cuda": ([ctypes.POINTER(_BackwardArgs), ctypes.c_void_p, err],
                               ctypes.c_int),
        "msda_backward_cuda_workspace": ([ctypes.POINTER(_BackwardArgs),
                                          ctypes.POINTER(ctypes.c_size_t), err], ctypes.c_int),
        "msda_fatbin_count": ([], ctypes.c_int),
        "msda_embedded_archs": ([ctypes.POINTER(_Arch), ctypes.c_int], ctypes.c_int),
        "msda_embedded_archs_string": ([ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int),
    }
    for name, (argtypes, restype) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype


class Library:
    """libmsda, loaded once per process (see `library()`)."""

    def __init__(self, path: str) -> None:
        try:
            self._lib = ctypes.CDLL(path)
            _declare(self._lib)
        except (OSError, AttributeError) as exc:
            source = f"${ENV_LIBRARY}" if os.environ.get(ENV_LIBRARY) else "the msda package"
            raise MSDAError(
                f"msda [shared-lib-not-found]: cannot load libmsda from {path} (named by "
                f"{source}): {exc}. Reinstall the msda wheel, or point {ENV_LIBRARY} at a "
                f"libmsda.so built by `msda-doctor build`",
                finding_id="shared-lib-not-found") from exc
        abi = self._lib.msda_abi_version()
        if abi != ABI_VERSION:
            raise MSDAError(
                f"msda: libmsda at {path} has ABI {abi}, this msda package is written for ABI "
                f"{ABI_VERSION}: install the library and the package from one wheel")
        self.path = path
        # The entry points the op calls on every call, looked up once.
        self.forward_cpu = self._lib.msda_forward_cpu
        self.backward_cpu = self._lib.msda_backward_cpu
        self.forward_cuda = self._lib.msda_forward_cuda
        self.backward_cuda = self._lib.msda_backward_cuda
        self.backward_cuda_workspace = self._lib.msda_backward_cuda_workspace
        self.validate_forward = self._lib.msda_validate_forward

    # ---- what the library carries --------------------------------------------------------
    def version(self) -> str:
        return self._lib.msda_version().decode()

    def status_string(self, status: int) -> str:
        return self._lib.msda_status_string(status).decode()

    def archs(self) -> tuple[Arch, ...]:
        count = self._lib.msda_embedded_archs(None, 0)
        if count < 0:
            raise MSDAError(f"msda: the device code embedded in {self.path} is malformed")
        table = (_Arch * max(count, 1))()
        self._lib.msda_embedded_archs(table, count)
        return tuple(Arch(a.arch, bool(a.is_ptx), a.fatbin) for a in table[:count])

    def archs_string(self) -> str:
        needed = self._lib.msda_embedded_archs_string(None, 0)
        if needed < 0:
            return "malformed device code"
        buf = ctypes.create_string_buffer(needed + 1)
        self._lib.msda_embedded_archs_string(buf, needed + 1)
        return buf.value.decode()

    def info(self) -> LibraryInfo:
        return LibraryInfo(self.version(), self.path, self.archs(), self._lib.msda_fatbin_count())

    # ---- the op ---------------------------------------------------------------------------
    def forward(self, dtype: DType, sizes: Sizes, shapes: Sequence[int], starts: Sequence[int],
                value: int, locations: int, weights: int, output: int, *,
                cuda_stream: Optional[int] = None, threads: int = 0,
                gpu: Optional[Callable[[], Optional[GPU]]] = None,
                weights_are_logits: bool = False, level_points: Optional[Sequence[int]] = None,
                sampling: Sampling = Sampling.BILINEAR) -> None:
        """Writes output. The four tensors are addresses: host memory when cuda_stream is None
        (the CPU path, `threads` of them, 0 for each CPU the process may run on), else device
        memory of the current context, enqueued on that stream (0: the legacy default stream). weights_are_logits:
        the op applies the softmax to `weights` itself (msda.h, MSDA_WEIGHTS_LOGITS).
        level_points: the point count of each level (msda.h, level_points: the locations are
        then (N, Lq, M, sum, 2) and sizes.points the largest count); None, sizes.points on
        every level. sampling: bilinear, or the nearest pixel (msda.h, msda_sampling)."""
        shapes_arr, starts_arr = _level_table(shapes, starts)
        args = _ForwardArgs(int(dtype), _c_sizes(sizes), ctypes.cast(shapes_arr, ctypes.c_void_p),
                            ctypes.cast(starts_arr, ctypes.c_void_p), value, locations, weights,
                            output)
        args.weights = Weights.LOGITS if weights_are_logits else Weights.SOFTMAXED
        points_arr = _level_points(level_points)  # held until the call returns: args point into it
        if points_arr is not None:
            args.level_points = ctypes.addressof(points_arr)
        args.sampling = int(sampling)
        err = _Error()
        if cuda_stream is None:
            status = self._lib.msda_forward_cpu(ctypes.byref(args), threads, ctypes.byref(err))
        else:
            status = self._lib.msda_forward_cuda(ctypes.byref(args), cuda_stream,
                                                 ctypes.byref(err))
        self.check(status, err, gpu)

    def backward(self, dtype: DType, sizes: Sizes, shapes: Sequence[int], starts: Sequence[int],
                 value: int, locations: int, weights: int, grad_output: int, grad_value: int,
                 grad_locations: int, grad_weights: int, *, cuda_stream: Optional[int] = None,
                 threads: int = 0, gpu: Optional[Callable[[], Optional[GPU]]] = None,
                 workspace: Optional[Callable[[int], int]] = None,
                 weights_are_logits: bool = False, level_points: Optional[Sequence[int]] = None,
                 sampling: Sampling = Sampling.BILINEAR) -> None:
        """Writes the three gradients; as forward otherwise (with weights_are_logits, the third
        is the logits' gradient; with Sampling.DISCRETE, the locations' gradient is all zeros).
        On CUDA, `workspace(nbytes)` returns device memory the call may use on its stream (the
        caller's allocator), so that the library need not allocate one per call."""
        shapes_arr, starts_arr = _level_table(shapes, starts)
        args = _BackwardArgs(int(dtype), _c_sizes(sizes),
                             ctypes.cast(shapes_arr, ctypes.c_void_p),
                             ctypes.cast(starts_arr, ctypes.c_void_p), value, locations, weights,
                             grad_output, grad_value, grad_locations, grad_weights)
        args.weights = Weights.LOGITS if weights_are_logits else Weights.SOFTMAXED
        points_arr = _level_points(level_points)  # held until the calls return: args point into it
        if points_arr is not None:
            args.level_points = ctypes.addressof(points_arr)
        args.sampling = int(sampling)
        err = _Error()
        if cuda_stream is not None and workspace is not None:
            nbytes = ctypes.c_size_t(0)
            status = self._lib.msda_backward_cuda_workspace(ctypes.byref(args), ctypes.byref(nbytes),
                                                            ctypes.byref(err))
            self.check(status, err, gpu)
            if nbytes.value:
                args.workspace = workspace(nbytes.value)
                args.workspace_bytes = nbytes.value
        if cuda_stream is None:
            status = self._lib.msda_backward_cpu(ctypes.byref(args), threads, ctypes.byref(err))
        else:
            status = self._lib.msda_backward_cuda(ctypes.byref(args), cuda_stream,
                                                  ctypes.byref(err))
        self.check(status, err, gpu)

    def check(self, status: int, err: _Error,
              gpu: Optional[Callable[[], Optional[GPU]]] = None) -> None:
        """Raises the exception for a failed call's status and msda_error."""
        if status == 0:
            return
        detail = err.message.decode(errors="replace") or self.status_string(status)
        raise error_from_status(status, detail, cuda_result=err.cuda_result,
                                cuda_name=err.cuda_name.decode(errors="replace"),
                                archs=self.archs_string, gpu=gpu)


def _c_sizes(s: Sizes) -> _Sizes:
    return _Sizes(*s)


def _level_table(shapes: Sequence[int], starts: Sequence[int]):
    """The host int64 arrays of spatial_shapes (L rows of H, W) and level_start."""
    return (ctypes.c_int64 * len(shapes))(*shapes), (ctypes.c_int64 * len(starts))(*starts)


def _level_points(level_points: Optional[Sequence[int]]):
    """The host int64 array of level_points, or None (NULL: sizes.points on every level)."""
    if level_points is None:
        return None
    return (ctypes.c_int64 * len(level_points))(*level_points)


_lock = threading.Lock()
_loaded: dict = {}  # path -> Library


def library() -> Library:
    """The process's libmsda, loaded on first use from library_path() (asked on every call:
    the op's calls take the library $MSDA_LIBRARY names at the time)."""
    path = library_path()
    lib = _loaded.get(path)
    if lib is None:
        with _lock:  # one load even where threads race for the first call
            lib = _loaded.get(path)
            if lib is None:
                lib = _loaded[path] = Library(path)
    return lib
