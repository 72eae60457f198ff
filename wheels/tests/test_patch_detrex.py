"""msda.patch("detrex") on a stand-in of detrex's layers (fake_projects: `import detrex` imports
its layers, whose op module and DCNv3 module each do `from detrex import _C`, and whose op module
replaces its layer class by a placeholder that raises when built where that import fails). detrex
is not on PyPI and its package needs detectron2: its real op module is tested where detrex is
installed, else skipped. Outputs and gradients in f64 on the CPU against reference.py's op;
refusal with nothing switched; unpatch restoring exactly; layers built before the patch (with a
compiled _C) switched; DCNv3 on the stand-in raising, naming its op."""
import importlib
import importlib.util
import os
import sys
import types

import pytest
import torch

import fake_projects
import msda
from msda import _patch_c_ext
from test_patch_groundingdino import assert_agrees_with_reference, assert_layer_runs_msda, inputs, layer_and_inputs

pytestmark = pytest.mark.usefixtures("unpatched")

OP_MODULE = "detrex.layers.multi_scale_deform_attn"


@pytest.fixture
def project(tmp_path):
    yield from fake_projects.projects(tmp_path, "detrex", fake_projects.detrex)


def test_without_c_detrex_has_a_placeholder_layer_and_with_the_patch_the_real_one_on_msda(project):
    project()
    import detrex.layers
    with pytest.raises(ImportError, match="Cannot import 'detrex._C'"):
        detrex.layers.MultiScaleDeformableAttention(embed_dim=16, num_heads=2, num_levels=3, num_points=2)
    for name in [m for m in sys.modules if m.split(".")[0] == "detrex"]:  # as in a new process
        del sys.modules[name]
    report = msda.patch("detrex")
    module = sys.modules[OP_MODULE]
    assert isinstance(module._C, _patch_c_ext.StandInExt) and sys.modules["detrex.layers.dcn_v3"]._C is module._C
    dx = report.frameworks["detrex"]
    assert dx.version == "0.3.0+fake"
    assert dx.switched == ["detrex._C: not built; msda's, with the MSDA op only (on CUDA tensors)",
                           f"{OP_MODULE}.multi_scale_deformable_attn_pytorch (the layer's path for tensors not on "
                           "CUDA)"]
    layer, query, kwargs = layer_and_inputs(module)  # the real class, not the placeholder
    assert layer(query, **kwargs).shape == (2, 7, 16)
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.MultiScaleDeformableAttnFunction.apply(
        v, s, st, loc, w, 64))
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.multi_scale_deformable_attn_pytorch(v, s, loc, w))


def test_dcnv3_on_the_stand_in_raises_naming_its_op(project):
    project()
    msda.patch("detrex")
    from detrex.layers import DCNv3Function
    with pytest.raises(NotImplementedError, match=r"^detrex\._C\.dcnv3_forward: detrex\._C is not built here or "
                                                  r"does not load, and msda.patch\('detrex'\) provides only "
                                                  r"ms_deform_attn_forward and ms_deform_attn_backward; build "
                                                  r"detrex\._C for the installed torch and CUDA for dcnv3_forward$"):
        DCNv3Function.apply(torch.zeros(1, 4, 4, 8), torch.zeros(1, 4, 4, 18), torch.zeros(1, 4, 4, 9), 3, 3, 1, 1,
                            1, 1, 1, 1, 1, 8, 1.0, 64)


def test_imported_without_c_before_the_patch_is_refused_saying_why(project):
    project()
    import detrex  # noqa: F401  (its layers: the placeholder)
    module = sys.modules[OP_MODULE]
    placeholder = module.MultiScaleDeformableAttention
    with pytest.raises(msda.PatchError, match=r"^msda.patch: detrex 0.3.0\+fake: detrex.layers.multi_scale_deform_attn "
                                              r"was imported without detrex._C \(not built\), so its layer class is "
                                              r"detrex's placeholder, which raises when built; nothing switched. "
                                              r"Call msda.patch\('detrex'\) before detrex is imported$"):
        msda.patch("detrex")
    assert "detrex._C" not in sys.modules and "_C" not in vars(module) and not hasattr(sys.modules["detrex"], "_C")
    assert module.MultiScaleDeformableAttention is placeholder
    assert module.multi_scale_deformable_attn_pytorch is not _patch_c_ext.function


def compiled_c(monkeypatch):
    compiled = types.ModuleType("detrex._C")
    compiled.ms_deform_attn_forward = lambda *a: None
    compiled.ms_deform_attn_backward = lambda *a: None
    compiled.dcnv3_forward = dcn = lambda *a: "detrex's own"
    monkeypatch.setitem(sys.modules, "detrex._C", compiled)
    return compiled, dcn


