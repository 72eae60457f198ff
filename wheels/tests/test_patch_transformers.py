"""msda.patch("transformers") against transformers' real models: small random-initialised
configurations (nothing downloaded), run with the framework's own path and with msda, outputs
and every parameter's gradient compared; models built before the patch switched too; unpatch
restores; a transformers whose code differs is refused with nothing switched.

At transformers' own initialisation the sampling points fall on pixel centres, where the
bilinear gradient has a kink, so two correct implementations differ there: the sampling-offset
weights are perturbed before comparing."""
import os

import pytest
import torch

import msda
from msda import _patch_transformers, _points_per_level

transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("unpatched")


@pytest.fixture
def calls(monkeypatch):
    """How many times the patched code ran msda's op (ms_deform_attn, or ms_deform_attn_points under
    ms_deform_attn_points_per_level)."""
    count = [0]

    def counting(op):
        def count_and_call(*args, **kwargs):
            count[0] += 1
            return op(*args, **kwargs)
        return count_and_call

    monkeypatch.setattr(_patch_transformers, "ms_deform_attn", counting(_patch_transformers.ms_deform_attn))
    monkeypatch.setattr(_points_per_level, "ms_deform_attn_points",
                        counting(_points_per_level.ms_deform_attn_points))
    return count


def _perturb_offsets(model, seed=7):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "sampling_offsets" in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)


def _run(model, inputs):
    """The output tensors and every parameter's gradient of sum(outputs * fixed weights), with
    dropout off (eval)."""
    model.eval()
    model.zero_grad(set_to_none=True)
    out = model(**inputs)
    tensors = [t for t in (out.values() if hasattr(out, "values") else out)
               if isinstance(t, torch.Tensor) and t.is_floating_point()]
    g = torch.Generator().manual_seed(3)
    loss = sum((t * torch.randn(t.shape, generator=g)).sum() for t in tensors)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return [t.detach() for t in tensors], grads


def _rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def _compare(model, inputs, tol=1e-6):
    """The model built with transformers' own op, run, then patched and run again: the same
    outputs and gradients. In f64, where both are exact to about 1e-15: a parameter whose true
    gradient is zero (a bias before a normalisation) then has 1e-13 of noise in each, not the
    1e-4 of f32, and every parameter is compared against the largest gradients' size."""
    model = model.double()
    inputs = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    own_out, own_grads = _run(model, inputs)
    report = msda.patch("transformers")
    assert report.frameworks["transformers"].version == transformers.__version__
    msda_out, msda_grads = _run(model, inputs)
    assert len(own_out) == len(msda_out) and own_out
    for a, b in zip(msda_out, own_out):
        assert _rel(a, b) < tol
    assert own_grads.keys() == msda_grads.keys()
    scale = max(g.norm().item() for g in own_grads.values())
    for name, own in own_grads.items():
        assert (msda_grads[name] - own).norm().item() <= tol * max(own.norm().item(), 1e-3 * scale), name


def _resnet(**kw):
    return transformers.ResNetConfig(num_channels=3, embeddings_size=8, hidden_sizes=[8, 16, 24, 32],
                                     depths=[1, 1, 1, 1], hidden_act="relu",
                                     out_features=["stage2", "stage3", "stage4"], out_indices=[2, 3, 4], **kw)


def _deformable_detr():
    cfg = transformers.DeformableDetrConfig(
        backbone_config=_resnet(), backbone=None, use_timm_backbone=False, use_pretrained_backbone=False, d_model=32,
        encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=10, num_feature_levels=4)
    torch.manual_seed(0)
    model = transformers.DeformableDetrModel(cfg)
    _perturb_offsets(model)
    return model, {"pixel_values": torch.randn(2, 3, 64, 80, generator=torch.Generator().manual_seed(1))}


def test_deformable_detr_built_before_the_patch_gives_the_same_outputs_and_gradients(calls):
    model, inputs = _deformable_detr()
    _compare(model, inputs)
    assert calls[0] == 2  # the encoder layer's deformable attention and the decoder layer's


def test_rt_detr_v2_with_one_point_count_runs_on_msda_and_agrees(calls):
    cfg = transformers.RTDetrV2Config(
        backbone_config=transformers.RTDetrResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1], out_features=["stage2", "stage3", "stage4"],
            out_indices=[2, 3, 4]),
        encoder_in_channels=[16, 24, 32], d_model=32, encoder_hidden_dim=32, encoder_ffn_dim=32,
        decoder_ffn_dim=32, decoder_layers=1, num_queries=10, decoder_in_channels=[32, 32, 32], decoder_attention_heads=4, encoder_attention_heads=4,
        hidden_expansion=0.5, decoder_n_points=4)
    torch.manual_seed(0)
    model = transformers.RTDetrV2Model(cfg)
    _perturb_offsets(model)
    _compare(model, {"pixel_values": torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))})
    assert calls[0] >= 1


