"""msda.patch("transformers"): Hugging Face transformers' models on msda.

transformers runs multi-scale deformable attention in PyTorch (grid_sample per level) unless the
`kernels` package brings a Hub build. Its models reach the op in three ways, each switched here
where it is found in the installed transformers (every models/*/modeling_*.py is searched, so
that models this file does not name are switched too):

- the layer class `MultiScaleDeformableAttention` (DeformableDetr, GroundingDino,
  MM-GroundingDino, RT-DETR, OmDet-Turbo, LW-DETR, RF-DETR, PP-DocLayout), whose forward is
  replaced: every instance, made before the patch or after, runs msda's;
- the function `multi_scale_deformable_attention` (Mask2Former, OneFormer), called by name from
  its module, replaced there; it gets the levels' sizes as a list, whose tables are cached;
- the function `multi_scale_deformable_attention_v2` (RT-DETR v2, D-FINE, DEIMv2): a point count
  per level and a "default" (bilinear) or "discrete" (nearest pixel) mode, replaced by
  ms_deform_attn_points_per_level (_points_per_level.py) in every module that defines it. RT-DETR
  v2 calls it by name; D-FINE and DEIMv2 keep it on each attention layer
  (`self.ms_deformable_attn_core = multi_scale_deformable_attention_v2` in __init__), so their
  class gets a property of that name, which hands a layer holding the framework's function the
  module's function as it is at the call: layers built before the patch are switched too, and
  back again when unpatch removes the property.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
from typing import Any, Callable, List, Sequence, Tuple

from torch import Tensor

from . import _patch
from ._level_table_cache import level_tables
from ._points_per_level import ms_deform_attn_points_per_level
from ._torch_ops import ms_deform_attn

CLASS = "MultiScaleDeformableAttention"
FUNCTION = "multi_scale_deformable_attention"
FUNCTION_V2 = "multi_scale_deformable_attention_v2"

# The parameters each must have, in order: the code msda stands in for.
EXPECTED = {
    CLASS: ("self", "value", "value_spatial_shapes", "value_spatial_shapes_list", "level_start_index",
            "sampling_locations", "attention_weights", "im2col_step"),
    FUNCTION: ("value", "value_spatial_shapes", "sampling_locations", "attention_weights"),
    FUNCTION_V2: ("value", "value_spatial_shapes", "sampling_locations", "attention_weights", "num_points_list",
                  "method"),
}
_DEFINITION = re.compile(rb"^(?:class (MultiScaleDeformableAttention)\(|def (multi_scale_deformable_attention(?:_v2)?)\()",
                         re.M)
# A layer keeping the function in an attribute of its own (D-FINE: `self.ms_deformable_attn_core = ...`).
_BINDING = re.compile(rb"^\s+self\.(\w+)\s*=\s*(multi_scale_deformable_attention(?:_v2)?)\s*$", re.M)
_CLASS = re.compile(rb"^class (\w+)\(", re.M)
# transformers' methods of multi_scale_deformable_attention_v2 -> ms_deform_attn_points_per_level's
_V2_METHODS = {"default": "bilinear", "discrete": "discrete"}


def class_forward(self: Any, value: Tensor, value_spatial_shapes: Tensor, value_spatial_shapes_list: Any,
                  level_start_index: Tensor, sampling_locations: Tensor, attention_weights: Tensor,
                  im2col_step: int = 64) -> Tensor:
    """MultiScaleDeformableAttention.forward on msda: (N, Lq, M * D), as transformers' own. The
    level table from the list of sizes transformers passes beside the tensors (the same
    numbers), in host memory: no check of a new GPU table each forward (_level_table_cache)."""
    del self, im2col_step
    if isinstance(value_spatial_shapes_list, (list, tuple)) and len(value_spatial_shapes_list):
        value_spatial_shapes, level_start_index = level_tables(value_spatial_shapes_list)
    return ms_deform_attn(value, value_spatial_shapes, level_start_index, sampling_locations, attention_weights)


def function(value: Tensor, value_spatial_shapes: "Sequence[Tuple[int, int]] | Tensor", sampling_locations: Tensor,
             attention_weights: Tensor) -> Tensor:
    """multi_scale_deformable_attention on msda, the level table cached per list of sizes."""
    shapes, starts = level_tables(value_spatial_shapes)
    return ms_deform_attn(value, shapes, starts, sampling_locations, attention_weights)


def function_v2(original: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """multi_scale_deformable_attention_v2 on msda (ms_deform_attn_points_per_level): "default"
    is its bilinear method, "discrete" its nearest pixel; a method it does not know, or tensors
    not shaped as transformers passes them, go to ORIGINAL, transformers' own, as they are."""

    def v2(value: Tensor, value_spatial_shapes: Any, sampling_locations: Tensor, attention_weights: Tensor,
           num_points_list: List[int], method: str = "default") -> Tensor:
        mode = _V2_METHODS.get(method) if isinstance(method, str) else None
        if (mode is None or not len(num_points_list) or len(value_spatial_shapes) != len(num_points_list)
                or sampling_locations.dim() != 5):
            return original(value, value_spatial_shapes, sampling_locations, attention_weights, num_points_list,
                            method)
        # transformers passes spatial_shapes_list, a list: its tables cached in host memory
        starts = level_tables(value_spatial_shapes)[1] if isinstance(value_spatial_shapes, Tensor) else None
        return ms_deform_attn_points_per_level(value, value_spatial_shapes, starts, sampling_locations,
                                               attention_weights, num_points_list, mode)

    v2.__doc__ = function_v2.__doc__
    v2.__wrapped__ = original  # type: ignore[attr-defined]
    return v2


