"""msda.patch("bevformer") on a stand-in of BEVFormer's modules (fake_projects: its Functions
calling mmcv's `_ext` through mmcv's loader, its attention modules holding mmcv's PyTorch function
under their own name), over the real mmcv-lite of test_patch_mmcv: with mmcv's stand-in `_ext`,
and with a module standing in for a compiled `mmcv._ext` (mmcv-full). And BEVFormer's real
Functions module where $MSDA_BEVFORMER_SRC names the folder holding BEVFormer's `projects/` (its
repository's root: BEVFormer is not on PyPI), else skipped. Named to run after test_patch_mmcv,
which needs mmcv.ops not imported yet."""
import importlib
import os
import sys
import types

import pytest
import torch

import fake_projects
import msda
from msda import _patch, _patch_bevformer, _patch_mmcv
from test_patch_groundingdino import assert_agrees_with_reference, inputs
from reference import ms_deform_attn_reference

mmcv = pytest.importorskip("mmcv")

pytestmark = pytest.mark.usefixtures("unpatched")

MODULES = "projects.mmdet3d_plugin.bevformer.modules"
FUNCTIONS = f"{MODULES}.multi_scale_deformable_attn_function"
BY_NAME = [f"{MODULES}.{m}" for m in ("spatial_cross_attention", "temporal_self_attention", "decoder")]