def test_mask2former_function_with_a_list_of_sizes_makes_its_level_table_once(calls):
    from transformers.models.mask2former import modeling_mask2former as m
    from msda import _level_table_cache
    own = m.multi_scale_deformable_attention
    msda.patch("transformers")
    g = torch.Generator().manual_seed(4)
    shapes = [(7, 6), (4, 3), (2, 2)]
    value = torch.randn(2, 58, 4, 8, generator=g, requires_grad=True)
    loc = torch.rand(2, 9, 4, 3, 4, 2, generator=g, requires_grad=True)
    w = torch.rand(2, 9, 4, 3, 4, generator=g, requires_grad=True)
    got = m.multi_scale_deformable_attention(value, shapes, loc, w)
    want = own(value, shapes, loc, w)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    g_out = torch.randn(got.shape, generator=g)
    for a, b in zip(torch.autograd.grad(got, (value, loc, w), g_out), torch.autograd.grad(want, (value, loc, w), g_out)):
        assert _rel(a, b) < 1e-4
    table = _level_table_cache.level_tables(shapes)
    assert table[0].tolist() == [list(s) for s in shapes] and table[1].tolist() == [0, 42, 54]
    m.multi_scale_deformable_attention(value, [list(s) for s in shapes], loc, w)
    assert _level_table_cache.level_tables(tuple(shapes))[0] is table[0]
    assert calls[0] == 2


def test_new_models_patch_twice_and_unpatch(calls):
    from transformers.models.deformable_detr import modeling_deformable_detr as m
    own = m.MultiScaleDeformableAttention.forward
    first = msda.patch("transformers")
    second = msda.patch()  # every importable framework: transformers here; nothing wrapped twice
    assert m.MultiScaleDeformableAttention.forward is _patch_transformers.class_forward
    assert first.frameworks["transformers"].switched == second.frameworks["transformers"].switched
    assert any(s.endswith("deformable_detr.MultiScaleDeformableAttention.forward")
               for s in first.frameworks["transformers"].switched)
    assert "transformers" in str(first)
    model, inputs = _deformable_detr()  # built after the patch
    model(**inputs)
    assert calls[0] == 2
    restored = msda.unpatch()
    assert m.MultiScaleDeformableAttention.forward is own
    assert "transformers.models.deformable_detr.modeling_deformable_detr.MultiScaleDeformableAttention.forward" in restored
    assert msda.unpatch() == []
    model(**inputs)
    assert calls[0] == 2


def test_code_that_differs_is_refused_and_nothing_is_switched(monkeypatch):
    from transformers.models.deformable_detr import modeling_deformable_detr as ddetr
    from transformers.models.mask2former import modeling_mask2former as m2f
    own = ddetr.MultiScaleDeformableAttention.forward

    def changed(value, spatial_shapes, locations, weights, extra):  # a new parameter
        raise AssertionError("not to be called")

    monkeypatch.setattr(m2f, "multi_scale_deformable_attention", changed)
    with pytest.raises(msda.PatchError, match=r"modeling_mask2former\.multi_scale_deformable_attention takes "
                                              r"\(value, spatial_shapes, locations, weights, extra\), msda "
                                              r"expects \(value, value_spatial_shapes, sampling_locations, "
                                              r"attention_weights\)") as info:
        msda.patch("transformers")
    assert "nothing switched" in str(info.value)
    assert ddetr.MultiScaleDeformableAttention.forward is own
    assert m2f.multi_scale_deformable_attention is changed


def test_unknown_and_missing_frameworks_are_named(monkeypatch):
    with pytest.raises(msda.PatchError, match=r"unknown framework 'tensorflow'; it knows 'transformers'"):
        msda.patch("tensorflow")
    with pytest.raises(msda.PatchError, match=r"unknown framework"):
        msda.patch("transformers", "tensorflow")  # checked before anything is switched
    from transformers.models.deformable_detr import modeling_deformable_detr as m
    assert m.MultiScaleDeformableAttention.forward is not _patch_transformers.class_forward
    # where transformers is not installed: named, it is an error; unnamed, nothing to switch
    from msda import _patch
    monkeypatch.setattr(_patch, "_importable", lambda module: False)
    with pytest.raises(msda.PatchError, match=r"^msda.patch: transformers is not importable here "
                                              r"\(pip install transformers\)$"):
        msda.patch("transformers")
    report = msda.patch()
    assert report.frameworks == {} and str(report) == "msda.patch: no framework to switch is importable here"
    assert m.MultiScaleDeformableAttention.forward is not _patch_transformers.class_forward


