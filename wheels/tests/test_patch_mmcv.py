"""msda.patch("mmcv") against mmcv's real code (mmcv-lite from PyPI, pinned in tests/tests.mk):
without the patch mmcv.ops cannot be imported at all there ("No module named 'mmcv._ext'"); with
it, mmcv's own autograd Function (which calls mmcv._ext by name, as BEVFormer's copies do) and its
layer run on msda, compared in f64 on the CPU with mmcv's PyTorch version of the op, outputs and
gradients; refusal of changed code leaves nothing switched; unpatch restores."""
import importlib
import os
import sys
import types

import pytest
import torch

import msda
from msda import _patch_mmcv

mmcv = pytest.importorskip("mmcv")


pytestmark = pytest.mark.usefixtures("unpatched")


def _inputs(dtype=torch.float64, n=2, heads=2, dim=4, shapes=((6, 5), (3, 4), (2, 2)), queries=7, points=3,
            seed=0):
    g = torch.Generator().manual_seed(seed)
    spatial_shapes = torch.tensor(shapes, dtype=torch.long)
    starts = torch.cat((spatial_shapes.new_zeros(1), (spatial_shapes[:, 0] * spatial_shapes[:, 1]).cumsum(0)[:-1]))
    s = int((spatial_shapes[:, 0] * spatial_shapes[:, 1]).sum())
    value = torch.randn(n, s, heads, dim, generator=g, dtype=dtype)
    # inside the maps and off pixel centres, where bilinear sampling is differentiable
    locations = torch.rand(n, queries, heads, len(shapes), points, 2, generator=g, dtype=dtype) * 1.1 - 0.05
    weights = torch.rand(n, queries, heads, len(shapes), points, generator=g, dtype=dtype)
    return value, spatial_shapes, starts, locations, weights


def _grads(fn, value, locations, weights):
    leaves = [t.clone().requires_grad_(True) for t in (value, locations, weights)]
    out = fn(*leaves)
    g = torch.Generator().manual_seed(1)
    out.backward(torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.device, out.dtype))
    return out.detach(), [t.grad for t in leaves]


def test_without_the_patch_mmcv_lite_has_no_ops_and_with_it_the_layer_imports():
    assert "mmcv._ext" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="mmcv._ext"):
        importlib.import_module("mmcv.ops")
    report = msda.patch("mmcv")
    from mmcv.ops import MultiScaleDeformableAttention  # noqa: F401
    from mmcv.ops.multi_scale_deform_attn import ext_module
    assert ext_module is _patch_mmcv._LITE_EXT
    switched = report.frameworks["mmcv"].switched
    assert switched[0].startswith("mmcv._ext: none here")
    assert any(s.startswith("mmcv.ops.multi_scale_deform_attn.multi_scale_deformable_attn_pytorch") for s in switched)
    assert report.frameworks["mmcv"].version == mmcv.__version__


def test_mmcvs_function_calls_msda_through_its_ext_module_and_agrees_with_mmcvs_pytorch_op():
    msda.patch("mmcv")
    from mmcv.ops import multi_scale_deform_attn as m
    own = msda._patch.original(m, "multi_scale_deformable_attn_pytorch")
    value, shapes, starts, locations, weights = _inputs()
    out, grads = _grads(lambda v, loc, w: m.MultiScaleDeformableAttnFunction.apply(v, shapes, starts, loc, w, 64),
                        value, locations, weights)
    ref, ref_grads = _grads(lambda v, loc, w: own(v, shapes, loc, w), value, locations, weights)
    assert out.shape == (2, 7, 8)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for got, want, name in zip(grads, ref_grads, ("value", "sampling_locations", "attention_weights")):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, msg=name)


def test_the_backward_adds_into_the_buffers_it_is_given_as_mmcvs_op_does():
    value, shapes, starts, locations, weights = _inputs()
    grad_output = torch.randn(2, 7, 8, dtype=torch.float64)
    fresh = [torch.zeros_like(t) for t in (value, locations, weights)]
    _patch_mmcv.ms_deform_attn_backward(value, shapes, starts, locations, weights, grad_output, *fresh, im2col_step=64)
    ones = [torch.ones_like(t) for t in (value, locations, weights)]
    _patch_mmcv.ms_deform_attn_backward(value, shapes, starts, locations, weights, grad_output, *ones, im2col_step=64)
    for once, added in zip(fresh, ones):
        assert once.abs().sum() > 0
        torch.testing.assert_close(added, once + 1)


def test_the_layer_on_cpu_runs_msda_and_agrees_with_its_own_path():
    msda.patch("mmcv")
    from mmcv.ops import multi_scale_deform_attn as m
    torch.manual_seed(0)
    layer = m.MultiScaleDeformableAttention(embed_dims=16, num_heads=2, num_levels=3, num_points=2, dropout=0.0,
                                            batch_first=True).double()
    with torch.no_grad():  # off pixel centres (mmcv's initialisation puts points on them)
        layer.sampling_offsets.weight.add_(torch.randn_like(layer.sampling_offsets.weight) * 0.01)
    value, shapes, starts, _, _ = _inputs(heads=2, dim=8)
    value = value.reshape(2, -1, 16)
    query = torch.randn(2, 7, 16, dtype=torch.float64)
    reference_points = torch.rand(2, 7, 3, 2, dtype=torch.float64)
    calls = [0]
    real = _patch_mmcv.ms_deform_attn

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    _patch_mmcv.ms_deform_attn = counted
    try:
        kwargs = dict(value=value, reference_points=reference_points, spatial_shapes=shapes, level_start_index=starts)
        out = layer(query, **kwargs)
        out.sum().backward()
        grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
        layer.zero_grad()
        assert calls[0] == 1
        msda.unpatch()  # mmcv's own PyTorch op again
        ref = layer(query, **kwargs)
        ref.sum().backward()
        assert calls[0] == 1
    finally:
        _patch_mmcv.ms_deform_attn = real
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for n, p in layer.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, rtol=1e-8, atol=1e-10, msg=n)


