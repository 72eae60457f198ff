"""What msda.patch("groundingdino") and msda.patch("detrex") share: projects that keep their own
copy of Deformable-DETR's op, compiled into an extension module of their package (`<package>._C`).

Each such project has one Python module for the op that binds `_C` by `from <package> import _C`,
defines the autograd Function `MultiScaleDeformableAttnFunction` (whose forward and backward call
`_C.ms_deform_attn_forward(value, shapes, starts, locations, weights, im2col_step)` and
`_C.ms_deform_attn_backward(..., grad_output, im2col_step)`, the backward returning the three
gradients), and `multi_scale_deformable_attn_pytorch`, which the layer calls by name from that
module for tensors not on CUDA. Switched here:

- where `<package>._C` loads: its two functions, on that module object, which the Function looks
  up at every call (whatever else the extension holds stays the project's own);
- where it does not (never built, or built for another torch: "undefined symbol"): a stand-in
  module of that name, in sys.modules, on the package and in the op module's globals, holding
  msda's two functions; any other op asked of it raises when called, naming the op;
- `multi_scale_deformable_attn_pytorch` in the op module, so CPU runs use msda too.

The op module is checked before anything is replaced: in its source where it is not imported yet
(it is imported when switched, after the stand-in is in place, so that its `from <package>
import _C` finds it), else in the module itself.
"""
from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from torch import Tensor

from . import _patch
from . import _torch_kernels
from ._level_table_cache import level_tables
from ._torch_ops import ms_deform_attn

FUNCTION = "multi_scale_deformable_attn_pytorch"
AUTOGRAD_FUNCTION = "MultiScaleDeformableAttnFunction"
EXT_FUNCTIONS = ("ms_deform_attn_forward", "ms_deform_attn_backward")

# The parameters of the code msda stands in for (the same in GroundingDINO and detrex).
EXPECTED = {
    FUNCTION: ("value", "value_spatial_shapes", "sampling_locations", "attention_weights"),
    AUTOGRAD_FUNCTION + ".forward": ("ctx", "value", "value_spatial_shapes", "value_level_start_index",
                                     "sampling_locations", "attention_weights", "im2col_step"),
    AUTOGRAD_FUNCTION + ".backward": ("ctx", "grad_output"),
}


@dataclass(frozen=True)
class Project:
    """Where a project keeps its op: FRAMEWORK is msda.patch's name for it, PACKAGE its import
    name, MODULE the op module (MODULE_FILE its path below the package's folder)."""

    framework: str
    package: str
    module: str
    module_file: Tuple[str, ...]
    # detrex replaces its layer class by a placeholder that raises when _C does not import
    placeholder_without_ext: bool
    # groundingdino-py: a copy without _C, whose layer always runs the PyTorch function
    function_may_be_missing: bool = False

    @property
    def ext(self) -> str:
        return f"{self.package}._C"


def ms_deform_attn_forward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                           sampling_locations: Tensor, attention_weights: Tensor, im2col_step: int = 64) -> Tensor:
    """`_C.ms_deform_attn_forward` on msda: (N, Lq, M * D) in value's dtype; CPU as well as CUDA
    tensors, f16 and bf16 as well as f32 and f64, any batch size (im2col_step is ignored)."""
    del im2col_step
    return _torch_kernels.forward(value, value_spatial_shapes, value_level_start_index, sampling_locations,
                                  attention_weights)


def ms_deform_attn_backward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                            sampling_locations: Tensor, attention_weights: Tensor, grad_output: Tensor,
                            im2col_step: int = 64) -> List[Tensor]:
    """`_C.ms_deform_attn_backward` on msda: [grad_value, grad_sampling_loc, grad_attn_weight],
    each in its input's dtype, as the compiled op returns them."""
    del im2col_step
    grads = _torch_kernels.backward(value, value_spatial_shapes, value_level_start_index, sampling_locations,
                                    attention_weights, grad_output)
    return [g.to(t.dtype) for g, t in zip(grads, (value, sampling_locations, attention_weights))]


def function(value: Tensor, value_spatial_shapes: Tensor, sampling_locations: Tensor,
             attention_weights: Tensor) -> Tensor:
    """multi_scale_deformable_attn_pytorch on msda (the layer's path for tensors not on CUDA)."""
    shapes, starts = level_tables(value_spatial_shapes)
    return ms_deform_attn(value, shapes, starts, sampling_locations, attention_weights)


