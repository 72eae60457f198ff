"""msda.patch("groundingdino") on a stand-in of GroundingDINO's op module (fake_projects: its
layout, its `from groundingdino import _C` in a try that only warns, its Function calling `_C`, its
PyTorch path called by name), without a compiled `_C`, as where users meet "name '_C' is not
defined"; and on the installed groundingdino's real op module where one is installed
(groundingdino-py, a copy without `_C`; make check-python installs it). Outputs and gradients in
f64 on the CPU against reference.py's op; refusal of changed code with nothing switched; unpatch
restoring exactly; layers built before the patch switched."""
import importlib
import importlib.util
import sys
import types
import warnings

import pytest
import torch

import fake_projects
import msda
from msda import _patch_c_ext
from reference import ms_deform_attn_reference

pytestmark = pytest.mark.usefixtures("unpatched")

OP_MODULE = "groundingdino.models.GroundingDINO.ms_deform_attn"
SHAPES = ((6, 5), (3, 4), (2, 2))


@pytest.fixture
def project(tmp_path):
    """Writes a GroundingDINO stand-in (fake_projects.groundingdino(**changes)) and gives its root."""
    yield from fake_projects.projects(tmp_path, "groundingdino", fake_projects.groundingdino)


def inputs(seed=0, n=2, heads=2, dim=4, queries=7, points=3):
    g = torch.Generator().manual_seed(seed)
    shapes = torch.tensor(SHAPES, dtype=torch.long)
    starts = torch.cat((shapes.new_zeros(1), (shapes[:, 0] * shapes[:, 1]).cumsum(0)[:-1]))
    value = torch.randn(n, int((shapes[:, 0] * shapes[:, 1]).sum()), heads, dim, generator=g, dtype=torch.float64)
    # off pixel centres (a kink of bilinear sampling's gradient there), some points outside the maps
    locations = torch.rand(n, queries, heads, len(SHAPES), points, 2, generator=g, dtype=torch.float64) * 1.1 - 0.05
    locations += 0.013
    weights = torch.rand(n, queries, heads, len(SHAPES), points, generator=g, dtype=torch.float64)
    return value, shapes, starts, locations, weights


def grads_of(fn, value, locations, weights):
    leaves = [t.clone().requires_grad_(True) for t in (value, locations, weights)]
    out = fn(*leaves)
    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    return out.detach(), [t.grad for t in leaves]


def assert_agrees_with_reference(fn):
    value, shapes, starts, locations, weights = inputs()
    out, grads = grads_of(lambda v, loc, w: fn(v, shapes, starts, loc, w), value, locations, weights)
    ref, ref_grads = grads_of(lambda v, loc, w: ms_deform_attn_reference(v, SHAPES, loc, w), value, locations,
                              weights)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for got, want, name in zip(grads, ref_grads, ("value", "sampling_locations", "attention_weights")):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, msg=name)


def assert_layer_runs_msda(layer, query, kwargs, ref, ref_grads, monkeypatch):
    """The layer's forward and backward go through msda once (on the CPU: the switched PyTorch
    function) and agree with REF and REF_GRADS, what it gave before the patch."""
    calls = []
    monkeypatch.setattr(_patch_c_ext, "ms_deform_attn",
                        lambda *a, _real=_patch_c_ext.ms_deform_attn: calls.append(1) or _real(*a))
    out = layer(query, **kwargs)
    out.sum().backward()
    assert calls == [1]
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for n, p in layer.named_parameters():
        torch.testing.assert_close(p.grad, ref_grads[n], rtol=1e-8, atol=1e-10, msg=n)


def layer_and_inputs(module):
    torch.manual_seed(0)
    layer = module.MultiScaleDeformableAttention(embed_dim=16, num_heads=2, num_levels=3, num_points=2,
                                                 batch_first=True).double()
    value, shapes, starts, _, _ = inputs(heads=2, dim=8)
    kwargs = dict(value=value.reshape(2, -1, 16), reference_points=torch.rand(2, 7, 3, 2, dtype=torch.float64),
                  spatial_shapes=shapes, level_start_index=starts)
    return layer, torch.randn(2, 7, 16, dtype=torch.float64), kwargs


