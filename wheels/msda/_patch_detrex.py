"""msda.patch("detrex"): IDEA-Research's detrex on msda (_patch_c_ext says how).

detrex's op module, detrex/layers/multi_scale_deform_attn.py, imports `detrex._C`, the compiled
extension that also holds DCNv3's op; where that fails it replaces its layer class
MultiScaleDeformableAttention by a placeholder that raises "detrex is not compiled successfully"
when built. With the patch in place before detrex is imported, the stand-in `_C` lets the real
class stay: CUDA tensors run msda's kernels, other tensors msda's CPU path, and DCNv3's functions
of the stand-in raise when called, naming the op. Where detrex was imported before without its
`_C`, the placeholder cannot be undone, and msda.patch says so, switching nothing.
"""
from __future__ import annotations

from typing import List, Tuple

from . import _patch
from ._patch_c_ext import Project, plan as _plan

PROJECT = Project(framework="detrex", package="detrex", module="detrex.layers.multi_scale_deform_attn",
                  module_file=("layers", "multi_scale_deform_attn.py"), placeholder_without_ext=True)


def plan() -> Tuple[_patch.FrameworkPatch, List[_patch.Replacement]]:
    return _plan(PROJECT)
