"""msda: Multi-Scale Deformable Attention (Deformable-DETR's MSDeformAttn op) on libmsda, a C
library with device code for many GPU architectures and a multithreaded CPU path.

With torch:    msda.ms_deform_attn(...), msda.MSDeformAttn(...)  (CPU and CUDA tensors),
               msda.ms_deform_attn_points_per_level(...)  (a point count per level, "discrete"),
               msda.check_level_tables() (after CUDA-graph replays),
               msda.patch(), msda.unpatch()  (switch transformers', mmcv's, GroundingDINO's,
                                             detrex's and BEVFormer's op to msda and back),
               msda.kernels_repository()     (the same through the `kernels` package's mappings)
Without torch: msda.cpu_forward(...), msda.cpu_backward(...)     (numpy arrays)
Always:        msda.library_info(), msda.MSDAError

The torch parts are imported on first use, so that `import msda` works where torch is not
installed (and costs no torch import where it is not used).
"""
from __future__ import annotations

import importlib
from typing import Any, List

from ._errors import GPU, MSDAError, MSDAInputError, Status
from ._library import ENV_LIBRARY, Arch, LibraryInfo, library, library_path
from ._numpy_api import cpu_backward, cpu_forward
from ._patch import PatchError, PatchReport, patch, unpatch

try:  # written into the wheel by `msda-doctor build`, from the project's VERSION file
    from ._version import __version__
except ImportError:  # the sources themselves, not a built wheel
    __version__ = "0+source"

# Name -> (module, attribute) of what needs torch.
_TORCH_EXPORTS = {
    "ms_deform_attn": ("._torch_ops", "ms_deform_attn"),
    "ms_deform_attn_points_per_level": ("._points_per_level", "ms_deform_attn_points_per_level"),
    "MSDeformAttn": (".modules", "MSDeformAttn"),
    "check_level_tables": ("._torch_kernels", "check_level_tables"),
    "kernels_repository": ("._kernels_hub", "kernels_repository"),
}

__all__ = ["ms_deform_attn", "ms_deform_attn_points_per_level", "MSDeformAttn", "check_level_tables", "patch", "unpatch", "PatchError", "PatchReport",
           "kernels_repository",
           "cpu_forward", "cpu_backward", "library_info",
           "library_path", "LibraryInfo", "Arch", "MSDAError", "MSDAInputError", "Status",
           "GPU", "ENV_LIBRARY", "__version__"]


def library_info() -> LibraryInfo:
    """The loaded libmsda: version, path, and the device code it carries (sm_XY: machine code
    for that architecture; compute_XY: PTX the driver compiles for newer GPUs)."""
    return library().info()


def __getattr__(name: str) -> Any:
    if name not in _TORCH_EXPORTS:
        raise AttributeError(f"module 'msda' has no attribute '{name}'")
    module, attr = _TORCH_EXPORTS[name]
    try:
        value = getattr(importlib.import_module(module, __name__), attr)
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != "torch":
            raise
        raise ImportError(f"msda.{name} needs PyTorch, which is not importable here ({exc}). "
                          f"Install torch, or use msda.cpu_forward / msda.cpu_backward on numpy "
                          f"arrays", name=exc.name) from exc
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_TORCH_EXPORTS))