def at_call(module: Any, name: str, framework_code: Any, attr: str) -> property:
    """The property ATTR of a layer class that stores MODULE.NAME on each layer in __init__: a
    layer holding FRAMEWORK_CODE (transformers' function) gets MODULE.NAME as it is at the call
    (msda's while patched); a layer holding anything else, that."""

    def get(self: Any) -> Any:
        try:
            held = self.__dict__[attr]
        except KeyError:
            raise AttributeError(attr) from None
        return getattr(module, name) if held is framework_code else held

    def put(self: Any, value: Any) -> None:
        self.__dict__[attr] = value

    def remove(self: Any) -> None:
        self.__dict__.pop(attr, None)

    return property(get, put, remove, f"{module.__name__}.{name}, looked up when called (msda.patch)")


def _candidates(root: str) -> List[Tuple[str, str, List[Tuple[str, str]]]]:
    """(module name, definition name, [(class, attribute) of layers that keep the function]) for
    every MSDA definition in ROOT/models/*/modeling_*.py."""
    found = []
    models = os.path.join(root, "models")
    for model in sorted(os.listdir(models)) if os.path.isdir(models) else []:
        folder = os.path.join(models, model)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not (name.startswith("modeling_") and name.endswith(".py")):
                continue
            with open(os.path.join(folder, name), "rb") as f:
                text = f.read()
            classes = [(m.start(), m.group(1).decode()) for m in _CLASS.finditer(text)]
            for match in _DEFINITION.finditer(text):
                definition = (match.group(1) or match.group(2)).decode()
                kept = []
                for binding in _BINDING.finditer(text):
                    owners = [c for at, c in classes if at < binding.start()]
                    if binding.group(2).decode() == definition and owners:
                        kept.append((owners[-1], binding.group(1).decode()))
                found.append((f"transformers.models.{model}.{name[:-3]}", definition, kept))
    return found


def plan() -> Tuple[_patch.FrameworkPatch, List[_patch.Replacement]]:
    """What msda.patch("transformers") replaces; PatchError when any of it is not as expected."""
    import transformers

    spec = importlib.util.find_spec("transformers")
    roots = list(spec.submodule_search_locations or []) if spec else []
    report = _patch.FrameworkPatch("transformers", getattr(transformers, "__version__", "unknown"))
    replacements: List[_patch.Replacement] = []
    problems: List[str] = []
    for module_name, name, kept in [c for root in roots for c in _candidates(root)]:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a model whose own dependencies are missing cannot run either
            report.left.append(f"{module_name}.{name}: its module does not import here ({type(exc).__name__}: {exc})")
            continue
        owner = getattr(module, name, None)
        if owner is None:
            problems.append(f"{module_name} defines {name} but has no such attribute")
            continue
        if name == CLASS:
            target, attr, what = owner, "forward", f"{module_name}.{CLASS}.forward"
        else:
            target, attr, what = module, name, f"{module_name}.{name}"
        framework_code = _patch.original(target, attr)
        params = _patch.parameters(framework_code)
        if params != EXPECTED[name]:
            problems.append(f"{what} takes ({', '.join(params or ('?',))}), msda expects "
                            f"({', '.join(EXPECTED[name])})")
            continue
        new = class_forward if name == CLASS else function if name == FUNCTION else function_v2(framework_code)
        replacements.append(_patch.Replacement(target, attr, framework_code, new, what))
        report.switched.append(what + (" (every point count, \"default\" and \"discrete\")" if name == FUNCTION_V2
                                       else ""))
        for class_name, kept_as in kept:
            layer = getattr(module, class_name, None)
            where = f"{module_name}.{class_name}.{kept_as}"
            if not isinstance(layer, type):
                problems.append(f"{module_name} keeps {name} in {class_name}.{kept_as}, but has no class {class_name}")
            elif _patch._switched(layer, kept_as) is None and kept_as in vars(layer):
                problems.append(f"{where} is defined on the class; msda expects it set on each layer in __init__")
            else:
                replacements.append(_patch.Replacement(layer, kept_as, _patch.ABSENT,
                                                       at_call(module, name, framework_code, kept_as), where))
                report.switched.append(f"{where} (layers keep {name}: looked up when called)")
    if problems:
        raise _patch.PatchError(f"msda.patch: transformers {report.version} is not as msda expects, nothing "
                                f"switched: " + "; ".join(problems))
    if not replacements and not report.left:
        raise _patch.PatchError(f"msda.patch: transformers {report.version} has no {CLASS} class or {FUNCTION} "
                                f"function in its models: nothing to switch")
    return report, replacements