class StandInExt(types.ModuleType):
    """A project's `_C` where its own does not load: msda's MSDA functions, and for any other op
    a function that raises when called, naming the op."""

    def __init__(self, project: Project) -> None:
        super().__init__(project.ext, f"msda's stand-in for {project.ext}: the MSDA op only")
        self.__msda__ = True
        self._framework = project.framework
        self.ms_deform_attn_forward = ms_deform_attn_forward
        self.ms_deform_attn_backward = ms_deform_attn_backward

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)
        ext, framework = self.__name__, self._framework

        def missing(*args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(
                f"{ext}.{name}: {ext} is not built here or does not load, and msda.patch('{framework}') "
                f"provides only {' and '.join(EXT_FUNCTIONS)}; build {ext} for the installed torch and CUDA "
                f"for {name}")

        missing.__name__ = name
        return missing


def _loaded_ext(project: Project, folder: str, stand_in: StandInExt) -> Tuple[Any, str]:
    """The project's own compiled `_C`, or None with why it is not there. Where the package is not
    imported yet, the extension is loaded from its file without importing the package: detrex's
    package import, where its `_C` fails, leaves a placeholder layer class that nothing undoes."""
    ext = sys.modules.get(project.ext)
    if ext is stand_in:
        return None, "msda's stand-in already"
    if ext is not None:
        return ext, ""
    try:
        if project.package in sys.modules:
            return importlib.import_module(project.ext), ""
        names = ["_C" + suffix for suffix in importlib.machinery.EXTENSION_SUFFIXES]
        path = next((os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))), None)
        if path is None:
            return None, "not built"
        spec = importlib.util.spec_from_file_location(project.ext, path)
        if spec is None or spec.loader is None:
            return None, f"{path} cannot be loaded"
        ext = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ext)
    except ModuleNotFoundError as e:
        if e.name == project.ext:
            return None, "not built"
        return None, f"does not load ({type(e).__name__}: {e})"
    except (ImportError, OSError) as e:  # built for another torch: "undefined symbol ..."
        return None, f"does not load ({type(e).__name__}: {e})"
    sys.modules[project.ext] = ext  # as the package's import would: loaded once
    return ext, ""


def _source(project: Project, package_dir: str) -> "Tuple[Optional[ast.Module], str]":
    path = os.path.join(package_dir, *project.module_file)
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read(), path), path
    except (OSError, SyntaxError, ValueError):
        return None, path


def _arguments(node: "ast.FunctionDef | ast.AsyncFunctionDef") -> Tuple[str, ...]:
    a = node.args
    return tuple(arg.arg for arg in a.posonlyargs + a.args + a.kwonlyargs)


def _source_facts(tree: ast.Module, project: Project) -> Tuple[dict, bool]:
    """The parameters of what EXPECTED names, as the module's source defines them, and whether it
    imports `_C` from its package."""
    found: dict = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
            found[FUNCTION] = _arguments(node)
        elif isinstance(node, ast.ClassDef) and node.name == AUTOGRAD_FUNCTION:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("forward", "backward"):
                    found[f"{AUTOGRAD_FUNCTION}.{item.name}"] = _arguments(item)
    imports_ext = any(isinstance(n, ast.ImportFrom) and n.module == project.package and n.level == 0
                      and any(a.name == "_C" and a.asname in (None, "_C") for a in n.names)
                      for n in ast.walk(tree))
    return found, imports_ext


def _module_facts(module: Any) -> Tuple[dict, bool]:
    """The same, from the imported module (its code as the project has it, not msda's)."""
    found: dict = {}
    if hasattr(module, FUNCTION):
        found[FUNCTION] = _patch.parameters(_patch.original(module, FUNCTION))
    autograd = getattr(module, AUTOGRAD_FUNCTION, None)
    if autograd is not None:
        for name in ("forward", "backward"):
            found[f"{AUTOGRAD_FUNCTION}.{name}"] = _patch.parameters(getattr(autograd, name, None))
    return found, autograd is not None


def _version(project: Project, folder: str) -> str:
    """The version of the package found in FOLDER: its distribution's where the metadata says that
    FOLDER is what it installed (naming it where it is not the package's name: groundingdino-py
    installs `groundingdino`), else the package's own `__version__`, read from its source where it
    is not imported (importing detrex imports its layers)."""
    try:
        from importlib import metadata
        for name in metadata.packages_distributions().get(project.package, []):
            dist = metadata.distribution(name)
            if os.path.realpath(str(dist.locate_file(project.package))) == os.path.realpath(folder):
                return dist.version if name == project.package else f"{dist.version} ({name})"
    except Exception:  # no usable metadata: the package's own word
        pass
    package = sys.modules.get(project.package)
    if package is not None and getattr(package, "__version__", None):
        return str(package.__version__)
    for name in ("__init__.py", "version.py"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__"
                                                     for t in node.targets)
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                return node.value.value
    return "unknown (no version metadata)"


