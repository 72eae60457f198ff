"""Small stand-ins for the projects msda.patch("groundingdino"), ("detrex") and ("bevformer")
switch, written for these tests from reading the projects' code: the same package layout, module
names, names bound at import and parameters, with nothing else of theirs (no models, no compiled
extension). Each is written into a temporary folder put first on sys.path; `cleanup` takes the
modules and the folder away again."""
import importlib.util
import os
import sys
import textwrap
import types
from pathlib import Path
from typing import Callable, Dict, Iterator

# The op module of a project with a compiled `_C` of its own (GroundingDINO's
# models/GroundingDINO/ms_deform_attn.py, detrex's layers/multi_scale_deform_attn.py): `_C`
# imported from the package; an autograd Function calling its two functions; the PyTorch path,
# called by name from the layer for tensors not on CUDA; the layer.
_OP_MODULE = '''
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function
from torch.autograd.function import once_differentiable

{import_ext}


class MultiScaleDeformableAttnFunction(Function):
    @staticmethod
    def forward(ctx, value, value_spatial_shapes, value_level_start_index, sampling_locations,
                attention_weights, im2col_step):
        ctx.im2col_step = im2col_step
        ctx.save_for_backward(value, value_spatial_shapes, value_level_start_index, sampling_locations,
                              attention_weights)
        return _C.ms_deform_attn_forward(value, value_spatial_shapes, value_level_start_index,
                                         sampling_locations, attention_weights, ctx.im2col_step)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        value, shapes, starts, locations, weights = ctx.saved_tensors
        grad_value, grad_locations, grad_weights = _C.ms_deform_attn_backward(
            value, shapes, starts, locations, weights, grad_output, ctx.im2col_step)
        return grad_value, None, None, grad_locations, grad_weights, None


def {function}({function_params}):
    n, _, heads, dim = value.shape
    _, queries, _, levels, points, _ = sampling_locations.shape
    sizes = [int(h) * int(w) for h, w in value_spatial_shapes]
    grids = sampling_locations * 2 - 1
    per_level = []
    for level, chunk in enumerate(value.split(sizes, dim=1)):
        h, w = (int(x) for x in value_spatial_shapes[level])
        maps = chunk.permute(0, 2, 3, 1).reshape(n * heads, dim, h, w)
        grid = grids[:, :, :, level].permute(0, 2, 1, 3, 4).reshape(n * heads, queries, points, 2)
        per_level.append(F.grid_sample(maps, grid, mode="bilinear", padding_mode="zeros", align_corners=False))
    sampled = torch.stack(per_level, dim=-2).reshape(n * heads, dim, queries, levels * points)
    weights = attention_weights.permute(0, 2, 1, 3, 4).reshape(n * heads, 1, queries, levels * points)
    return (sampled * weights).sum(-1).reshape(n, heads * dim, queries).transpose(1, 2).contiguous()


class MultiScaleDeformableAttention(nn.Module):
    def __init__(self, embed_dim=256, num_heads=8, num_levels=4, num_points=4, img2col_step=64,
                 batch_first=False):
        super().__init__()
        self.im2col_step, self.batch_first = img2col_step, batch_first
        self.num_heads, self.num_levels, self.num_points = num_heads, num_levels, num_points
        self.sampling_offsets = nn.Linear(embed_dim, num_heads * num_levels * num_points * 2)
        self.attention_weights = nn.Linear(embed_dim, num_heads * num_levels * num_points)
        self.value_proj = nn.Linear(embed_dim, embed_dim)
        self.output_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, query, key=None, value=None, query_pos=None, key_padding_mask=None,
                reference_points=None, spatial_shapes=None, level_start_index=None, **kwargs):
        value = query if value is None else value
        if not self.batch_first:
            query, value = query.transpose(0, 1), value.transpose(0, 1)
        n, queries, _ = query.shape
        value = self.value_proj(value).view(n, value.shape[1], self.num_heads, -1)
        offsets = self.sampling_offsets(query).view(n, queries, self.num_heads, self.num_levels,
                                                    self.num_points, 2)
        weights = self.attention_weights(query).view(n, queries, self.num_heads, -1).softmax(-1)
        weights = weights.view(n, queries, self.num_heads, self.num_levels, self.num_points)
        normalizer = torch.stack([spatial_shapes[..., 1], spatial_shapes[..., 0]], -1)
        locations = reference_points[:, :, None, :, None, :] + offsets / normalizer[None, None, None, :, None, :]
        if torch.cuda.is_available() and value.is_cuda:
            output = MultiScaleDeformableAttnFunction.apply(value, spatial_shapes, level_start_index, locations,
                                                            weights, self.im2col_step)
        else:
            output = {function}(value, spatial_shapes, locations, weights)
        output = self.output_proj(output)
        return output if self.batch_first else output.transpose(0, 1)
'''