class CompiledExt(types.ModuleType):
    """mmcv-full's compiled `mmcv._ext`, as far as mmcv's loader and msda look at it: every op
    name is there (mmcv.ops asks for all of them), the two MSDA ones mmcv's own."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: "mmcv's own " + name


@pytest.fixture
def compiled_ext(monkeypatch):
    ext = CompiledExt("mmcv._ext")
    ext.ms_deform_attn_forward = ext.__getattr__("ms_deform_attn_forward")
    ext.ms_deform_attn_backward = ext.__getattr__("ms_deform_attn_backward")
    monkeypatch.setitem(sys.modules, "mmcv._ext", ext)
    monkeypatch.setattr(mmcv, "_ext", ext, raising=False)
    return ext


@pytest.fixture
def bevformer(tmp_path):
    roots = []

    def make(**changes):
        root = fake_projects.write(tmp_path / f"p{len(roots)}", fake_projects.bevformer(**changes))
        roots.append(root)
        return root

    yield make
    msda.unpatch()
    for root in roots:
        fake_projects.cleanup(root, "projects")


def import_bevformer():
    return [importlib.import_module(m) for m in [FUNCTIONS] + BY_NAME]


def test_without_bevformer_on_the_path_mmcv_is_switched_and_the_report_says_bevformer_was_not_checked():
    assert not _patch_bevformer.present() and not _patch._present("bevformer")
    report = msda.patch("bevformer").frameworks["bevformer"]
    assert report.version == f"(no version of its own) on mmcv {mmcv.__version__}"
    assert any(s.startswith("mmcv.ops.multi_scale_deform_attn.multi_scale_deformable_attn_pytorch")
               for s in report.switched)
    assert report.left == ["BEVFormer's modules: not imported, and no projects/mmdet3d_plugin/bevformer/modules/"
                           "multi_scale_deformable_attn_function.py on sys.path (BEVFormer runs from its "
                           "repository's root): not checked; mmcv is switched, which they call when imported"]


def test_patched_before_bevformer_is_imported_its_functions_run_msda_through_mmcvs_stand_in_ext(bevformer):
    bevformer()
    assert _patch._present("bevformer")
    report = msda.patch("bevformer").frameworks["bevformer"]
    assert report.left[0].startswith("BEVFormer's MultiScaleDeformableAttnFunction_fp32 and "
                                     "MultiScaleDeformableAttnFunction_fp16 (checked in ")
    assert report.left[1:] == [f"{m}.multi_scale_deformable_attn_pytorch: not imported yet; imported now, it takes "
                               "msda's from mmcv, and keeps it after msda.unpatch()" for m in BY_NAME]
    functions, *attention = import_bevformer()
    assert functions.ext_module is _patch_mmcv._LITE_EXT
    for name in _patch_bevformer.CLASSES:
        assert_agrees_with_reference(lambda v, s, st, loc, w: getattr(functions, name).apply(v, s, st, loc, w, 64))
    value, shapes, starts, locations, weights = inputs()
    torch.testing.assert_close(attention[0].attend(value, shapes, starts, locations, weights),
                               ms_deform_attn_reference(value, [tuple(s) for s in shapes.tolist()], locations, weights))


def test_imported_before_the_patch_its_own_names_are_switched_and_restored(bevformer, compiled_ext, monkeypatch):
    bevformer()
    modules = import_bevformer()
    functions = modules[0]
    assert functions.ext_module is compiled_ext
    own = _patch.original(sys.modules[_patch_mmcv.OPS_MODULE], _patch_mmcv.FUNCTION) \
        if _patch_mmcv.OPS_MODULE in sys.modules else None
    before = [dict(vars(m)) for m in modules]
    report = msda.patch("bevformer").frameworks["bevformer"]
    assert report.switched[:2] == ["mmcv._ext.ms_deform_attn_forward (mmcv's, which BEVFormer's Functions call)",
                                   "mmcv._ext.ms_deform_attn_backward (mmcv's, which BEVFormer's Functions call)"]
    assert report.switched[-3:] == [f"{m}.multi_scale_deformable_attn_pytorch (BEVFormer's own name for it: the "
                                    "layer's path for tensors not on CUDA)" for m in BY_NAME]
    assert report.left == [f"BEVFormer's MultiScaleDeformableAttnFunction_fp32 and "
                           f"MultiScaleDeformableAttnFunction_fp16 (checked in {FUNCTIONS} (imported)): they call "
                           "mmcv._ext's functions, switched"]
    assert compiled_ext.ms_deform_attn_forward is _patch_mmcv.ms_deform_attn_forward
    calls = []
    monkeypatch.setattr(_patch_mmcv, "ms_deform_attn",
                        lambda *a, _real=_patch_mmcv.ms_deform_attn: calls.append(1) or _real(*a))
    for attention in modules[1:]:
        assert_agrees_with_reference(lambda v, s, st, loc, w: attention.attend(v, s, st, loc, w))
    assert len(calls) == 3
    assert_agrees_with_reference(lambda v, s, st, loc, w: functions.MultiScaleDeformableAttnFunction_fp32.apply(
        v, s, st, loc, w, 64))
    restored = msda.unpatch()
    assert restored[:3] == [f"{m}.multi_scale_deformable_attn_pytorch" for m in reversed(BY_NAME)]
    assert [dict(vars(m)) for m in modules] == before
    assert compiled_ext.ms_deform_attn_forward() == "mmcv's own ms_deform_attn_forward"
    if own is not None:
        assert sys.modules[_patch_mmcv.OPS_MODULE].multi_scale_deformable_attn_pytorch is own


@pytest.mark.parametrize("imported", [False, True], ids=["source", "module"])
def test_a_changed_function_is_refused_and_nothing_is_switched(bevformer, compiled_ext, imported):
    bevformer(forward_params="value, spatial_shapes, level_start_index, sampling_locations, attention_weights, "
                             "im2col_step")
    modules = import_bevformer() if imported else []
    before = [dict(vars(m)) for m in modules]
    with pytest.raises(msda.PatchError, match=r"^msda.patch: BEVFormer is not as msda expects, nothing switched: "
                                              r"MultiScaleDeformableAttnFunction_fp16.forward takes \(ctx, value, "
                                              r"spatial_shapes, level_start_index, sampling_locations, "
                                              r"attention_weights, im2col_step\), msda expects \(ctx, value, "
                                              r"value_spatial_shapes, value_level_start_index, sampling_locations, "
                                              r"attention_weights, im2col_step\)$"):
        msda.patch("bevformer")
    assert [dict(vars(m)) for m in modules] == before
    assert compiled_ext.ms_deform_attn_forward() == "mmcv's own ms_deform_attn_forward"
    assert msda.unpatch() == []


def test_functions_on_another_extension_are_refused(bevformer, compiled_ext):
    bevformer()
    functions = import_bevformer()[0]
    functions.ext_module = types.ModuleType("other._ext")
    with pytest.raises(msda.PatchError, match=f"^msda.patch: BEVFormer is not as msda expects, nothing switched: "
                                              f"{FUNCTIONS}.ext_module is not mmcv._ext$"):
        msda.patch("bevformer")
    assert compiled_ext.ms_deform_attn_forward() == "mmcv's own ms_deform_attn_forward"


def test_bevformer_and_mmcv_together_switch_each_name_once(bevformer, compiled_ext):
    bevformer()
    import_bevformer()
    report = msda.patch("mmcv", "bevformer")
    assert set(report.frameworks) == {"mmcv", "bevformer"}
    restored = msda.unpatch()
    assert len(restored) == len(set(restored)) == 3 + 3  # mmcv's three, BEVFormer's three


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_bevformers_real_functions_module(monkeypatch, device):
    """BEVFormer's own multi_scale_deformable_attn_function.py, imported alone through empty parent
    packages (BEVFormer's packages import mmdet3d and mmcv 1.x's runner): msda.patch("bevformer")
    checks it in its source before it is imported, and imported afterwards its two Functions call
    msda through mmcv's `_ext` and agree with the reference in f64, on the CPU and on a GPU."""
    src = os.environ.get("MSDA_BEVFORMER_SRC")
    if not src:
        pytest.skip("MSDA_BEVFORMER_SRC is not set (the folder holding BEVFormer's projects/, its repository's "
                    "root; BEVFormer is not on PyPI)")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    path = os.path.join(src, _patch_bevformer.PACKAGE, *_patch_bevformer.FUNCTIONS_FILE)
    assert os.path.isfile(path), f"MSDA_BEVFORMER_SRC={src} has no {path}"
    assert _patch_bevformer.PACKAGE not in sys.modules
    packages = MODULES.split(".")  # projects, mmdet3d_plugin, bevformer, modules
    for depth in range(1, len(packages) + 1):
        name = ".".join(packages[:depth])
        monkeypatch.setitem(sys.modules, name, fake_projects.empty_package(name, os.path.join(src, *packages[:depth])))
    calls = []
    for op in ("forward", "backward"):
        monkeypatch.setattr(_patch_mmcv._torch_kernels, op,
                            lambda *a, _real=getattr(_patch_mmcv._torch_kernels, op): calls.append(1) or _real(*a))
    on = (lambda *ts: [t.to(device) for t in ts])
    try:
        report = msda.patch("bevformer").frameworks["bevformer"]
        assert report.left[0] == (f"BEVFormer's MultiScaleDeformableAttnFunction_fp32 and "
                                  f"MultiScaleDeformableAttnFunction_fp16 (checked in {path}): they call mmcv._ext's "
                                  "functions, switched")
        functions = importlib.import_module(FUNCTIONS)
        assert os.path.samefile(functions.__file__, path)
        assert functions.ext_module.ms_deform_attn_forward is _patch_mmcv.ms_deform_attn_forward
        assert functions.ext_module.ms_deform_attn_backward is _patch_mmcv.ms_deform_attn_backward
        for name in _patch_bevformer.CLASSES:
            function = getattr(functions, name)
            assert_agrees_with_reference(lambda v, s, st, loc, w: function.apply(*on(v, s, st, loc, w), 64).cpu())
        assert len(calls) == 2 * len(_patch_bevformer.CLASSES)
    finally:
        msda.unpatch()
        for name in [m for m in sys.modules if m.split(".")[0] == _patch_bevformer.PACKAGE]:
            del sys.modules[name]
