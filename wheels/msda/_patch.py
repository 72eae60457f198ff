"""msda.patch and msda.unpatch: switch the MSDA op of the frameworks people run their models in
(Hugging Face transformers; mmcv with what is built on it: mmdet, mmdet3d, BEVFormer; and the
projects with a compiled copy of their own: GroundingDINO, detrex) to msda, and back.

A patch replaces attributes: a class's method or a module's function, which every model the
framework builds calls through at each forward, so that models built before the call are
switched as well as new ones. Each framework's adapter (_patch_<framework>.py) first finds every
attribute it would replace and checks that each looks as expected (its parameters); only when all
of them do, for every framework asked for, is anything replaced: a framework whose code differs
is refused with a message saying what was expected, and nothing is half-patched.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple


class PatchError(RuntimeError):
    """msda.patch refused: a framework that is not importable, or whose code is not what the
    adapter expects (the message says what was expected). Nothing was replaced."""


# Replacement.original of a name that was not there: unpatch removes it again.
ABSENT: Any = object()
# Replacement.original to be read when the replacement is made (its owner is imported then).
WHEN_SWITCHED: Any = object()


@dataclass
class Replacement:
    """One name to switch: OWNER.NAME (a class or a module), or OWNER[NAME] when OWNER is a
    mapping (sys.modules), from ORIGINAL (ABSENT: none) to NEW. With IMPORT set, OWNER is that
    module, imported when the replacement is made (after the replacements before it: mmcv's ops
    module can be imported only once its stand-in extension is in place)."""

    owner: Any
    name: str
    original: Any
    new: Any
    what: str  # as the report names it: "transformers.models.deformable_detr...forward"
    mapping: bool = False
    import_owner: Optional[str] = None

    def target(self) -> Any:
        if self.import_owner is not None:
            self.owner, self.import_owner = importlib.import_module(self.import_owner), None
        return self.owner

    def current(self) -> Any:
        if self.mapping:
            return self.target().get(self.name, ABSENT)
        return getattr(self.target(), self.name, ABSENT)

    def put(self, value: Any) -> None:
        if self.original is WHEN_SWITCHED:
            self.original = self.current()
        if value is not ABSENT:
            if self.mapping:
                self.owner[self.name] = value
            else:
                setattr(self.owner, self.name, value)
        elif self.mapping:
            self.owner.pop(self.name, None)
        elif hasattr(self.owner, self.name):
            delattr(self.owner, self.name)


@dataclass
class FrameworkPatch:
    """What msda.patch did to one framework: the version it recognised, what it switched, and
    what it left on the framework's own code, with why."""

    framework: str
    version: str
    switched: List[str] = field(default_factory=list)
    left: List[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{self.framework} {self.version}: {len(self.switched)} switched to msda"]
        lines += [f"  switched: {name}" for name in self.switched]
        lines += [f"  left as it is: {name}" for name in self.left]
        return "\n".join(lines)


@dataclass
class PatchReport:
    """msda.patch's answer: one FrameworkPatch per framework it switched."""

    frameworks: Dict[str, FrameworkPatch] = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.frameworks:
            return "msda.patch: no framework to switch is importable here"
        return "\n".join(str(f) for f in self.frameworks.values())


# framework name -> (the module to import to find it, its adapter module). An adapter may define
# present(): whether the framework is here beyond that module (BEVFormer, which needs mmcv).
_FRAMEWORKS: Dict[str, Tuple[str, str]] = {
    "transformers": ("transformers", "._patch_transformers"),
    "mmcv": ("mmcv", "._patch_mmcv"),
    "groundingdino": ("groundingdino", "._patch_groundingdino"),
    "detrex": ("detrex", "._patch_detrex"),
    "bevformer": ("mmcv", "._patch_bevformer"),
}
# How to get a framework whose module is not importable, where not `pip install <module>`.
_INSTALL: Dict[str, str] = {
    "groundingdino": "pip install groundingdino-py, or IDEA-Research/GroundingDINO from its repository",
    "detrex": "IDEA-Research/detrex installs from its repository",
}

# What is switched now, in the order it was switched: unpatch restores in reverse.
_active: List[Replacement] = []


def _switched(owner: Any, name: str) -> "Replacement | None":
    """The active replacement of OWNER.NAME that is still in place, if any."""
    for r in _active:
        if r.target() is owner and r.name == name and r.current() is r.new:
            return r
    return None


def original(owner: Any, name: str) -> Any:
    """OWNER.NAME as the framework has it: what msda.patch replaced where it did, so that an
    adapter planning a second patch checks and wraps the framework's code, not msda's."""
    r = _switched(owner, name)
    return r.original if r else getattr(owner, name)


def parameters(obj: Any) -> Tuple[str, ...]:
    """OBJ's parameter names, as an adapter checks the framework code it stands in for; () where
    Python cannot tell them."""
    try:
        return tuple(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return ()


def frameworks() -> List[str]:
    """The frameworks msda.patch knows, whether or not they are installed."""
    return list(_FRAMEWORKS)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _adapter(name: str) -> Callable[[], Tuple[FrameworkPatch, List[Replacement]]]:
    return getattr(importlib.import_module(_FRAMEWORKS[name][1], __package__), "plan")


def _present(name: str) -> bool:
    """Whether msda.patch() without names switches NAME: its module importable, and whatever its
    adapter's present() asks beyond that."""
    if not _importable(_FRAMEWORKS[name][0]):
        return False
    present = getattr(importlib.import_module(_FRAMEWORKS[name][1], __package__), "present", None)
    return present is None or bool(present())


def _plan(name: str) -> Tuple[FrameworkPatch, List[Replacement]]:
    try:
        return _adapter(name)()
    except ImportError as e:  # the framework's own import failing (mmcv without OpenCV)
        raise PatchError(f"msda.patch: {name} cannot be imported here: {e}; nothing switched") from e


def patch(*names: str) -> PatchReport:
    """Switches the named frameworks' MSDA op to msda, or every known one that is importable
    when none is named; returns what was switched, and which version of each it recognised:

    - "transformers": Hugging Face's models (DeformableDetr, GroundingDino, RT-DETR, Mask2Former...),
      and RT-DETR v2's, D-FINE's and DEIMv2's multi_scale_deformable_attention_v2 in every call (a
      point count per level, padded to the largest; "discrete" as the bilinear sample at the
      nearest pixel's centre, no gradient to the locations);
    - "mmcv": mmcv's op (mmdet, mmdet3d), mmcv-lite included;
    - "groundingdino": IDEA-Research's GroundingDINO (its `groundingdino._C`, built or not, and
      its CPU path), or groundingdino-py;
    - "detrex": IDEA-Research's detrex (its `detrex._C`'s MSDA op, built or not, and its CPU path;
      call it before detrex is imported where detrex._C is not built);
    - "bevformer": "mmcv" plus BEVFormer's own names for mmcv's CPU function, its Functions
      checked where its code is found (BEVFormer is no installed package: it runs from its
      repository's root).

    Models built before the call are switched too (the patch replaces what their layers call).
    Calling it again changes nothing; msda.unpatch() restores the frameworks' own code.

    Raises PatchError, having replaced nothing, when a named framework is unknown or not
    importable, or when any framework's code is not what msda expects of it. With none named, a
    framework whose modules fail to import when switched is left out, the others switched, and
    the report says why."""
    for name in names:
        if name not in _FRAMEWORKS:
            raise PatchError(f"msda.patch: unknown framework '{name}'; it knows "
                             f"{', '.join(repr(n) for n in _FRAMEWORKS)}")
        module = _FRAMEWORKS[name][0]
        if not _importable(module):
            install = _INSTALL.get(name, f"pip install {module}")
            raise PatchError(f"msda.patch: {name} is not importable here ({install})" if module == name else
                             f"msda.patch: {name} needs {module}, which is not importable here ({install})")
    wanted = list(dict.fromkeys(names)) or [n for n in _FRAMEWORKS if _present(n)]
    plans = [_plan(name) for name in wanted]  # each raises PatchError before any change
    report = PatchReport()
    made = len(_active)
    for framework, replacements in plans:
        made_here = len(_active)
        try:
            for r in replacements:
                if _switched(r.target(), r.name) is None:  # switched already: left as it is
                    r.put(r.new)
                    _active.append(r)
        except Exception as e:  # an owner that cannot be imported: what this call switched goes back
            _take_back(made if names else made_here)
            if names:
                raise PatchError(f"msda.patch: {e}; nothing switched") from e
            # none named: a framework installed but not importable in full here (groundingdino's
            # models without torchvision) is left out, and the others are switched
            framework.left = [f"nothing switched: its code does not import here ({type(e).__name__}: {e})"]
            framework.switched = []
        report.frameworks[framework.framework] = framework
    return report


def _take_back(made: int) -> None:
    while len(_active) > made:
        r = _active.pop()
        r.put(r.original)


def unpatch() -> List[str]:
    """Restores what msda.patch switched, where it is still msda's (an attribute something
    else replaced since is left to it); returns the names restored."""
    restored = []
    while _active:
        r = _active.pop()
        if r.current() is r.new:
            r.put(r.original)
            restored.append(r.what)
    return restored
