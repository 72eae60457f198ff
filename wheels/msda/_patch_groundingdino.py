"""msda.patch("groundingdino"): IDEA-Research's GroundingDINO on msda (_patch_c_ext says how).

GroundingDINO's op module, groundingdino/models/GroundingDINO/ms_deform_attn.py, imports
`groundingdino._C` in a try that, when it fails, only warns "Failed to load custom C++ ops.
Running on CPU mode Only!": its layer then fails on CUDA tensors with "name '_C' is not defined"
and runs grid_sample on the CPU. With the patch, CUDA tensors run msda's kernels through the
stand-in `_C` (or through the compiled one's two functions, switched, where it loads), and other
tensors msda's CPU path. groundingdino-py, a copy without the compiled op whose layer always runs
the PyTorch function, has that function switched.
"""
from __future__ import annotations

from typing import List, Tuple

from . import _patch
from ._patch_c_ext import Project, plan as _plan

PROJECT = Project(framework="groundingdino", package="groundingdino",
                  module="groundingdino.models.GroundingDINO.ms_deform_attn",
                  module_file=("models", "GroundingDINO", "ms_deform_attn.py"),
                  placeholder_without_ext=False, function_may_be_missing=True)


def plan() -> Tuple[_patch.FrameworkPatch, List[_patch.Replacement]]:
    return _plan(PROJECT)
