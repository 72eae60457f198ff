"""mmdet's Deformable-DETR and DINO (mmdet 3.3 on mmcv-lite 2.1, mmcv without compiled ops) with
mmcv's own MSDA ("own") and with msda.patch("mmcv"), on one GPU, in one run (issue 42): the
models built from mmdet's own configurations, random weights (nothing downloaded), batch 2 of
800x1066 images with 10 boxes each, the training loss and its backward, in f32 and under bf16
autocast; CUDA events around each step, the two paths interleaved step by step, medians. Then
the largest difference of the total loss and of every parameter's gradient (f32).

Which "own" is timed:
- by default, mmcv's multi_scale_deformable_attn_pytorch on the GPU (grid_sample per level),
  the path its layer takes where mmcv has no op for the device. mmcv-lite has no CUDA op:
  without msda, mmcv.ops cannot even be imported there.
- with --mmcv-ext, mmcv's compiled CUDA op, the default path of an mmcv built with its ops: the
  layer's MultiScaleDeformableAttnFunction over mmcv._ext's ms_deform_attn_forward/backward,
  compiled from mmcv 2.1.0's own sources by tests/bench/mmcv-msda-ext/build.py (that op
  alone). The module put in place as mmcv._ext, before mmcv.ops is imported, holds those two
  functions; any other op of it raises when called, naming the op. msda.patch("mmcv") then
  switches the two functions on that module, so the two paths differ by them only. The table
  is printed only if one step on "own" called the compiled forward and backward and one step
  on msda's called neither. mmcv's op has f32, f64 and f16 kernels, no bf16: the
  half-precision columns are under f16 autocast there (mmengine's AMP default, too).

mmdet's focal loss calls mmcv's compiled sigmoid_focal_loss on the GPU, which neither mmcv-lite
nor the --mmcv-ext module has: both paths use mmdet's own PyTorch formula for it instead.

Usage: python3 tests/bench/mmdet_models.py [--iters N] [--size HxW] [--device cuda|cpu]
[--models A,B] [--autocast bf16|f16] [--mmcv-ext SO_OR_DIR] (msda, mmdet and mmcv-lite
importable; make bench-mmdet on the GPU machine)."""
import argparse
import gc
import importlib.util
import os
import statistics
import sys
import time
import types
from pathlib import Path

import torch

import msda
from step_ratios import count, median_interval, verdict

EXT = "mmcv._ext"
EXT_FUNCTIONS = ("ms_deform_attn_forward", "ms_deform_attn_backward")
HALF = {"bf16": torch.bfloat16, "f16": torch.float16}


