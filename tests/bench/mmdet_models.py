"""mmdet's Deformable-DETR and DINO (mmdet 3.3 on mmcv-lite 2.1, mmcv without compiled ops) with
mmcv's own PyTorch MSDA and with msda.patch("mmcv"), on one GPU, in one run (issue 42): the
models built from mmdet's own configurations, random weights (nothing downloaded), batch 2 of
800x1066 images with 10 boxes each, the training loss and its backward, in f32 and under bf16
autocast; CUDA events around each step, the two paths interleaved step by step, medians. Then
the largest difference of the total loss and of every parameter's gradient (f32).

mmcv-lite has no CUDA op: without msda, mmcv.ops cannot even be imported there. "own" is
therefore mmcv's multi_scale_deformable_attn_pytorch on the GPU (grid_sample per level), the
path its layer takes where mmcv has no op for the device; an mmcv built with its CUDA op is not
timed here (none can be installed on the GPU machine).

Usage: python3 tests/bench/mmdet_models.py [--iters N] [--size HxW] [--device cuda|cpu]
(msda, mmdet and mmcv-lite importable)."""
import argparse
import os
import statistics
import time

import torch

import msda


def _build(name):
    import mmdet
    from mmengine.config import Config
    from mmdet.registry import MODELS
    configs = os.path.join(os.path.dirname(mmdet.__file__), ".mim", "configs")
    path = {"DeformableDETR": "deformable_detr/deformable-detr_r50_16xb2-50e_coco.py",
            "DINO": "dino/dino-4scale_r50_8xb2-12e_coco.py"}[name]
    cfg = Config.fromfile(os.path.join(configs, path))
    cfg.model.backbone.init_cfg = None  # no checkpoint to download
    model = MODELS.build(cfg.model)
    # the level embeddings (torch.Tensor(...)) hold whatever memory they got until init_weights
    model.init_weights()
    return model


def _focal_loss_in_pytorch():
    """mmdet's focal loss calls mmcv's compiled sigmoid_focal_loss on the GPU, which mmcv-lite
    lacks (msda's stand-in names it when called): both paths here use mmdet's own PyTorch formula
    instead (py_sigmoid_focal_loss's, on the labels made one-hot)."""
    import torch.nn.functional as F
    from mmdet.models.losses import focal_loss

    def sigmoid_focal_loss(pred, target, gamma, alpha, weight, reduction):
        assert weight is None and reduction == "none"
        t = F.one_hot(target, pred.size(1) + 1)[:, :pred.size(1)].type_as(pred)
        p = pred.sigmoid()
        factor = (alpha * t + (1 - alpha) * (1 - t)) * ((1 - p) * t + p * (1 - t)).pow(gamma)
        return F.binary_cross_entropy_with_logits(pred, t, reduction="none") * factor

    focal_loss._sigmoid_focal_loss = sigmoid_focal_loss


def _batch(size, device, batch=2, boxes=10):
    from mmengine.structures import InstanceData
    from mmdet.structures import DetDataSample
    g = torch.Generator().manual_seed(0)
    h, w = size
    images = torch.randn(batch, 3, h, w, generator=g).to(device)
    samples = []
    for _ in range(batch):
        s = DetDataSample(metainfo=dict(img_shape=(h, w), pad_shape=(h, w), batch_input_shape=(h, w),
                                        ori_shape=(h, w), scale_factor=(1.0, 1.0)))
        xy = torch.rand(boxes, 2, generator=g) * torch.tensor([w * 0.7, h * 0.7])
        wh = torch.rand(boxes, 2, generator=g) * torch.tensor([w * 0.3, h * 0.3]) + 8
        s.gt_instances = InstanceData(bboxes=torch.cat((xy, xy + wh), 1).to(device),
                                      labels=torch.randint(0, 80, (boxes,), generator=g).to(device))
        samples.append(s)
    return images, samples


def _step(model, images, samples, autocast, device):
    with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
        losses = model.loss(images, samples)
    loss = sum(v.float().sum() for k, v in losses.items() if "loss" in k and isinstance(v, torch.Tensor))
    loss.backward()
    return loss.detach()


def _switch(m, replacements, on):
    """msda (ON: its replacements in place, the layer on mmcv's Function route) or mmcv's own
    PyTorch op (the layer's route where mmcv has no op for the device)."""
    for r in replacements:
        r.put(r.new if on else r.original)
    m.IS_CUDA_AVAILABLE = on


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def _time(model, images, samples, autocast, iters, m, replacements, device):
    times = ([], [])
    for i in range(iters + 2):
        for on in (False, True):
            _switch(m, replacements, on)
            model.zero_grad(set_to_none=True)
            _sync(device)
            start = time.perf_counter()
            _step(model, images, samples, autocast, device)
            _sync(device)
            if i >= 2:  # warm-up
                times[on].append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[0]), statistics.median(times[1])


def _differences(model, images, samples, m, replacements, device):
    runs = []
    for on in (False, True):
        _switch(m, replacements, on)
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)  # DINO's denoising queries are drawn anew at each step
        loss = _step(model, images, samples, False, device)
        runs.append((loss, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (own_loss, own), (new_loss, new) = runs
    scale = max(g.norm().item() for g in own.values())
    grad = max(((new[n] - g).norm() / max(g.norm().item(), 1e-3 * scale)).item() for n, g in own.items())
    return abs(new_loss - own_loss).item() / abs(own_loss).item(), grad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--size", default="800x1066")
    p.add_argument("--device", default="cuda")
    p.add_argument("--models", default="DeformableDETR,DINO")
    a = p.parse_args()
    size = tuple(int(x) for x in a.size.split("x"))
    report = msda.patch("mmcv")
    print(report)
    from mmdet.utils import register_all_modules
    register_all_modules()
    _focal_loss_in_pytorch()
    import mmdet
    from mmcv.ops import multi_scale_deform_attn as m
    replacements = [r for r in msda._patch._active if r.what.startswith("mmcv.ops")]
    print(f"mmdet {mmdet.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if a.device == 'cuda' else 'cpu'}; batch 2 of {a.size}, loss + backward, "
          f"median of {a.iters} (ms)")
    print(f"{'model':15s} {'f32 own':>8s} {'f32 msda':>8s} {'x':>5s} {'bf16 own':>9s} {'bf16 msda':>9s} {'x':>5s} "
          f"{'loss diff':>9s} {'grad diff':>9s}")
    for name in a.models.split(","):
        torch.manual_seed(0)
        model = _build(name).to(a.device).train()
        images, samples = _batch(size, a.device)
        with torch.no_grad():  # off pixel centres, where the bilinear gradient has a kink
            for mod in model.modules():
                if hasattr(mod, "sampling_offsets"):
                    mod.sampling_offsets.weight.add_(torch.randn_like(mod.sampling_offsets.weight) * 1e-3)
        loss_diff, grad_diff = _differences(model, images, samples, m, replacements, a.device)
        f32 = _time(model, images, samples, False, a.iters, m, replacements, a.device)
        bf16 = _time(model, images, samples, True, a.iters, m, replacements, a.device)
        print(f"{name:15s} {f32[0]:8.1f} {f32[1]:8.1f} {f32[0] / f32[1]:5.2f} {bf16[0]:9.1f} {bf16[1]:9.1f} "
              f"{bf16[0] / bf16[1]:5.2f} {loss_diff:9.1e} {grad_diff:9.1e}", flush=True)
        _switch(m, replacements, True)


if __name__ == "__main__":
    main()