def plan(project: Project) -> Tuple[_patch.FrameworkPatch, List[_patch.Replacement]]:
    """What msda.patch(PROJECT.framework) replaces; PatchError, nothing replaced, when the
    project's code is not what msda stands in for."""
    package = sys.modules.get(project.package)
    if package is not None:
        folders = list(getattr(package, "__path__", []))
    else:
        spec = importlib.util.find_spec(project.package)
        folders = list(spec.submodule_search_locations or []) if spec else []
    if not folders:
        raise _patch.PatchError(f"msda.patch: {project.package} is not a package here, nothing switched")
    report = _patch.FrameworkPatch(project.framework, _version(project, folders[0]))
    refuse = f"msda.patch: {project.framework} {report.version} is not as msda expects, nothing switched: "
    module = sys.modules.get(project.module)
    if module is not None:
        found, uses_ext = _module_facts(module)
        where = project.module
    else:
        tree, where = _source(project, folders[0])
        if tree is None:
            raise _patch.PatchError(f"{refuse}{where}, where its op is defined, cannot be read")
        found, uses_ext = _source_facts(tree, project)
    wanted = [FUNCTION]
    if uses_ext or not project.function_may_be_missing:
        wanted += [f"{AUTOGRAD_FUNCTION}.forward", f"{AUTOGRAD_FUNCTION}.backward"]
    problems = []
    for name in wanted:
        params = found.get(name)
        if params != EXPECTED[name]:
            has = "has none" if params is None else f"takes ({', '.join(params or ('?',))})"
            problems.append(f"{project.module}.{name} {has}, msda expects ({', '.join(EXPECTED[name])})")
    if project.placeholder_without_ext and not uses_ext and not problems:
        problems.append(f"{where} does not import _C from {project.package}")
    if problems:
        raise _patch.PatchError(refuse + "; ".join(problems))

    replacements: List[_patch.Replacement] = []
    if uses_ext:
        replacements += _ext_replacements(project, folders[0], module, report)
    else:
        report.left.append(f"{project.ext}: this copy of {project.package} has no {AUTOGRAD_FUNCTION} and never "
                           f"calls a compiled op (as groundingdino-py): its layer runs {FUNCTION} on every device")
    what = f"{project.module}.{FUNCTION}"
    if module is not None:
        replacements.append(_patch.Replacement(module, FUNCTION, _patch.original(module, FUNCTION), function, what))
    else:  # imported when switched, after the stand-in _C
        replacements.append(_patch.Replacement(None, FUNCTION, _patch.WHEN_SWITCHED, function, what,
                                               import_owner=project.module))
    report.switched.append(what + (" (the layer's path for tensors not on CUDA)" if uses_ext
                                   else " (the layer's only path)"))
    return report, replacements


def _ext_replacements(project: Project, folder: str, module: Any,
                      report: _patch.FrameworkPatch) -> List[_patch.Replacement]:
    stand_in = _stand_in(project)
    ext, why = _loaded_ext(project, folder, stand_in)
    if ext is not None:
        missing = [name for name in EXT_FUNCTIONS if not hasattr(ext, name)]
        if missing:
            raise _patch.PatchError(f"msda.patch: {project.framework} {report.version}'s {project.ext} has no "
                                    f"{', '.join(missing)}, nothing switched")
        if module is not None and module.__dict__.get("_C", ext) is not ext:
            raise _patch.PatchError(f"msda.patch: {project.framework} {report.version}: {project.module}._C is not "
                                    f"{project.ext}, nothing switched")
        report.switched += [f"{project.ext}.{name} (the compiled op's, on CUDA tensors)" for name in EXT_FUNCTIONS]
        return [_patch.Replacement(ext, name, _patch.original(ext, name), new, f"{project.ext}.{name}")
                for name, new in zip(EXT_FUNCTIONS, (ms_deform_attn_forward, ms_deform_attn_backward))]
    if module is not None and "_C" not in module.__dict__ and project.placeholder_without_ext:
        raise _patch.PatchError(
            f"msda.patch: {project.framework} {report.version}: {project.module} was imported without "
            f"{project.ext} ({why}), so its layer class is {project.package}'s placeholder, which raises when "
            f"built; nothing switched. Call msda.patch('{project.framework}') before {project.package} is imported")

    def before(value: Any) -> Any:  # a stand-in left by an earlier patch is not the project's own
        return _patch.ABSENT if value is stand_in else value

    package = sys.modules.get(project.package)
    replacements = [
        _patch.Replacement(sys.modules, project.ext, before(sys.modules.get(project.ext, _patch.ABSENT)), stand_in,
                           project.ext, mapping=True),
        # the package imported after the stand-in is in place, where it is not yet (detrex's
        # imports its layers, whose `from detrex import _C` then finds it)
        _patch.Replacement(package, "_C", before(getattr(package, "_C", _patch.ABSENT)), stand_in,
                           f"{project.ext} (attribute)", import_owner=None if package else project.package),
    ]
    what = f"{project.module}._C"
    if module is not None:
        replacements.append(_patch.Replacement(module, "_C", before(module.__dict__.get("_C", _patch.ABSENT)),
                                               stand_in, what))
    else:  # the module binds the stand-in itself when imported; unpatch takes the name away again
        replacements.append(_patch.Replacement(None, "_C", _patch.ABSENT, stand_in, what,
                                               import_owner=project.module))
    report.switched.append(f"{project.ext}: {why}; msda's, with the MSDA op only (on CUDA tensors)")
    return replacements


_STAND_INS: dict = {}


def _stand_in(project: Project) -> StandInExt:
    """One stand-in per project, so that a second msda.patch finds the first one's in place."""
    if project.ext not in _STAND_INS:
        _STAND_INS[project.ext] = StandInExt(project)
    return _STAND_INS[project.ext]
