"""The bench's peers, loaded from what build-peers.sh made: each compiled extension with the
peer's own Python wrapper around it (its autograd.Function, unchanged, read from the extracted
sources), so that the bench calls them as their users do.

  orig:  Deformable-DETR's MSDeformAttnFunction over the extension msda_peer_orig
  dcnv4: DCNv4's FlashDeformAttnFunction over the extension msda_peer_dcnv4

load(dest) returns {name: Function} for those that load and {name: reason} for the others."""
import importlib.util
import sys
import types
from pathlib import Path


def _extension(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wrapper(path: Path, name: str, fake_modules: dict):
    """Executes a peer's Python file with the modules it imports by name replaced (its own
    package, or the original op's module name, which msda's drop-in module also has)."""
    saved = {k: sys.modules.get(k) for k in fake_modules}
    sys.modules.update(fake_modules)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module


def load(dest):
    dest = Path(dest)
    found, missing = {}, {}
    try:
        ext = _extension(dest / "ext" / "orig" / "msda_peer_orig.so", "msda_peer_orig")
        wrapper = _wrapper(dest / "src" / "deformable-detr" / "functions" / "ms_deform_attn_func.py",
                           "msda_peer_orig_func", {"MultiScaleDeformableAttention": ext})
        found["orig"] = wrapper.MSDeformAttnFunction
    except Exception as exc:  # reported in the bench's output
        missing["orig"] = f"{type(exc).__name__}: {exc}"
    try:
        ext = _extension(dest / "ext" / "dcnv4" / "msda_peer_dcnv4.so", "msda_peer_dcnv4")
        package = types.ModuleType("DCNv4")
        package.ext = ext
        wrapper = _wrapper(dest / "src" / "dcnv4" / "DCNv4" / "functions" / "flash_deform_attn_func.py",
                           "msda_peer_dcnv4_func", {"DCNv4": package, "DCNv4.ext": ext})
        found["dcnv4"] = wrapper.FlashDeformAttnFunction
    except Exception as exc:
        missing["dcnv4"] = f"{type(exc).__name__}: {exc}"
    return found, missing