def test_with_a_compiled_c_a_layer_built_before_the_patch_runs_msda_and_dcnv3_stays_detrexs(project, monkeypatch):
    project()
    compiled, dcn = compiled_c(monkeypatch)
    own = (compiled.ms_deform_attn_forward, compiled.ms_deform_attn_backward)
    module = importlib.import_module(OP_MODULE)
    layer, query, kwargs = layer_and_inputs(module)
    with torch.no_grad():  # off pixel centres
        layer.sampling_offsets.weight.add_(torch.randn_like(layer.sampling_offsets.weight) * 0.01)
    ref = layer(query, **kwargs)
    ref.sum().backward()
    ref_grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
    layer.zero_grad()
    before = dict(vars(module))
    report = msda.patch("detrex")
    assert report.frameworks["detrex"].switched == [
        "detrex._C.ms_deform_attn_forward (the compiled op's, on CUDA tensors)",
        "detrex._C.ms_deform_attn_backward (the compiled op's, on CUDA tensors)",
        f"{OP_MODULE}.multi_scale_deformable_attn_pytorch (the layer's path for tensors not on CUDA)"]
    assert_layer_runs_msda(layer, query, kwargs, ref, ref_grads, monkeypatch)
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.MultiScaleDeformableAttnFunction.apply(
        v, s, st, loc, w, 64))
    assert compiled.dcnv3_forward is dcn
    assert msda.unpatch() == [f"{OP_MODULE}.multi_scale_deformable_attn_pytorch", "detrex._C.ms_deform_attn_backward",
                              "detrex._C.ms_deform_attn_forward"]
    assert (compiled.ms_deform_attn_forward, compiled.ms_deform_attn_backward) == own
    assert dict(vars(module)) == before


def test_unpatch_restores_exactly_and_takes_the_stand_in_away(project):
    project()
    modules = set(sys.modules)
    msda.patch("detrex")
    assert msda.patch("detrex").frameworks["detrex"].switched  # twice: nothing more switched
    module = sys.modules[OP_MODULE]
    assert msda.unpatch() == [f"{OP_MODULE}.multi_scale_deformable_attn_pytorch", f"{OP_MODULE}._C",
                              "detrex._C (attribute)", "detrex._C"]
    assert "detrex._C" not in sys.modules and not hasattr(sys.modules["detrex"], "_C") and "_C" not in vars(module)
    assert module.multi_scale_deformable_attn_pytorch is not _patch_c_ext.function
    assert {m for m in set(sys.modules) - modules if m.startswith("detrex")} == {
        "detrex", "detrex.layers", OP_MODULE, "detrex.layers.dcn_v3"}
    assert msda.unpatch() == []


@pytest.mark.parametrize("change, message", [
    (dict(function_params="value, spatial_shapes, sampling_locations, attention_weights"),
     r"multi_scale_deformable_attn_pytorch takes \(value, spatial_shapes, sampling_locations, attention_weights\), "
     r"msda expects \(value, value_spatial_shapes, sampling_locations, attention_weights\)"),
    (dict(function="multi_scale_deformable_attn_torch"),
     r"multi_scale_deformable_attn_pytorch has none, msda expects \(value, value_spatial_shapes, "
     r"sampling_locations, attention_weights\)"),
], ids=["parameter renamed", "function renamed"])
def test_changed_code_is_refused_in_the_source_and_nothing_is_imported_or_switched(project, change, message):
    project(**change)
    with pytest.raises(msda.PatchError, match=r"^msda.patch: detrex 0.3.0\+fake is not as msda expects, nothing "
                                              r"switched: detrex.layers.multi_scale_deform_attn." + message + "$"):
        msda.patch("detrex")
    assert not [m for m in sys.modules if m.split(".")[0] == "detrex"]
    assert msda.unpatch() == []


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_the_installed_detrexs_real_op_module(monkeypatch, device):
    """detrex's real op module where detrex is installed (from its repository, or its sources on
    PYTHONPATH), its packages stood in for by empty ones so that detectron2 is not needed; its
    Function on the GPU too, where there is one (f64, against the reference on the CPU)."""
    if "detrex" in sys.modules or importlib.util.find_spec("detrex") is None:
        pytest.skip("detrex is not installed (it installs from IDEA-Research/detrex's repository)")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    on = (lambda *ts: [t.to(device) for t in ts])
    folder = importlib.util.find_spec("detrex").submodule_search_locations[0]
    for name, path in (("detrex", folder), ("detrex.layers", os.path.join(folder, "layers"))):
        monkeypatch.setitem(sys.modules, name, fake_projects.empty_package(name, path))
    try:
        report = msda.patch("detrex")
        module = sys.modules[OP_MODULE]
        assert module.multi_scale_deformable_attn_pytorch is _patch_c_ext.function
        assert report.frameworks["detrex"].switched
        assert_agrees_with_reference(lambda v, s, st, loc, w: module.MultiScaleDeformableAttnFunction.apply(
            *on(v, s, st, loc, w), 64).cpu())
        assert_agrees_with_reference(lambda v, s, st, loc, w: module.multi_scale_deformable_attn_pytorch(
            *on(v, s, loc, w)).cpu())
    finally:
        msda.unpatch()
        for name in [m for m in sys.modules if m.split(".")[0] == "detrex"]:
            del sys.modules[name]


def test_unknown_and_uninstalled_names_say_how_to_get_them():
    if importlib.util.find_spec("detrex") is not None:
        pytest.skip("detrex is installed here")
    with pytest.raises(msda.PatchError, match=r"^msda.patch: detrex is not importable here \(IDEA-Research/detrex "
                                              r"installs from its repository\)$"):
        msda.patch("detrex")
    assert "detrex" in msda._patch.frameworks() and "groundingdino" in msda._patch.frameworks()
