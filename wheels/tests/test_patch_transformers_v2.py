"""msda.patch("transformers") for the models that call multi_scale_deformable_attention_v2: RT-DETR
v2 (by name, from its module) and D-FINE (and DEIMv2, in transformers 5), whose attention layers
keep the function in `ms_deformable_attn_core` from __init__. Small random-initialised models
built before the patch, run on transformers' own code and on msda: the same outputs and parameter
gradients, a point count per level and "discrete" included; the function's level tables cached;
code that differs refused with nothing switched; unpatch restoring."""
import pytest
import torch

import msda
from msda import _level_table_cache, _patch_transformers

transformers = pytest.importorskip("transformers")
from test_patch_transformers import _agrees_on_cuda, _compare, _perturb_offsets, _rel, calls  # noqa: E402,F401

pytestmark = pytest.mark.usefixtures("unpatched")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _rt_detr_v2(method="default", head=False):
    cfg = transformers.RTDetrV2Config(
        backbone_config=transformers.RTDetrResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1],
            out_features=["stage2", "stage3", "stage4"], out_indices=[2, 3, 4]),
        encoder_in_channels=[16, 24, 32], d_model=32, encoder_hidden_dim=32, encoder_ffn_dim=32, decoder_ffn_dim=32,
        decoder_layers=2, num_queries=10, decoder_in_channels=[32, 32, 32], decoder_attention_heads=4,
        encoder_attention_heads=4, hidden_expansion=0.5, decoder_n_points=4, decoder_method=method, num_labels=3)
    torch.manual_seed(0)
    model = (transformers.RTDetrV2ForObjectDetection if head else transformers.RTDetrV2Model)(cfg)
    _perturb_offsets(model)
    return model, {"pixel_values": torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))}


def _d_fine(points, method="default"):
    backbone = transformers.HGNetV2Config(
        stem_channels=[3, 8, 8], stage_in_channels=[8, 16, 24, 32], stage_mid_channels=[8, 8, 16, 16],
        stage_out_channels=[16, 24, 32, 32], stage_num_blocks=[1, 1, 1, 1],
        stage_downsample=[False, True, True, True], stage_light_block=[False, False, True, True],
        stage_kernel_size=[3, 3, 5, 5], stage_numb_of_layers=[1, 1, 1, 1], hidden_sizes=[16, 24, 32, 32],
        out_features=["stage2", "stage3", "stage4"], out_indices=[2, 3, 4])
    cfg = transformers.DFineConfig(
        backbone_config=backbone, encoder_in_channels=[24, 32, 32], d_model=32, encoder_hidden_dim=32,
        encoder_ffn_dim=32, decoder_ffn_dim=32, decoder_layers=2, num_queries=10, decoder_in_channels=[32, 32, 32],
        decoder_attention_heads=4, encoder_attention_heads=4, hidden_expansion=0.5, decoder_n_points=points,
        decoder_method=method, num_denoising=0)
    torch.manual_seed(0)
    model = transformers.DFineModel(cfg)
    _perturb_offsets(model)
    return model, {"pixel_values": torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))}


def _d_fine_layers(model):
    from transformers.models.d_fine import modeling_d_fine as m
    return [x for x in model.modules() if isinstance(x, m.DFineMultiscaleDeformableAttention)]


@pytest.mark.parametrize("method", ["default", "discrete"])
def test_rt_detr_v2_built_before_the_patch_agrees_in_both_methods(method, calls):
    model, inputs = _rt_detr_v2(method, head=True)
    _compare(model, inputs)
    assert calls[0] == 2  # one per decoder layer


@pytest.mark.parametrize("method", ["default", "discrete"])
@pytest.mark.parametrize("points", [4, [3, 6, 3]], ids=str)
def test_d_fine_built_before_the_patch_agrees_with_a_point_count_per_level(points, method, calls):
    model, inputs = _d_fine(points, method)
    layers = _d_fine_layers(model)
    assert layers and all(x.num_points_list == ([points] * 3 if isinstance(points, int) else points) for x in layers)
    _compare(model, inputs)
    assert calls[0] == len(layers)
    assert all(x.ms_deformable_attn_core.__wrapped__ is not None for x in layers)  # msda's, while patched


def test_d_fine_layers_switch_back_on_unpatch_and_keep_what_a_user_set(calls):
    from transformers.models.d_fine import modeling_d_fine as m
    own = m.multi_scale_deformable_attention_v2
    model, inputs = _d_fine([3, 6, 3])
    mine = _d_fine_layers(model)[0]
    report = msda.patch("transformers")
    switched = report.frameworks["transformers"].switched
    assert any(s.startswith("transformers.models.d_fine.modeling_d_fine.multi_scale_deformable_attention_v2")
               for s in switched)
    assert any(s.startswith("transformers.models.d_fine.modeling_d_fine.DFineMultiscaleDeformableAttention."
                            "ms_deformable_attn_core") for s in switched)
    assert m.multi_scale_deformable_attention_v2 is not own
    assert all(x.ms_deformable_attn_core is m.multi_scale_deformable_attention_v2 for x in _d_fine_layers(model))
    later = _d_fine([3, 6, 3])[0]  # built while patched: the same
    assert _d_fine_layers(later)[0].ms_deformable_attn_core is m.multi_scale_deformable_attention_v2

    def users(*args):
        return own(*args)

    mine.ms_deformable_attn_core = users  # a layer given a function of its own keeps it
    assert mine.ms_deformable_attn_core is users
    with torch.no_grad():
        model(**inputs)
    assert calls[0] == len(_d_fine_layers(model)) - 1
    restored = msda.unpatch()
    assert "transformers.models.d_fine.modeling_d_fine.DFineMultiscaleDeformableAttention.ms_deformable_attn_core" \
        in restored
    assert m.multi_scale_deformable_attention_v2 is own
    assert "ms_deformable_attn_core" not in vars(m.DFineMultiscaleDeformableAttention)
    assert all(x.ms_deformable_attn_core is own for x in _d_fine_layers(model)[1:]) and mine.ms_deformable_attn_core is users
    before = calls[0]
    with torch.no_grad():
        model(**inputs)
    assert calls[0] == before


