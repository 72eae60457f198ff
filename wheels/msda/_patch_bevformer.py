"""msda.patch("bevformer"): fundamentalvision's BEVFormer on msda, through mmcv.

BEVFormer is no installed package: it runs from its repository's root, where its code is the
package `projects.mmdet3d_plugin` (a name other repositories use too). It keeps its own autograd
Functions, MultiScaleDeformableAttnFunction_fp32 and _fp16
(projects/mmdet3d_plugin/bevformer/modules/multi_scale_deformable_attn_function.py), which call
mmcv's compiled op through `ext_module = ext_loader.load_ext('_ext', ...)`: the `mmcv._ext`
module object, whose two MSDA functions msda.patch("mmcv") switches (or puts in place, where mmcv
has no compiled ops). Its attention layers (spatial_cross_attention, temporal_self_attention,
decoder) run tensors not on CUDA through mmcv's multi_scale_deformable_attn_pytorch, imported by
name into each of those modules: msda.patch("mmcv") does not reach those names, this adapter does.

So msda.patch("bevformer") is msda.patch("mmcv") plus: BEVFormer's Functions checked (in the
module where it is imported, else in its source where `projects` is importable), and the by-name
copies of mmcv's function switched in the BEVFormer modules already imported. A module imported
while the patch is in place takes msda's function from mmcv and keeps it after msda.unpatch()
(Python cannot unimport it): the report says which were not imported yet. Where BEVFormer's code
is not found at all, mmcv is switched all the same and the report says BEVFormer was not checked.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import sys
from typing import Any, List, Optional, Tuple

from . import _patch
from . import _patch_mmcv

PACKAGE = "projects"
MODULES = "projects.mmdet3d_plugin.bevformer.modules"
FUNCTIONS_MODULE = f"{MODULES}.multi_scale_deformable_attn_function"
FUNCTIONS_FILE = ("mmdet3d_plugin", "bevformer", "modules", "multi_scale_deformable_attn_function.py")
CLASSES = ("MultiScaleDeformableAttnFunction_fp32", "MultiScaleDeformableAttnFunction_fp16")
# The modules whose layers call mmcv's PyTorch function by a name of their own.
BY_NAME = tuple(f"{MODULES}.{m}" for m in ("spatial_cross_attention", "temporal_self_attention", "decoder"))
EXPECTED = {
    "forward": ("ctx", "value", "value_spatial_shapes", "value_level_start_index", "sampling_locations",
                "attention_weights", "im2col_step"),
    "backward": ("ctx", "grad_output"),
}


def _source_file() -> Optional[str]:
    """BEVFormer's Functions module's file where `projects` is importable and is BEVFormer's."""
    try:
        spec = importlib.util.find_spec(PACKAGE)  # a top-level name: found, not imported
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, *FUNCTIONS_FILE)
        if os.path.isfile(path):
            return path
    return None


def present() -> bool:
    """Whether BEVFormer's code is here: imported, or importable from the working folder."""
    return FUNCTIONS_MODULE in sys.modules or _source_file() is not None


def _classes_from_module(module: Any) -> dict:
    found = {}
    for cls in CLASSES:
        klass = getattr(module, cls, None)
        for name in EXPECTED:
            found[f"{cls}.{name}"] = None if klass is None else _patch.parameters(getattr(klass, name, None))
    return found


def _classes_from_source(tree: ast.Module) -> Tuple[dict, bool]:
    found: dict = {f"{cls}.{name}": None for cls in CLASSES for name in EXPECTED}
    loads_ext = False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in CLASSES:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in EXPECTED:
                    a = item.args
                    found[f"{node.name}.{item.name}"] = tuple(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)
        elif (isinstance(node, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == "ext_module" for t in node.targets)
              and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
              and node.value.func.attr == "load_ext" and node.value.args
              and isinstance(node.value.args[0], ast.Constant) and node.value.args[0].value == "_ext"):
            loads_ext = True
    return found, loads_ext


def plan() -> Tuple[_patch.FrameworkPatch, List[_patch.Replacement]]:
    """msda.patch("mmcv")'s replacements, and BEVFormer's by-name copies of mmcv's function."""
    mmcv_report, replacements = _patch_mmcv.plan()
    report = _patch.FrameworkPatch("bevformer", f"(no version of its own) on mmcv {mmcv_report.version}")
    refuse = "msda.patch: BEVFormer is not as msda expects, nothing switched: "
    module = sys.modules.get(FUNCTIONS_MODULE)
    problems: List[str] = []
    if module is not None:
        found = _classes_from_module(module)
        ext = getattr(module, "ext_module", None)
        mmcv_ext = sys.modules.get(_patch_mmcv.EXT)
        if ext is None or (ext is not mmcv_ext and ext is not _patch_mmcv._LITE_EXT):
            problems.append(f"{FUNCTIONS_MODULE}.ext_module is not {_patch_mmcv.EXT}")
        checked = f"{FUNCTIONS_MODULE} (imported)"
    else:
        path = _source_file()
        found, loads_ext = {}, True
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    found, loads_ext = _classes_from_source(ast.parse(f.read(), path))
            except (OSError, SyntaxError, ValueError) as e:
                problems.append(f"{path} cannot be read ({e})")
            if not loads_ext:
                problems.append(f"{path} does not set ext_module = ext_loader.load_ext('_ext', ...)")
        checked = path or ""
    for name, params in found.items():
        if params != EXPECTED[name.rsplit(".", 1)[1]]:
            has = "has none" if params is None else f"takes ({', '.join(params or ('?',))})"
            problems.append(f"{name} {has}, msda expects ({', '.join(EXPECTED[name.rsplit('.', 1)[1]])})")
    by_name: List[_patch.Replacement] = []
    for name in BY_NAME:
        owner = sys.modules.get(name)
        if owner is None:
            if checked:
                report.left.append(f"{name}.{_patch_mmcv.FUNCTION}: not imported yet; imported now, it takes "
                                   "msda's from mmcv, and keeps it after msda.unpatch()")
            continue
        framework_code = _patch.original(owner, _patch_mmcv.FUNCTION)
        params = _patch.parameters(framework_code)
        if params != _patch_mmcv.EXPECTED_FUNCTION:
            problems.append(f"{name}.{_patch_mmcv.FUNCTION} takes ({', '.join(params or ('?',))}), msda expects "
                            f"({', '.join(_patch_mmcv.EXPECTED_FUNCTION)})")
            continue
        what = f"{name}.{_patch_mmcv.FUNCTION}"
        by_name.append(_patch.Replacement(owner, _patch_mmcv.FUNCTION, framework_code, _patch_mmcv.function, what))
    if problems:
        raise _patch.PatchError(refuse + "; ".join(problems))
    report.switched += [f"{s} (mmcv's, which BEVFormer's Functions call)" if s.startswith(_patch_mmcv.EXT) else s
                        for s in mmcv_report.switched]
    report.switched += [f"{r.what} (BEVFormer's own name for it: the layer's path for tensors not on CUDA)"
                        for r in by_name]
    if checked:
        report.left.insert(0, f"BEVFormer's {' and '.join(CLASSES)} (checked in {checked}): they call "
                              f"{_patch_mmcv.EXT}'s functions, switched")
    else:
        report.left.append(f"BEVFormer's modules: not imported, and no {PACKAGE}/{'/'.join(FUNCTIONS_FILE)} on "
                           "sys.path (BEVFormer runs from its repository's root): not checked; mmcv is switched, "
                           "which they call when imported")
    return report, replacements + by_name
