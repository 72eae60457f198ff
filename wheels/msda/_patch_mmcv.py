"""msda.patch("mmcv"): mmcv's MSDA op on msda, and with it every model built on it (mmdet's
Deformable-DETR, DINO, DDQ, Mask2Former; mmdet3d; BEVFormer and its copies of the op).

mmcv reaches its CUDA op through its compiled extension module, `mmcv._ext`: the autograd
Function of mmcv.ops.multi_scale_deform_attn, and the copies other projects keep of it
(BEVFormer's MultiScaleDeformableAttnFunction_fp32), look up `ext_module.ms_deform_attn_forward`
and `ms_deform_attn_backward` on that one module object at every call. Those two names are
switched there, so every caller is reached, whatever it imported and whenever. Where the layer
runs in PyTorch (CPU tensors), it calls multi_scale_deformable_attn_pytorch by name from its
module: that is switched too.

mmcv-lite, or an mmcv whose ops were never compiled, has no `mmcv._ext`, and `import mmcv.ops`
fails with "No module named 'mmcv._ext'" (mmcv's loader asks it for every op's functions). There
msda.patch puts a module of that name in place holding msda's two MSDA functions; any other op
asked of it raises, naming the op, when it is called. msda.unpatch() removes it again, but
modules imported while it was there keep it (Python cannot unimport them).
"""
from __future__ import annotations

import ast
import importlib
import os
import sys
import types
from typing import Any, Callable, List, Tuple

from torch import Tensor

from . import _patch
from . import _torch_kernels
from ._level_table_cache import level_tables
from ._torch_ops import ms_deform_attn

EXT = "mmcv._ext"
OPS_MODULE = "mmcv.ops.multi_scale_deform_attn"
FUNCTION = "multi_scale_deformable_attn_pytorch"
EXT_FUNCTIONS = ("ms_deform_attn_forward", "ms_deform_attn_backward")
# The parameters msda stands in for: mmcv 1.x and 2.x.
EXPECTED_FUNCTION = ("value", "value_spatial_shapes", "sampling_locations", "attention_weights")


def ms_deform_attn_forward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                           sampling_locations: Tensor, attention_weights: Tensor, im2col_step: int = 64) -> Tensor:
    """mmcv._ext.ms_deform_attn_forward on msda: (N, Lq, M * D) in value's dtype. Takes f16 and
    bf16 (mmcv's own op has f32 and f64 only), CPU tensors, and any batch size."""
    del im2col_step
    return _torch_kernels.forward(value, value_spatial_shapes, value_level_start_index, sampling_locations,
                                  attention_weights)


def ms_deform_attn_backward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                            sampling_locations: Tensor, attention_weights: Tensor, grad_output: Tensor,
                            grad_value: Tensor, grad_sampling_loc: Tensor, grad_attn_weight: Tensor,
                            im2col_step: int = 64) -> None:
    """mmcv._ext.ms_deform_attn_backward on msda: the gradients added into the three tensors the
    caller passes (zeros, in mmcv), as mmcv's op adds into them."""
    del im2col_step
    grads = _torch_kernels.backward(value, value_spatial_shapes, value_level_start_index, sampling_locations,
                                    attention_weights, grad_output)
    for into, grad in zip((grad_value, grad_sampling_loc, grad_attn_weight), grads):
        into.add_(grad.to(into.dtype))


def function(value: Tensor, value_spatial_shapes: Tensor, sampling_locations: Tensor,
             attention_weights: Tensor) -> Tensor:
    """multi_scale_deformable_attn_pytorch on msda (the layer's path for CPU tensors)."""
    shapes, starts = level_tables(value_spatial_shapes)
    return ms_deform_attn(value, shapes, starts, sampling_locations, attention_weights)


