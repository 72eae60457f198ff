"""msda.patch("mmcv") under mmdet's real models (mmdet 3.3 on mmcv-lite 2.1, pinned in
tests/tests.mk; make check-mmdet): Deformable-DETR and DINO built from mmdet's own configuration
files, random weights (nothing downloaded), the training loss and its backward on a small random
batch on the CPU, first on mmcv's own PyTorch op (the layer's path for CPU tensors), then with
msda.patch("mmcv"): the losses and every parameter's gradient agree in f64, msda's op ran once per
attention layer, and after msda.unpatch() the model is on mmcv's op again. (Without the patch,
mmdet's models cannot even be imported on mmcv-lite: they import mmcv.ops, which test_patch_mmcv
finds failing for want of mmcv._ext.)

Skipped where mmdet cannot be imported (make check-python: mmcv-lite 2.2, which mmdet 3.3
refuses). At mmcv's initialisation the sampling points fall on pixel centres, where the bilinear
gradient has a kink and two correct implementations differ: the sampling-offset weights are
perturbed before comparing."""
import os
import sys

import pytest
import torch

import msda
from msda import _patch, _patch_mmcv

try:
    import mmdet
except (ImportError, AssertionError) as e:  # mmdet asserts, when imported, the mmcv releases it supports
    pytest.skip(f"mmdet is not importable here ({type(e).__name__}: {e}); make check-mmdet installs it with "
                "the mmcv it needs", allow_module_level=True)

pytestmark = pytest.mark.usefixtures("unpatched")

CONFIGS = {"DeformableDETR": "deformable_detr/deformable-detr_r50_16xb2-50e_coco.py",
           "DINO": "dino/dino-4scale_r50_8xb2-12e_coco.py"}
# mmdet's two configurations: 6 encoder layers and 6 decoder layers, each with one MSDA
ATTENTION_LAYERS = 12
HEIGHT, WIDTH = 128, 160


@pytest.fixture(scope="module")
def registered():
    """mmdet's modules imported and registered. They import mmcv.ops, which mmcv-lite cannot
    import without an mmcv._ext: msda's, in place while they are imported. msda.unpatch() then
    takes it away again; the modules keep what they imported."""
    msda.patch("mmcv")
    try:
        from mmdet.utils import register_all_modules
        register_all_modules()
    finally:
        msda.unpatch()


@pytest.fixture
def f64():
    """f64 throughout: the models in f64 (.double()), and so the tensors mmdet makes without a
    dtype (DINO's denoising queries: f32 otherwise, which DINO's index_put refuses)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def build(name):
    from mmengine.config import Config
    from mmdet.registry import MODELS
    cfg = Config.fromfile(os.path.join(os.path.dirname(mmdet.__file__), ".mim", "configs", CONFIGS[name]))
    cfg.model.backbone.init_cfg = None  # no pretrained ResNet to download
    # ResNet-18 rather than 50, for a short step on the CPU: its stages 2 to 4 are 128, 256 and 512 wide
    cfg.model.backbone.depth = 18
    cfg.model.neck.in_channels = [128, 256, 512]
    # 100 queries rather than 300 (Deformable-DETR) and 900 (DINO): a shorter step, and DINO takes
    # its queries as the top-k of the encoder's tokens, of which a 128x160 image has 426
    cfg.model.num_queries = 100
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    # mmengine leaves parameters made with torch.Tensor(...) (the level embeddings) as the memory
    # held before, until init_weights: NaN now and then (DINO's boxes came out all NaN once)
    model.init_weights()
    model = model.double().train()
    with torch.no_grad():  # off pixel centres
        for module in model.modules():
            if hasattr(module, "sampling_offsets"):
                module.sampling_offsets.weight.add_(torch.randn_like(module.sampling_offsets.weight) * 1e-3)
    return model


def batch(images=2, boxes=3):
    from mmengine.structures import InstanceData
    from mmdet.structures import DetDataSample
    g = torch.Generator().manual_seed(0)
    pixels = torch.randn(images, 3, HEIGHT, WIDTH, generator=g)
    samples = []
    for _ in range(images):
        sample = DetDataSample(metainfo=dict(img_shape=(HEIGHT, WIDTH), pad_shape=(HEIGHT, WIDTH),
                                             batch_input_shape=(HEIGHT, WIDTH), ori_shape=(HEIGHT, WIDTH),
                                             scale_factor=(1.0, 1.0)))
        corner = torch.rand(boxes, 2, generator=g) * torch.tensor([WIDTH * 0.7, HEIGHT * 0.7])
        size = torch.rand(boxes, 2, generator=g) * torch.tensor([WIDTH * 0.3, HEIGHT * 0.3]) + 8
        sample.gt_instances = InstanceData(bboxes=torch.cat((corner, corner + size), 1),
                                           labels=torch.randint(0, 80, (boxes,), generator=g))
        samples.append(sample)
    return pixels, samples


def total_loss(model, pixels, samples):
    torch.manual_seed(0)  # the same dropout masks, and DINO's same denoising queries, on each path
    losses = model.loss(pixels, samples)
    return sum(v.sum() for k, v in losses.items() if "loss" in k and isinstance(v, torch.Tensor))


def loss_and_gradients(model, pixels, samples):
    model.zero_grad(set_to_none=True)
    loss = total_loss(model, pixels, samples)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("name", CONFIGS)
def test_the_models_loss_and_every_gradient_agree_with_mmcvs_own_op(name, registered, f64, monkeypatch):
    from mmcv.ops import multi_scale_deform_attn as m
    own_op = m.multi_scale_deformable_attn_pytorch
    assert own_op is _patch.original(m, _patch_mmcv.FUNCTION)  # the fixture's unpatch gave mmcv's back
    calls = []
    monkeypatch.setattr(_patch_mmcv, "ms_deform_attn",
                        lambda *a, _real=_patch_mmcv.ms_deform_attn: calls.append(1) or _real(*a))
    model = build(name)
    assert sum(isinstance(x, m.MultiScaleDeformableAttention) for x in model.modules()) == ATTENTION_LAYERS
    pixels, samples = batch()

    own_loss, own = loss_and_gradients(model, pixels, samples)
    assert calls == []
    assert own_loss.dtype == torch.float64
    assert all(g is not None for g in own.values()), [n for n, g in own.items() if g is None]

    report = msda.patch("mmcv")
    assert report.frameworks["mmcv"].version == sys.modules["mmcv"].__version__
    loss, grads = loss_and_gradients(model, pixels, samples)
    assert len(calls) == ATTENTION_LAYERS
    torch.testing.assert_close(loss, own_loss, rtol=1e-12, atol=0)
    assert grads.keys() == own.keys()
    scale = max(g.abs().max().item() for g in own.values())
    for n, want in own.items():
        torch.testing.assert_close(grads[n], want, rtol=1e-9, atol=1e-11 * scale, msg=n)

    msda.unpatch()
    assert m.multi_scale_deformable_attn_pytorch is own_op
    with torch.no_grad():
        again = total_loss(model, pixels, samples)
    assert len(calls) == ATTENTION_LAYERS  # mmcv's op again, msda's not called
    torch.testing.assert_close(again, own_loss, rtol=1e-12, atol=0)