FUNCTION_PARAMS = "value, value_spatial_shapes, sampling_locations, attention_weights"

# GroundingDINO: any failure to import _C only warns.
GROUNDINGDINO_IMPORT = '''
try:
    from groundingdino import _C
except:  # noqa: E722 (as GroundingDINO's)
    warnings.warn("Failed to load custom C++ ops. Running on CPU mode Only!")
'''

# detrex: the layer class becomes a placeholder that raises when built (at the module's end).
DETREX_IMPORT_AT_END = '''

class _Placeholder:
    def __init__(self, *args, **kwargs):
        raise ImportError("Cannot import 'detrex._C', therefore 'MultiScaleDeformableAttention' is not available.")


try:
    from detrex import _C
except ImportError:
    MultiScaleDeformableAttention = _Placeholder  # noqa: F811
'''

# detrex's DCNv3, the other op of its _C.
DETREX_DCN = '''
from torch.autograd import Function


class DCNv3Function(Function):
    @staticmethod
    def forward(ctx, input, offset, mask, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                dilation_w, group, group_channels, offset_scale, im2col_step):
        return _C.dcnv3_forward(input, offset, mask, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                                dilation_h, dilation_w, group, group_channels, offset_scale, im2col_step)


try:
    from detrex import _C
except ImportError:
    pass
'''


def op_module(import_ext: str, function: str = "multi_scale_deformable_attn_pytorch",
              function_params: str = FUNCTION_PARAMS, at_end: str = "") -> str:
    return _OP_MODULE.format(import_ext=import_ext, function=function, function_params=function_params) + at_end


def groundingdino(pure_python: bool = False, models_import: str = "", **changes: str) -> Dict[str, str]:
    """GroundingDINO's layout; PURE_PYTHON: groundingdino-py's copy (no _C, no Function, the
    layer always on the PyTorch function); MODELS_IMPORT: a line groundingdino.models runs first
    (the real one imports transformers, torchvision and more)."""
    source = op_module(GROUNDINGDINO_IMPORT, **changes)
    if pure_python:
        start = source.index("class MultiScaleDeformableAttnFunction")
        source = source[:start] + source[source.index("def multi_scale"):]
        source = source.replace("if torch.cuda.is_available() and value.is_cuda:", "if False:")
        source = source.replace("from groundingdino import _C", "pass")
    return {
        "groundingdino/__init__.py": "__version__ = '0.1.0+fake'\n",
        "groundingdino/models/__init__.py": f"{models_import}\nfrom .GroundingDINO import ms_deform_attn\n",
        "groundingdino/models/GroundingDINO/__init__.py": "from . import ms_deform_attn\n",
        "groundingdino/models/GroundingDINO/ms_deform_attn.py": source,
    }


def detrex(**changes: str) -> Dict[str, str]:
    return {
        "detrex/__init__.py": "from detrex import layers\n",
        "detrex/version.py": "__version__ = '0.3.0+fake'\n",
        "detrex/layers/__init__.py": "from .multi_scale_deform_attn import MultiScaleDeformableAttention, "
                                     "multi_scale_deformable_attn_pytorch\nfrom .dcn_v3 import DCNv3Function\n",
        "detrex/layers/multi_scale_deform_attn.py": op_module("", at_end=DETREX_IMPORT_AT_END, **changes),
        "detrex/layers/dcn_v3.py": DETREX_DCN,
    }