def test_the_kernels_package_maps_transformers_layer_to_msda(calls):
    """msda.kernels_repository() in a kernels.use_kernel_mapping: kernelize puts msda's layer in
    place of transformers' MultiScaleDeformableAttention (its forward signature checked by the
    package), training included; the same outputs. transformers turns its class into a kernels
    layer only with the kernels releases it lists (5.24: 0.18), which PyPI here may not have: the
    test makes the layer with the kernels package's own decorator, as transformers does."""
    kernels = pytest.importorskip("kernels")  # not beside transformers 4.57's huggingface_hub
    from transformers.models.deformable_detr import modeling_deformable_detr as m
    layer = kernels.use_kernel_forward_from_hub("MultiScaleDeformableAttention")(
        type("MultiScaleDeformableAttention", (m.MultiScaleDeformableAttention,), {}))
    holder = torch.nn.Sequential()
    holder.attn = layer()
    g = torch.Generator().manual_seed(5)
    shapes = [(6, 5), (3, 3)]
    args = (torch.randn(2, 39, 2, 4, dtype=torch.float64, generator=g), torch.tensor(shapes), shapes,
            torch.tensor([0, 30]), torch.rand(2, 7, 2, 2, 3, 2, dtype=torch.float64, generator=g),
            torch.rand(2, 7, 2, 2, 3, dtype=torch.float64, generator=g), 64)
    want = holder.attn(*args)
    assert calls[0] == 0
    repo = msda.kernels_repository()
    assert repo == msda.kernels_repository() and hash(repo) == hash(msda.kernels_repository())
    assert repo.layer_name == "MultiScaleDeformableAttention" and "msda" in str(repo)
    with kernels.use_kernel_mapping({"MultiScaleDeformableAttention": {"cpu": repo}}, inherit_mapping=False):
        kernels.kernelize(holder, device="cpu", mode=kernels.Mode.TRAINING)
    value = args[0].clone().requires_grad_()
    got = holder.attn(value, *args[1:])
    assert calls[0] == 1
    assert _rel(got.detach(), want) < 1e-12
    got.sum().backward()  # has_backward: the op's own
    assert value.grad is not None and torch.isfinite(value.grad).all()


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("model_of", ["deformable_detr", "rt_detr_v2"])
def test_on_cuda_the_same_outputs_and_gradients_in_f32_and_close_under_bf16_autocast(model_of, calls):
    """The same comparisons on the GPU: f32 against transformers' own path (the GPU's sums in
    another order: 1e-4), and under bf16 autocast msda's 16-bit kernels against its own
    path's f32 grid_sample, as close as bf16 allows."""
    if model_of == "deformable_detr":
        model, inputs = _deformable_detr()
    else:
        cfg = transformers.RTDetrV2Config(
            backbone_config=transformers.RTDetrResNetConfig(
                embedding_size=8, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1],
                out_features=["stage2", "stage3", "stage4"], out_indices=[2, 3, 4]),
            encoder_in_channels=[16, 24, 32], d_model=32, encoder_hidden_dim=32, encoder_ffn_dim=32,
            decoder_ffn_dim=32, decoder_layers=1, num_queries=10, decoder_in_channels=[32, 32, 32],
            decoder_attention_heads=4, encoder_attention_heads=4, hidden_expansion=0.5, decoder_n_points=4)
        torch.manual_seed(0)
        model = transformers.RTDetrV2Model(cfg)
        _perturb_offsets(model)
        inputs = {"pixel_values": torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))}
    _agrees_on_cuda(model, inputs, calls)


def _agrees_on_cuda(model, inputs, calls):
    """MODEL on the GPU, without msda.patch and with it: the same output and parameter gradients
    in f32 (1e-4: the GPU's sums in another order), and as close as bf16 allows under bf16
    autocast; each patched run calls msda."""
    model = model.cuda().eval()
    inputs = {k: v.cuda() for k, v in inputs.items()}

    def run(autocast):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            out = model(**inputs).last_hidden_state
        out.float().square().sum().backward()
        return out.detach().float(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    for autocast, tol in ((False, 1e-4), (True, 3e-2)):
        msda.unpatch()
        own_out, own_grads = run(autocast)
        msda.patch("transformers")
        before = calls[0]
        new_out, new_grads = run(autocast)
        assert calls[0] > before
        assert _rel(new_out, own_out) < tol
        assert own_grads.keys() == new_grads.keys()
        scale = max(g.norm().item() for g in own_grads.values())
        for name, own in own_grads.items():
            assert (new_grads[name] - own).norm().item() <= tol * max(own.norm().item(), 1e-2 * scale), name