def test_the_function_takes_a_list_of_sizes_without_a_new_table_per_call(calls, monkeypatch):
    from transformers.models.rt_detr_v2 import modeling_rt_detr_v2 as m
    own = m.multi_scale_deformable_attention_v2
    msda.patch("transformers")
    seen = []
    monkeypatch.setattr(_patch_transformers, "ms_deform_attn_points_per_level",
                        lambda *a: seen.append(a) or msda.ms_deform_attn_points_per_level(*a))
    g = torch.Generator().manual_seed(2)
    shapes = [(6, 5), (3, 3)]
    value = torch.randn(2, 39, 2, 4, generator=g, dtype=torch.float64)
    for points, method in (([2, 3], "default"), ([2, 3], "discrete"), ([2, 2], "default")):
        loc = torch.rand(2, 5, 2, sum(points), 2, generator=g, dtype=torch.float64) * 1.2 - 0.1
        w = torch.rand(2, 5, 2, sum(points), generator=g, dtype=torch.float64)
        got = m.multi_scale_deformable_attention_v2(value, shapes, loc, w, points, method)
        assert _rel(got, own(value, shapes, loc, w, points, method)) < 1e-13
    assert calls[0] == 3 and all(a[1] is shapes and a[2] is None for a in seen)
    table = _level_table_cache.level_tables(shapes)
    assert _level_table_cache.level_tables([list(s) for s in shapes]) is table
    # a method msda does not know goes to transformers' own code, as it is
    with pytest.raises(Exception) as theirs:
        own(value, shapes, loc, w, [2, 2], "nearest")
    with pytest.raises(type(theirs.value)):
        m.multi_scale_deformable_attention_v2(value, shapes, loc, w, [2, 2], "nearest")
    assert calls[0] == 3


def test_a_v2_function_that_differs_is_refused_and_nothing_is_switched(monkeypatch):
    from transformers.models.d_fine import modeling_d_fine as dfine
    from transformers.models.rt_detr_v2 import modeling_rt_detr_v2 as rtv2
    own = rtv2.multi_scale_deformable_attention_v2

    def changed(value, value_spatial_shapes, sampling_locations, attention_weights, num_points_list):
        raise AssertionError("not to be called")  # no method parameter

    monkeypatch.setattr(dfine, "multi_scale_deformable_attention_v2", changed)
    with pytest.raises(msda.PatchError, match=r"modeling_d_fine\.multi_scale_deformable_attention_v2 takes \(value, "
                                              r"value_spatial_shapes, sampling_locations, attention_weights, "
                                              r"num_points_list\), msda expects \(value, value_spatial_shapes, "
                                              r"sampling_locations, attention_weights, num_points_list, method\)"):
        msda.patch("transformers")
    assert rtv2.multi_scale_deformable_attention_v2 is own
    assert dfine.multi_scale_deformable_attention_v2 is changed
    assert "ms_deformable_attn_core" not in vars(dfine.DFineMultiscaleDeformableAttention)


def test_a_layer_class_holding_the_function_itself_is_refused(monkeypatch):
    from transformers.models.d_fine import modeling_d_fine as dfine
    from transformers.models.rt_detr_v2 import modeling_rt_detr_v2 as rtv2
    own = rtv2.multi_scale_deformable_attention_v2
    monkeypatch.setattr(dfine.DFineMultiscaleDeformableAttention, "ms_deformable_attn_core",
                        staticmethod(dfine.multi_scale_deformable_attention_v2), raising=False)
    with pytest.raises(msda.PatchError, match=r"DFineMultiscaleDeformableAttention\.ms_deformable_attn_core is "
                                              r"defined on the class; msda expects it set on each layer in __init__"):
        msda.patch("transformers")
    assert rtv2.multi_scale_deformable_attention_v2 is own


def test_deimv2_is_switched_where_transformers_has_it():
    pytest.importorskip("transformers.models.deimv2.modeling_deimv2")
    switched = msda.patch("transformers").frameworks["transformers"].switched
    assert any(s.startswith("transformers.models.deimv2.modeling_deimv2.multi_scale_deformable_attention_v2")
               for s in switched)
    assert any(s.startswith("transformers.models.deimv2.modeling_deimv2.Deimv2MultiscaleDeformableAttention."
                            "ms_deformable_attn_core") for s in switched)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("method", ["default", "discrete"])
def test_on_cuda_d_fine_agrees_in_f32_and_under_bf16_autocast(method, calls):
    """D-FINE with a point count per level on the GPU: f32 against transformers' own path, and
    under bf16 autocast msda's 16-bit kernels against its own path, as close as bf16 allows."""
    model, inputs = _d_fine([3, 6, 3], method)
    _agrees_on_cuda(model, inputs, calls)