class _MsdaOpOnly(types.ModuleType):
    """mmcv._ext made of mmcv's compiled MSDA op alone: its two functions are the compiled ones;
    any other op, which mmcv's op modules only ask to exist when imported (ext_loader.load_ext
    asserts hasattr for each), is a function that raises when called, naming the op."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def not_built(*args, **kwargs):
            raise NotImplementedError(f"{EXT}.{name}: not built; {self.__file__} holds mmcv's MSDA op only "
                                      f"({', '.join(EXT_FUNCTIONS)})")

        not_built.__name__ = name
        return not_built


def _install_compiled_ext(path):
    """Puts mmcv's compiled MSDA op (the .so tests/bench/mmcv-msda-ext/build.py wrote, or the folder
    holding it) in place as mmcv._ext, before mmcv.ops is imported: mmcv's op modules take the
    module they find under that name when imported. Returns that module and the compiled one."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.so"))
        if len(found) != 1:
            sys.exit(f"mmdet_models: {path} holds {len(found)} .so files, expected the one build.py writes")
        path = found[0]
    import mmcv
    if "mmcv.ops" in sys.modules or EXT in sys.modules:
        sys.exit(f"mmdet_models: mmcv.ops or {EXT} was imported before --mmcv-ext's module could be put in place")
    if importlib.util.find_spec(EXT) is not None:
        sys.exit(f"mmdet_models: this mmcv has compiled ops of its own ({EXT}): run without --mmcv-ext")
    spec = importlib.util.spec_from_file_location(path.name.split(".")[0], path)
    compiled = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compiled)
    ext = _MsdaOpOnly(EXT, f"mmcv's MSDA op alone, compiled from mmcv's sources: {path}")
    ext.__file__ = str(path)
    for name in EXT_FUNCTIONS:
        setattr(ext, name, getattr(compiled, name))
    sys.modules[EXT] = ext
    mmcv._ext = ext
    return ext, compiled


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
    lacks (msda's stand-in names it when called), as does --mmcv-ext's module: both paths here
    use mmdet's own PyTorch formula instead (py_sigmoid_focal_loss's, on the labels made
    one-hot)."""
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
    """One training step; AUTOCAST: None (f32) or the dtype of the autocast region."""
    with torch.autocast(device, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        losses = model.loss(images, samples)
    loss = sum(v.float().sum() for k, v in losses.items() if "loss" in k and isinstance(v, torch.Tensor))
    loss.backward()
    return loss.detach()


class _Routes:
    """The two paths, switched on one model between steps: msda's (its replacements in place, the
    layer on mmcv's Function route) or mmcv's own. That is its PyTorch op (the layer's route
    where mmcv has no op for the device) or, when OWN_COMPILED, the Function route onto mmcv's
    compiled op: REPLACEMENTS are then mmcv._ext's two functions, their originals the compiled
    ones."""

    def __init__(self, m, replacements, own_compiled):
        self.m, self.replacements, self.own_compiled = m, replacements, own_compiled

    def use(self, on):
        for r in self.replacements:
            r.put(r.new if on else r.original)
        self.m.IS_CUDA_AVAILABLE = on or self.own_compiled


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def _time(model, images, samples, autocast, iters, routes, device):
    """Medians (own, msda) of a step, and the 95 % interval of the median step-by-step ratio
    own / msda: the paths interleaved step by step, the garbage collected before each step,
    outside the timing, as tests/bench/frameworks.py does."""
    times = ([], [])
    for i in range(iters + 2):
        for on in (False, True):
            routes.use(on)
            model.zero_grad(set_to_none=True)
            gc.collect()
            _sync(device)
            start = time.perf_counter()
            _step(model, images, samples, autocast, device)
            _sync(device)
            if i >= 2:  # warm-up
                times[on].append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[0]), statistics.median(times[1]), \
        median_interval([own / new for own, new in zip(*times)])


def _differences(model, images, samples, routes, device):
    runs = []
    for on in (False, True):
        routes.use(on)
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)  # DINO's denoising queries are drawn anew at each step
        loss = _step(model, images, samples, None, device)
        runs.append((loss, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (own_loss, own), (new_loss, new) = runs
    scale = max(g.norm().item() for g in own.values())
    grad = max(((new[n] - g).norm() / max(g.norm().item(), 1e-3 * scale)).item() for n, g in own.items())
    return abs(new_loss - own_loss).item() / abs(own_loss).item(), grad


def _counted(function, calls, name):
    """FUNCTION, counting its calls in CALLS[NAME]."""
    def call(*args, **kwargs):
        calls[name] += 1
        return function(*args, **kwargs)
    return call


def _ext_calls(model, images, samples, routes, ext, compiled, device):
    """What one f32 step calls through mmcv._ext's two functions on each path: {False: own's,
    True: msda's}, each {function name: (calls, whether the function called is the compiled one)}."""
    found = {}
    for on in (False, True):
        routes.use(on)
        current = {name: getattr(ext, name) for name in EXT_FUNCTIONS}
        calls = dict.fromkeys(EXT_FUNCTIONS, 0)
        for name in EXT_FUNCTIONS:
            setattr(ext, name, _counted(current[name], calls, name))
        try:
            model.zero_grad(set_to_none=True)
            _step(model, images, samples, None, device)
        finally:
            for name in EXT_FUNCTIONS:
                setattr(ext, name, current[name])
        found[on] = {name: (calls[name], current[name] is getattr(compiled, name)) for name in EXT_FUNCTIONS}
    return found