class _LiteExt(types.ModuleType):
    """The mmcv._ext of an mmcv without compiled ops: msda's MSDA functions, and for any other
    op a function that raises when called (mmcv's loader only asks that each name exists)."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def missing(*args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(
                f"{EXT}.{name}: this mmcv has no compiled ops (mmcv-lite, or built without them); "
                f"msda.patch('mmcv') provides only {' and '.join(EXT_FUNCTIONS)}")

        missing.__name__ = name
        return missing


_LITE_EXT = _LiteExt(EXT, "msda's stand-in for mmcv's compiled ops: the MSDA op only")
_LITE_EXT.ms_deform_attn_forward = ms_deform_attn_forward  # type: ignore[attr-defined]
_LITE_EXT.ms_deform_attn_backward = ms_deform_attn_backward  # type: ignore[attr-defined]
_LITE_EXT.__msda__ = True  # type: ignore[attr-defined]


def _compiled_ext() -> Any:
    """mmcv's own compiled extension module, or None where this mmcv has none (or where it is
    msda's stand-in)."""
    ext = sys.modules.get(EXT)
    if ext is _LITE_EXT:
        return None
    try:
        return importlib.import_module(EXT)
    except ModuleNotFoundError as e:
        if e.name != EXT:
            raise
        return None


def _source_parameters(package_dir: str) -> Tuple[str, ...]:
    """FUNCTION's parameters as its source file defines them: read, not imported, since mmcv's
    ops package cannot be imported before a stand-in extension is in place, and an import is
    not undone (mmengine's registries refuse the same op registered twice)."""
    path = os.path.join(package_dir, "ops", "multi_scale_deform_attn.py")
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return ()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
            a = node.args
            return tuple(arg.arg for arg in a.posonlyargs + a.args + a.kwonlyargs)
    return ()


def plan() -> Tuple[_patch.FrameworkPatch, List[_patch.Replacement]]:
    import mmcv

    report = _patch.FrameworkPatch("mmcv", str(getattr(mmcv, "__version__", "?")))
    ext = _compiled_ext()
    module = sys.modules.get(OPS_MODULE)
    if module is not None:
        framework_code = _patch.original(module, FUNCTION)
        params = _patch.parameters(framework_code)
    else:
        params = _source_parameters(os.path.dirname(mmcv.__file__ or ""))
    if params != EXPECTED_FUNCTION:
        raise _patch.PatchError(f"msda.patch: mmcv {report.version} is not as msda expects, nothing switched: "
                                f"{OPS_MODULE}.{FUNCTION} takes ({', '.join(params or ('?',))}), msda expects "
                                f"({', '.join(EXPECTED_FUNCTION)})")
    replacements: List[_patch.Replacement] = []
    if ext is not None:
        missing = [name for name in EXT_FUNCTIONS if not hasattr(ext, name)]
        if missing:
            raise _patch.PatchError(f"msda.patch: mmcv {report.version}'s {EXT} has no {', '.join(missing)}, "
                                    "nothing switched")
        for name, new in zip(EXT_FUNCTIONS, (ms_deform_attn_forward, ms_deform_attn_backward)):
            replacements.append(_patch.Replacement(ext, name, _patch.original(ext, name), new, f"{EXT}.{name}"))
        report.switched += [f"{EXT}.{name}" for name in EXT_FUNCTIONS]
    else:
        replacements.append(_patch.Replacement(sys.modules, EXT, _patch.ABSENT, _LITE_EXT, EXT, mapping=True))
        replacements.append(_patch.Replacement(mmcv, "_ext", _patch.ABSENT, _LITE_EXT, "mmcv._ext (attribute)"))
        report.switched.append(f"{EXT}: none here (mmcv without compiled ops); msda's, with the MSDA op only")
    what = f"{OPS_MODULE}.{FUNCTION}"
    if module is not None:
        replacements.append(_patch.Replacement(module, FUNCTION, framework_code, function, what))
    else:  # imported when switched, after the extension
        replacements.append(_patch.Replacement(None, FUNCTION, _patch.WHEN_SWITCHED, function, what,
                                               import_owner=OPS_MODULE))
    report.switched.append(f"{what} (the layer's path for CPU tensors)")
    return report, replacements