def test_without_c_the_function_runs_msda_through_a_stand_in_c_and_agrees_with_the_reference(project):
    project()
    report = msda.patch("groundingdino")
    module = importlib.import_module(OP_MODULE)
    assert module._C is sys.modules["groundingdino._C"] is sys.modules["groundingdino"]._C
    assert isinstance(module._C, _patch_c_ext.StandInExt)
    gd = report.frameworks["groundingdino"]
    assert gd.version == "0.1.0+fake"
    assert gd.switched == [
        "groundingdino._C: not built; msda's, with the MSDA op only (on CUDA tensors)",
        f"{OP_MODULE}.multi_scale_deformable_attn_pytorch (the layer's path for tensors not on CUDA)"]
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.MultiScaleDeformableAttnFunction.apply(
        v, s, st, loc, w, 64))
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.multi_scale_deformable_attn_pytorch(v, s, loc, w))


def test_imported_without_c_before_the_patch_the_module_warned_and_gets_the_stand_in(project):
    project()
    with pytest.warns(UserWarning, match="Failed to load custom C\\+\\+ ops. Running on CPU mode Only!"):
        module = importlib.import_module(OP_MODULE)
    assert "_C" not in vars(module)
    value, shapes, starts, locations, weights = inputs()
    with pytest.raises(NameError, match="name '_C' is not defined"):
        module.MultiScaleDeformableAttnFunction.apply(value, shapes, starts, locations, weights, 64)
    msda.patch("groundingdino")
    assert isinstance(module._C, _patch_c_ext.StandInExt)
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.MultiScaleDeformableAttnFunction.apply(
        v, s, st, loc, w, 64))


def test_a_layer_built_before_the_patch_runs_msda_and_agrees_with_its_own_path(project, monkeypatch):
    project()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(OP_MODULE)
    layer, query, kwargs = layer_and_inputs(module)
    with torch.no_grad():  # off pixel centres
        layer.sampling_offsets.weight.add_(torch.randn_like(layer.sampling_offsets.weight) * 0.01)
    ref = layer(query, **kwargs)
    ref.sum().backward()
    ref_grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
    layer.zero_grad()
    msda.patch("groundingdino")
    assert_layer_runs_msda(layer, query, kwargs, ref, ref_grads, monkeypatch)


def test_unpatch_restores_exactly_what_was_there(project):
    project()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(OP_MODULE)
    own = module.multi_scale_deformable_attn_pytorch
    before = dict(vars(module))
    msda.patch("groundingdino")
    assert module.multi_scale_deformable_attn_pytorch is _patch_c_ext.function
    assert msda.patch("groundingdino").frameworks["groundingdino"].switched  # twice: nothing more to switch
    restored = msda.unpatch()
    assert restored == [f"{OP_MODULE}.multi_scale_deformable_attn_pytorch", f"{OP_MODULE}._C",
                        "groundingdino._C (attribute)", "groundingdino._C"]
    assert dict(vars(module)) == before and module.multi_scale_deformable_attn_pytorch is own
    assert "groundingdino._C" not in sys.modules and not hasattr(sys.modules["groundingdino"], "_C")
    assert msda.unpatch() == []


def test_patched_before_import_unpatch_takes_the_stand_in_away_again(project):
    project()
    msda.patch("groundingdino")
    module = sys.modules[OP_MODULE]
    msda.unpatch()
    assert "_C" not in vars(module) and "groundingdino._C" not in sys.modules
    assert module.multi_scale_deformable_attn_pytorch is not _patch_c_ext.function


@pytest.mark.parametrize("imported", [False, True], ids=["source", "module"])
def test_a_changed_signature_is_refused_and_nothing_is_switched(project, imported):
    project(function_params="value, value_spatial_shapes, sampling_locations, attention_weights, extra=None")
    if imported:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module(OP_MODULE)
    modules = dict(sys.modules)
    with pytest.raises(msda.PatchError, match=r"^msda.patch: groundingdino 0.1.0\+fake is not as msda expects, "
                                              r"nothing switched: groundingdino.models.GroundingDINO.ms_deform_attn."
                                              r"multi_scale_deformable_attn_pytorch takes \(value, "
                                              r"value_spatial_shapes, sampling_locations, attention_weights, "
                                              r"extra\), msda expects \(value, value_spatial_shapes, "
                                              r"sampling_locations, attention_weights\)$"):
        msda.patch("groundingdino")
    assert "groundingdino._C" not in sys.modules
    assert ("groundingdino" in sys.modules) == (OP_MODULE in sys.modules) == imported  # not even imported
    assert not hasattr(sys.modules.get("groundingdino"), "_C")
    if imported:
        assert "_C" not in vars(sys.modules[OP_MODULE])
        assert sys.modules[OP_MODULE].multi_scale_deformable_attn_pytorch is not _patch_c_ext.function
    assert msda.unpatch() == []
    assert not [m for m in set(sys.modules) - set(modules) if m.startswith("groundingdino")]