def _ext_replacements(ext, compiled):
    """msda.patch's replacements of the compiled functions on --mmcv-ext's module; exits unless
    it switched exactly those two, there."""
    found = [r for r in msda._patch._active if r.what.startswith(EXT + ".")]
    if sorted(r.name for r in found) != sorted(EXT_FUNCTIONS) or \
            any(r.owner is not ext or r.original is not getattr(compiled, r.name) for r in found):
        sys.exit(f"mmdet_models: msda.patch('mmcv') did not switch {' and '.join(EXT_FUNCTIONS)} on "
                 f"--mmcv-ext's module ({', '.join(r.what for r in msda._patch._active)})")
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=count(1), default=15)
    p.add_argument("--size", default="800x1066")
    p.add_argument("--device", default="cuda")
    p.add_argument("--models", default="DeformableDETR,DINO")
    p.add_argument("--autocast", choices=sorted(HALF),
                   help="the half precision of the second pair of columns (default bf16; f16 with --mmcv-ext)")
    p.add_argument("--mmcv-ext", metavar="SO_OR_DIR",
                   help="own = mmcv's compiled CUDA op, built by tests/bench/mmcv-msda-ext/build.py")
    a = p.parse_args()
    size = tuple(int(x) for x in a.size.split("x"))
    half = a.autocast or ("f16" if a.mmcv_ext else "bf16")
    if a.mmcv_ext and a.device != "cuda":
        sys.exit("mmdet_models: --mmcv-ext times mmcv's CUDA op: --device cuda")
    if a.mmcv_ext and half == "bf16":
        sys.exit("mmdet_models: mmcv's compiled op has no bf16 kernel (f32, f64, f16): --autocast f16")
    ext = compiled = None
    if a.mmcv_ext:
        ext, compiled = _install_compiled_ext(a.mmcv_ext)
    report = msda.patch("mmcv")
    print(report)
    from mmdet.utils import register_all_modules
    register_all_modules()
    _focal_loss_in_pytorch()
    import mmdet
    from mmcv.ops import multi_scale_deform_attn as m
    if ext is None:
        routes = _Routes(m, [r for r in msda._patch._active if r.what.startswith("mmcv.ops")], own_compiled=False)
        own = "own"
    else:
        routes = _Routes(m, _ext_replacements(ext, compiled), own_compiled=True)
        own = "mmcv-cu"
        print(f"{own}: mmcv's compiled CUDA op, MultiScaleDeformableAttnFunction over {EXT} from {ext.__file__}; "
              f"calls: {own}'s calls into it in one f32 step, forward/backward (msda's: none, checked)")
    full, low_own = max(8, len(f"f32 {own}")), max(9, len(f"{half} {own}"))
    print(f"mmdet {mmdet.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if a.device == 'cuda' else 'cpu'}; batch 2 of {a.size}, loss + backward, "
          f"median of {a.iters} (ms)")
    header = (f"{'model':15s} {'f32 ' + own:>{full}s} {'f32 msda':>8s} {'x':>5s} {'95%':>9s} "
              f"{half + ' ' + own:>{low_own}s} {half + ' msda':>9s} {'x':>5s} {'95%':>9s} {'loss diff':>9s} "
              f"{'grad diff':>9s}")
    if ext is None:
        print(header)
    else:  # printed once the first model's steps are seen to take the routes it names
        header += f" {'calls':>7s}"
    for name in a.models.split(","):
        torch.manual_seed(0)
        model = _build(name).to(a.device).train()
        images, samples = _batch(size, a.device)
        with torch.no_grad():  # off pixel centres, where the bilinear gradient has a kink
            for mod in model.modules():
                if hasattr(mod, "sampling_offsets"):
                    mod.sampling_offsets.weight.add_(torch.randn_like(mod.sampling_offsets.weight) * 1e-3)
        calls = ""
        if ext is not None:
            seen = _ext_calls(model, images, samples, routes, ext, compiled, a.device)
            if not all(n and is_compiled for n, is_compiled in seen[False].values()) or \
                    not all(n and not is_compiled for n, is_compiled in seen[True].values()):
                sys.exit(f"mmdet_models: {name}: one f32 step's calls through {EXT} (calls, compiled), own: "
                         f"{seen[False]}, msda: {seen[True]}; own must call the compiled op and msda must "
                         f"not: stopped")
            calls = " " + f"{seen[False][EXT_FUNCTIONS[0]][0]}/{seen[False][EXT_FUNCTIONS[1]][0]}".rjust(7)
            if header:
                print(header)
                header = None
        loss_diff, grad_diff = _differences(model, images, samples, routes, a.device)
        f32 = _time(model, images, samples, None, a.iters, routes, a.device)
        low = _time(model, images, samples, HALF[half], a.iters, routes, a.device)
        print(f"{name:15s} {f32[0]:{full}.1f} {f32[1]:8.1f} {f32[0] / f32[1]:5.2f} {f32[2][0]:4.2f}-{f32[2][1]:4.2f} "
              f"{low[0]:{low_own}.1f} {low[1]:9.1f} {low[0] / low[1]:5.2f} {low[2][0]:4.2f}-{low[2][1]:4.2f} "
              f"{loss_diff:9.1e} {grad_diff:9.1e}{calls}", flush=True)
        for precision, t in (("f32", f32), (half, low)):
            if verdict(t[2]) != "faster":
                print(f"  {name} {precision}: msda {verdict(t[2])} (the median ratio's 95 % interval "
                      f"{t[2][0]:.2f}-{t[2][1]:.2f})", flush=True)
        routes.use(True)


if __name__ == "__main__":
    main()