def test_other_ops_of_the_stand_in_raise_naming_the_op():
    msda.patch("mmcv")
    from mmcv.ops.nms import ext_module
    with pytest.raises(NotImplementedError, match=r"mmcv\._ext\.nms: this mmcv has no compiled ops .*"
                                                  r"provides only ms_deform_attn_forward and ms_deform_attn_backward"):
        ext_module.nms(torch.zeros(1, 4), torch.zeros(1), iou_threshold=0.5, offset=0)


def test_patch_twice_and_unpatch():
    first = msda.patch("mmcv")
    second = msda.patch("mmcv")
    assert first.frameworks["mmcv"].switched == second.frameworks["mmcv"].switched
    from mmcv.ops import multi_scale_deform_attn as m
    assert m.multi_scale_deformable_attn_pytorch is _patch_mmcv.function
    restored = msda.unpatch()
    assert restored == ["mmcv.ops.multi_scale_deform_attn.multi_scale_deformable_attn_pytorch",
                        "mmcv._ext (attribute)", "mmcv._ext"]
    assert "mmcv._ext" not in sys.modules and not hasattr(mmcv, "_ext")
    assert m.multi_scale_deformable_attn_pytorch is not _patch_mmcv.function
    assert msda.unpatch() == []


def test_code_that_differs_is_refused_and_nothing_is_switched(monkeypatch):
    msda.patch("mmcv")
    from mmcv.ops import multi_scale_deform_attn as m
    msda.unpatch()

    def changed(value, spatial_shapes, locations, weights, extra):  # a new parameter
        raise AssertionError("not to be called")

    monkeypatch.setattr(m, "multi_scale_deformable_attn_pytorch", changed)
    with pytest.raises(msda.PatchError, match=r"multi_scale_deformable_attn_pytorch takes \(value, spatial_shapes, "
                                              r"locations, weights, extra\), msda expects \(value, "
                                              r"value_spatial_shapes, sampling_locations, attention_weights\)"):
        msda.patch("mmcv")
    assert m.multi_scale_deformable_attn_pytorch is changed
    assert sys.modules.get("mmcv._ext") is None and not hasattr(mmcv, "_ext")


def test_a_switch_that_cannot_be_made_takes_back_what_the_call_switched(monkeypatch):
    """A replacement whose module cannot be imported when it is made (as mmcv's ops module is
    imported then): what the same call switched before it goes back, and the error says so."""
    from msda import _patch
    holder = types.SimpleNamespace(name=1)
    replacements = [_patch.Replacement(holder, "name", 1, 2, "holder.name"),
                    _patch.Replacement(None, "function", _patch.WHEN_SWITCHED, 3, "nowhere.function",
                                       import_owner="msda_no_such_module")]
    monkeypatch.setitem(_patch._FRAMEWORKS, "fake", ("os", "._patch_fake"))
    monkeypatch.setattr(_patch, "_adapter",
                        lambda name: lambda: (_patch.FrameworkPatch("fake", "0"), list(replacements)))
    with pytest.raises(msda.PatchError, match=r"^msda.patch: No module named 'msda_no_such_module'; nothing switched$"):
        msda.patch("fake")
    assert holder.name == 1
    assert msda.unpatch() == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_on_cuda_mmcvs_function_agrees_with_mmcvs_pytorch_op(dtype, tol):
    """mmcv's own Function on the GPU (mmcv's CUDA op has no bf16; with msda it runs), against
    mmcv's PyTorch op in f32 on the same (rounded) inputs."""
    msda.patch("mmcv")
    from mmcv.ops import multi_scale_deform_attn as m
    own = msda._patch.original(m, "multi_scale_deformable_attn_pytorch")
    value, shapes, starts, locations, weights = (t.cuda() for t in _inputs(torch.float32, n=2, heads=8, dim=32,
                                                                            shapes=((40, 50), (20, 25), (10, 13)),
                                                                            queries=300, points=4))
    value, locations, weights = (t.to(dtype) for t in (value, locations, weights))
    out, grads = _grads(lambda v, loc, w: m.MultiScaleDeformableAttnFunction.apply(v, shapes, starts, loc, w, 64),
                        value, locations, weights)
    ref, ref_grads = _grads(lambda v, loc, w: own(v, shapes, loc, w), value.float(), locations.float(),
                            weights.float())
    assert out.dtype == dtype
    scale = ref.abs().max()
    assert (out.float() - ref).abs().max() <= tol * scale
    for got, want, name in zip(grads, ref_grads, ("value", "sampling_locations", "attention_weights")):
        assert (got.float() - want).norm() <= tol * 10 * want.norm(), name