def test_a_changed_function_class_is_refused(project):
    project()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(OP_MODULE)

    class Changed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, value, value_spatial_shapes, sampling_locations, attention_weights, im2col_step):
            raise AssertionError("not to be called")

    module.MultiScaleDeformableAttnFunction = Changed
    with pytest.raises(msda.PatchError, match=r"MultiScaleDeformableAttnFunction.forward takes \(ctx, value, "
                                              r"value_spatial_shapes, sampling_locations, attention_weights, "
                                              r"im2col_step\), msda expects \(ctx, value, value_spatial_shapes, "
                                              r"value_level_start_index, sampling_locations, attention_weights, "
                                              r"im2col_step\)"):
        msda.patch("groundingdino")
    assert "_C" not in vars(module)


def test_other_ops_of_the_stand_in_raise_naming_the_op(project):
    project()
    msda.patch("groundingdino")
    with pytest.raises(NotImplementedError, match=r"^groundingdino\._C\.get_cuda_version: groundingdino\._C is not "
                                                  r"built here or does not load, and msda.patch\('groundingdino'\) "
                                                  r"provides only ms_deform_attn_forward and "
                                                  r"ms_deform_attn_backward"):
        sys.modules["groundingdino._C"].get_cuda_version()


def test_a_compiled_c_that_loads_has_its_two_functions_switched(project, monkeypatch):
    """Where groundingdino._C loads (a CUDA build), its two functions are switched on it, and
    nothing else of it; here a module object stands for the extension."""
    project()
    compiled = types.ModuleType("groundingdino._C")
    compiled.ms_deform_attn_forward = own_forward = lambda *a: None
    compiled.ms_deform_attn_backward = own_backward = lambda *a: None
    monkeypatch.setitem(sys.modules, "groundingdino._C", compiled)
    module = importlib.import_module(OP_MODULE)
    assert module._C is compiled
    report = msda.patch("groundingdino")
    assert report.frameworks["groundingdino"].switched[:2] == [
        "groundingdino._C.ms_deform_attn_forward (the compiled op's, on CUDA tensors)",
        "groundingdino._C.ms_deform_attn_backward (the compiled op's, on CUDA tensors)"]
    assert module._C is compiled and compiled.ms_deform_attn_forward is _patch_c_ext.ms_deform_attn_forward
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.MultiScaleDeformableAttnFunction.apply(
        v, s, st, loc, w, 64))
    msda.unpatch()
    assert compiled.ms_deform_attn_forward is own_forward and compiled.ms_deform_attn_backward is own_backward


def test_a_copy_without_c_has_its_function_switched_only(project):
    project(pure_python=True)
    report = msda.patch("groundingdino")
    gd = report.frameworks["groundingdino"]
    assert gd.switched == [f"{OP_MODULE}.multi_scale_deformable_attn_pytorch (the layer's only path)"]
    assert gd.left[0].startswith("groundingdino._C: this copy of groundingdino has no MultiScaleDeformableAttnFunction")
    assert "groundingdino._C" not in sys.modules
    module = sys.modules[OP_MODULE]
    assert_agrees_with_reference(lambda v, s, st, loc, w: module.multi_scale_deformable_attn_pytorch(v, s, loc, w))


def test_a_project_whose_modules_fail_to_import_is_refused_or_left_out_when_none_is_named(project, monkeypatch):
    project(models_import="import msda_no_such_module")
    with pytest.raises(msda.PatchError, match=r"^msda.patch: No module named 'msda_no_such_module'; nothing switched$"):
        msda.patch("groundingdino")
    assert "groundingdino._C" not in sys.modules and msda.unpatch() == []
    from msda import _patch
    monkeypatch.setattr(_patch, "_FRAMEWORKS", {"groundingdino": _patch._FRAMEWORKS["groundingdino"]})
    report = msda.patch()
    assert report.frameworks["groundingdino"].switched == []
    assert report.frameworks["groundingdino"].left == [
        "nothing switched: its code does not import here (ModuleNotFoundError: No module named 'msda_no_such_module')"]
    assert "groundingdino._C" not in sys.modules and msda.unpatch() == []