# BEVFormer's Functions (projects/mmdet3d_plugin/bevformer/modules/
# multi_scale_deformable_attn_function.py): mmcv's _ext through mmcv's loader, both Functions
# adding the backward into zeros they pass.
BEVFORMER_FUNCTIONS = '''
import torch
from torch.autograd.function import Function, once_differentiable
from mmcv.utils import ext_loader

ext_module = ext_loader.load_ext('_ext', ['ms_deform_attn_backward', 'ms_deform_attn_forward'])


def _forward(ctx, value, value_spatial_shapes, value_level_start_index, sampling_locations, attention_weights,
             im2col_step):
    ctx.im2col_step = im2col_step
    ctx.save_for_backward(value, value_spatial_shapes, value_level_start_index, sampling_locations,
                          attention_weights)
    return ext_module.ms_deform_attn_forward(value, value_spatial_shapes, value_level_start_index,
                                             sampling_locations, attention_weights, im2col_step=im2col_step)


def _backward(ctx, grad_output):
    value, shapes, starts, locations, weights = ctx.saved_tensors
    grads = [torch.zeros_like(t) for t in (value, locations, weights)]
    ext_module.ms_deform_attn_backward(value, shapes, starts, locations, weights, grad_output.contiguous(), *grads,
                                       im2col_step=ctx.im2col_step)
    return grads[0], None, None, grads[1], grads[2], None


class MultiScaleDeformableAttnFunction_fp16(Function):
    @staticmethod
    def forward(ctx, {forward_params}):
        return _forward(ctx, value, value_spatial_shapes, value_level_start_index, sampling_locations,
                        attention_weights, im2col_step)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        return _backward(ctx, grad_output)


class MultiScaleDeformableAttnFunction_fp32(Function):
    @staticmethod
    def forward(ctx, value, value_spatial_shapes, value_level_start_index, sampling_locations, attention_weights,
                im2col_step):
        return _forward(ctx, value, value_spatial_shapes, value_level_start_index, sampling_locations,
                        attention_weights, im2col_step)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        return _backward(ctx, grad_output)
'''

# One of BEVFormer's attention modules: mmcv's PyTorch function under a name of its own.
BEVFORMER_ATTENTION = '''
import torch
from mmcv.ops.multi_scale_deform_attn import multi_scale_deformable_attn_pytorch
from .multi_scale_deformable_attn_function import MultiScaleDeformableAttnFunction_fp32


def attend(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
    if torch.cuda.is_available() and value.is_cuda:
        return MultiScaleDeformableAttnFunction_fp32.apply(value, spatial_shapes, level_start_index,
                                                           sampling_locations, attention_weights, 64)
    return multi_scale_deformable_attn_pytorch(value, spatial_shapes, sampling_locations, attention_weights)
'''

BEVFORMER_FORWARD_PARAMS = ("value, value_spatial_shapes, value_level_start_index, sampling_locations, "
                            "attention_weights, im2col_step")


def bevformer(forward_params: str = BEVFORMER_FORWARD_PARAMS) -> Dict[str, str]:
    modules = "projects/mmdet3d_plugin/bevformer/modules"
    files = {
        "projects/__init__.py": "",
        "projects/mmdet3d_plugin/__init__.py": "",
        "projects/mmdet3d_plugin/bevformer/__init__.py": "",
        f"{modules}/__init__.py": "",
        f"{modules}/multi_scale_deformable_attn_function.py":
            BEVFORMER_FUNCTIONS.replace("{forward_params}", forward_params),
    }
    for name in ("spatial_cross_attention", "temporal_self_attention", "decoder"):
        files[f"{modules}/{name}.py"] = BEVFORMER_ATTENTION
    return files


def write(root: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    sys.path.insert(0, str(root))
    return root


def cleanup(root: Path, *packages: str) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in packages]:
        del sys.modules[name]
    if str(root) in sys.path:
        sys.path.remove(str(root))


def projects(tmp_path: Path, package: str, layout: Callable[..., Dict[str, str]]) -> Iterator[Callable[..., Path]]:
    """A fixture's body: gives make(**changes), which writes a stand-in of PACKAGE (layout(**changes))
    into a folder of its own under TMP_PATH and returns its root; afterwards msda.unpatch() and
    every stand-in taken away again."""
    import msda

    roots = []

    def make(**changes: str) -> Path:
        assert package not in sys.modules
        root = write(tmp_path / f"p{len(roots)}", layout(**changes))
        roots.append(root)
        return root

    yield make
    msda.unpatch()
    for root in roots:
        cleanup(root, package)


def empty_package(name: str, folder: str) -> types.ModuleType:
    """The package NAME of FOLDER, its __init__ not run: a real project's module imported without
    what its packages import (detectron2, transformers' BERT, torchvision)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    return importlib.util.module_from_spec(spec)
