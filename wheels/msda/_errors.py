"""Exceptions of the msda package, and the message for each libmsda status.

Every failure names its cause; where it is one of the known failure signatures of the MSDA op
(docs/DESIGN.md, "Finding IDs") the message starts with that ID in brackets and the exception carries
it as `finding_id`, so that `msda-doctor diagnose` and people reading a log find the same fix.

The IDs and the commands between backquotes are copies of recipes/signatures.json, the owner:
each ID is an entry's "id", each command one of its "fix" entries as diagnose fills it; a command
needing a value this package does not know is not quoted, as diagnose leaves it out.
tests/test_errors_ids.py holds them to it.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Optional


class Status(enum.IntEnum):
    """msda_status of kernels/msda.h (values are stable)."""

    OK = 0
    NULL_ARGUMENT = 1
    BAD_DTYPE = 2
    BAD_SIZE = 3
    TOO_MANY_LEVELS = 4
    BAD_SHAPE = 5
    SHAPE_SUM = 6
    LEVEL_START = 7
    SIZE_OVERFLOW = 8
    NO_DRIVER = 9
    DRIVER_TOO_OLD = 10
    NO_CONTEXT = 11
    NO_KERNEL_IMAGE = 12
    DTYPE_NOT_BUILT = 13
    CUDA = 14
    OUT_OF_MEMORY = 15
    TOO_MANY_CONTEXTS = 16
    BAD_ARGUMENT = 17


# Statuses that mean the caller's tensors are wrong, not the library or the machine.
_INPUT_STATUSES = frozenset({
    Status.NULL_ARGUMENT, Status.BAD_DTYPE, Status.BAD_SIZE, Status.TOO_MANY_LEVELS,
    Status.BAD_SHAPE, Status.SHAPE_SUM, Status.LEVEL_START, Status.SIZE_OVERFLOW,
    Status.BAD_ARGUMENT,
})

# CUresult values (docs/FACTS.md, "CUDA error codes") that are known failure signatures.
_CUDA_NO_BINARY_FOR_GPU = 209
_CUDA_INVALID_PTX = 218
_CUDA_UNSUPPORTED_PTX_VERSION = 222
_CUDA_INSUFFICIENT_DRIVER = 35
_CUDA_ILLEGAL_ADDRESS = 700
_CUDA_LAUNCH_OUT_OF_RESOURCES = 701

_FINDING_BY_CUDA_RESULT = {
    _CUDA_NO_BINARY_FOR_GPU: "no-kernel-image",
    _CUDA_INVALID_PTX: "ptx-jit-failure",
    _CUDA_UNSUPPORTED_PTX_VERSION: "driver-too-old",
    _CUDA_INSUFFICIENT_DRIVER: "driver-too-old",
    _CUDA_ILLEGAL_ADDRESS: "illegal-memory-access",
    _CUDA_LAUNCH_OUT_OF_RESOURCES: "launch-out-of-resources",
}

_FINDING_BY_STATUS = {
    Status.NO_KERNEL_IMAGE: "no-kernel-image",
    Status.DTYPE_NOT_BUILT: "dtype-half-unsupported",
    Status.DRIVER_TOO_OLD: "driver-too-old",
}


class MSDAError(RuntimeError):
    """A failure of the MSDA op.

    status: the libmsda status (a Status), or None where Python found the problem first.
    finding_id: the failure signature's ID (e.g. "no-kernel-image"), or None.
    cuda_result, cuda_name: the CUresult behind a CUDA failure, else 0 and "".
    """

    def __init__(self, message: str, *, status: Optional[int] = None,
                 finding_id: Optional[str] = None, cuda_result: int = 0,
                 cuda_name: str = "") -> None:
        super().__init__(message)
        self.status = Status(status) if status is not None else None
        self.finding_id = finding_id
        self.cuda_result = cuda_result
        self.cuda_name = cuda_name


class MSDAInputError(MSDAError, ValueError):
    """The arguments are wrong (shapes, dtypes, devices, level table); also a ValueError."""


@dataclass(frozen=True)
class GPU:
    """The device a CUDA call ran on, for messages."""

    index: int
    name: str
    capability: tuple[int, int]

    @property
    def sm(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"

    def describe(self) -> str:
        major, minor = self.capability
        return f"cuda:{self.index} ({self.name}, compute capability {major}.{minor}, {self.sm})"


def finding_for(status: int, cuda_result: int) -> Optional[str]:
    """The finding ID of a libmsda failure, or None if it is no known signature."""
    # The CUresult is the more specific of the two: a NO_KERNEL_IMAGE status can come from a
    # PTX the driver is too old to compile, whose fix is another one.
    if cuda_result in _FINDING_BY_CUDA_RESULT:
        return _FINDING_BY_CUDA_RESULT[cuda_result]
    try:
        return _FINDING_BY_STATUS.get(Status(status))
    except ValueError:
        return None


def _gpu_arch(gpu: Optional[GPU]) -> str:
    """signatures.json's {gpu_arch|arch}: the GPU's sm_XY; "all" where the GPU is unknown, as
    diagnose fills {arch} when it knows no GPU (build's default)."""
    return gpu.sm if gpu else "all"


def _rebuild_hint(gpu: Optional[GPU]) -> str:
    return f"msda-doctor build --arch {_gpu_arch(gpu)}"  # signatures.json's fix


def _explain(finding: Optional[str], status: int, gpu: Optional[GPU], archs: str) -> str:
    """What went wrong and the fix, for the failures that have a known one."""
    where = f" on {gpu.describe()}" if gpu else ""
    carried = archs or "no device code"
    build = _rebuild_hint(gpu)
    if finding == "no-kernel-image":
        return (f"libmsda has no device code that loads{where}; this build carries: {carried}. "
                f"Fix: build a wheel for this GPU with `{build}` and install it")
    if finding == "ptx-jit-failure":
        return (f"the driver could not compile libmsda's PTX{where}; this build carries: "
                f"{carried}. Fix: build machine code (SASS) for this GPU with `{build}`")
    if finding == "driver-too-old":
        # Which installed toolkit's SASS the driver loads is diagnose's to find: the command
        # (build --toolkit DIR) is not quoted without the folder.
        return (f"the NVIDIA driver is older than the toolkit that built libmsda{where}; this "
                f"build carries: {carried}. Fix: update the driver, or build with a toolkit whose "
                f"SASS the driver loads (msda-doctor diagnose names one installed here, or the "
                f"CUDA release to fetch)")
    if finding == "dtype-half-unsupported":
        return (f"libmsda's device code{where} was built without this data type. Fix: "
                f"`{build}` (it enables f16/bf16 wherever the architecture has them), or run "
                f"the op in float32")
    if finding == "launch-out-of-resources":
        return (f"a kernel needed more registers or threads than the device gives one block"
                f"{where}. Fix: build for this GPU's own limits with `{build}`")
    if finding == "illegal-memory-access":
        return (f"a kernel read or wrote outside its tensors{where}; check that every input is "
                f"on the same device and that spatial_shapes and level_start_index match value")
    if status == Status.NO_DRIVER:
        return "CUDA tensors need the NVIDIA driver (libcuda.so.1), which could not be loaded"
    if status == Status.NO_CONTEXT:
        return f"no CUDA context is current on this thread{where}"
    return "libmsda failed"


def error_from_status(status: int, detail: str, *, cuda_result: int = 0, cuda_name: str = "",
                      archs: Callable[[], str] = lambda: "",
                      gpu: Optional[Callable[[], Optional[GPU]]] = None) -> MSDAError:
    """The exception for a failed libmsda call.

    detail: libmsda's own message (msda_error.message). archs and gpu are asked only here, on
    failure, so that the fast path never queries the device.
    """
    if status in _INPUT_STATUSES:
        return MSDAInputError(f"msda: invalid input: {detail}", status=status)
    finding = finding_for(status, cuda_result)
    gpu_info = gpu() if gpu else None
    # The embedded architectures matter only where the device code itself is the problem.
    listed = archs() if finding in ("no-kernel-image", "ptx-jit-failure", "driver-too-old") else ""
    head = f"msda [{finding}]: " if finding else "msda: "
    message = f"{head}{_explain(finding, status, gpu_info, listed)} (libmsda: {detail})"
    return MSDAError(message, status=status, finding_id=finding, cuda_result=cuda_result,
                     cuda_name=cuda_name)