def _installed_op_module_file():
    """The installed groundingdino's op module, where one is installed that is not this test's."""
    if "groundingdino" in sys.modules:
        return None
    spec = importlib.util.find_spec("groundingdino")
    if spec is None or not spec.submodule_search_locations:
        return None
    return spec.submodule_search_locations[0]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_the_installed_groundingdinos_real_op_module(monkeypatch, device):
    """The real op module of the installed groundingdino (groundingdino-py in make check-python),
    its parent packages stood in for by empty ones so that their imports (transformers' BERT,
    torchvision, timm) are not needed: the patch's checks pass on the real code, and its layer,
    built before the patch, runs msda and agrees with its own PyTorch path on the CPU (f64); on a
    GPU, the layer moved there after the patch, where groundingdino calls its Function on `_C`."""
    folder = _installed_op_module_file()
    if folder is None:
        pytest.skip("no groundingdino installed (pip install groundingdino-py)")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    on = (lambda *ts: [t.to(device) for t in ts])
    import os
    for name, path in (("groundingdino.models", os.path.join(folder, "models")),
                       ("groundingdino.models.GroundingDINO", os.path.join(folder, "models", "GroundingDINO"))):
        monkeypatch.setitem(sys.modules, name, fake_projects.empty_package(name, path))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importlib.import_module(OP_MODULE)
        layer, query, kwargs = layer_and_inputs(module)
        with torch.no_grad():
            layer.sampling_offsets.weight.add_(torch.randn_like(layer.sampling_offsets.weight) * 0.01)
        ref = layer(query, **kwargs)
        report = msda.patch("groundingdino")
        assert module.multi_scale_deformable_attn_pytorch is _patch_c_ext.function
        assert report.frameworks["groundingdino"].version != "unknown (no version metadata)"
        layer.to(device)
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        torch.testing.assert_close(layer(query.to(device), **moved).cpu(), ref, rtol=1e-10, atol=1e-10)
        if hasattr(module, "MultiScaleDeformableAttnFunction"):  # IDEA-Research's, with _C
            assert_agrees_with_reference(lambda v, s, st, loc, w: module.MultiScaleDeformableAttnFunction.apply(
                *on(v, s, st, loc, w), 64).cpu())
        assert_agrees_with_reference(lambda v, s, st, loc, w: module.multi_scale_deformable_attn_pytorch(
            *on(v, s, loc, w)).cpu())
    finally:
        msda.unpatch()
        for name in [m for m in sys.modules if m.split(".")[0] == "groundingdino"]:
            del sys.modules[name]



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)])
def test_on_cuda_the_function_runs_msda_through_the_stand_in_c(project, dtype, tol):
    # What the layer calls on a GPU (torch.cuda.is_available() and value.is_cuda): its Function,
    # whose _C is the stand-in. Against the reference in f64 on the CPU, on the same rounded inputs.
    project()
    msda.patch("groundingdino")
    module = importlib.import_module(OP_MODULE)
    value, shapes, starts, locations, weights = (t.to(dtype).double() if t.is_floating_point() else t
                                                 for t in inputs(heads=8, dim=32, queries=50, points=4))
    grad_out = torch.randn(2, 50, 8 * 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def run(fn, device, cast):
        leaves = [t.to(device, cast).requires_grad_(True) for t in (value, locations, weights)]
        out = fn(*leaves)
        out.backward(grad_out.to(device, out.dtype))
        return out.detach().cpu().double(), [t.grad.cpu().double() for t in leaves], leaves[0].grad.dtype

    out, grads, grad_dtype = run(lambda v, loc, w: module.MultiScaleDeformableAttnFunction.apply(
        v, shapes.cuda(), starts.cuda(), loc, w, 64), "cuda", dtype)
    ref, ref_grads, _ = run(lambda v, loc, w: ms_deform_attn_reference(v, SHAPES, loc, w), "cpu", torch.float64)
    assert grad_dtype == dtype
    assert (out - ref).abs().max() <= tol * ref.abs().max()
    for got, want, name in zip(grads, ref_grads, ("value", "sampling_locations", "attention_weights")):
        assert (got - want).abs().max() <= 4 * tol * want.abs().max(), name
