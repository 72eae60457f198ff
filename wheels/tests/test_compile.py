"""torch.compile traces the op as one custom-op node (fullgraph: no graph break), forward and
backward, with the shapes given by its fake implementation."""
import pytest
import torch

import msda
from msda import _torch_ops
from reference import make_inputs, ms_deform_attn_reference, rel_err

pytestmark = [
    pytest.mark.compile,
    pytest.mark.skipif(not _torch_ops.HAS_CUSTOM_OP,
                       reason="torch without torch.library.custom_op (before 2.4)"),
]

SHAPES = [(4, 5), (2, 3)]


def _layer(value, shapes, starts, loc, w):
    # Work around the op, so that the graph holds more than the op alone.
    out = msda.ms_deform_attn(value * 2, shapes, starts, loc.clamp(-0.2, 1.2), w)
    return torch.tanh(out)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_forward_and_backward(backend):
    torch._dynamo.reset()
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=70)
    compiled = torch.compile(_layer, backend=backend, fullgraph=True)
    got = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    out = compiled(got[0], shapes, starts, got[1], got[2])
    out.sum().backward()
    ref = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    ref_out = torch.tanh(ms_deform_attn_reference(ref[0] * 2, SHAPES,
                                                  ref[1].clamp(-0.2, 1.2), ref[2]))
    ref_out.sum().backward()
    assert rel_err(out, ref_out) < 1e-5
    for g, r in zip(got, ref):
        assert rel_err(g.grad, r.grad) < 1e-5


def test_compiled_module_with_new_batch_size():
    torch._dynamo.reset()
    m = msda.MSDeformAttn(d_model=16, n_levels=2, n_heads=2, n_points=2)
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    shapes = torch.tensor(SHAPES)
    starts = torch.tensor([0, 20])
    for batch in (2, 3):  # the second compiles with a symbolic batch
        query = torch.randn(batch, 6, 16)
        reference = torch.rand(batch, 6, 2, 2)
        flat = torch.randn(batch, 26, 16)
        out = compiled(query, reference, flat, shapes, starts)
        assert out.shape == (batch, 6, 16)
        assert rel_err(out, m(query, reference, flat, shapes, starts)) < 1e-6


def test_bad_shapes_fail_while_tracing():
    torch._dynamo.reset()
    value, shapes, starts, loc, w = make_inputs(SHAPES, seed=71)
    compiled = torch.compile(_layer, backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match="attention_weights has shape"):
        compiled(value, shapes, starts, loc, w[..., :1])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compile_cuda_with_the_table_on_the_gpu(mode):
    # reduce-overhead records CUDA graphs of forward and backward: possible only because no
    # call copies the level table to the host. Several steps: warm-up, recording, replays.
    torch._dynamo.reset()
    shapes = torch.tensor(SHAPES, device="cuda")
    starts = torch.tensor([0, 20], device="cuda")
    compiled = torch.compile(_layer, mode=mode, fullgraph=True)
    for step in range(4):
        torch.compiler.cudagraph_mark_step_begin()
        value, _, _, loc, w = make_inputs(SHAPES, device="cuda", seed=80 + step)
        got = [t.clone().requires_grad_(True) for t in (value, loc, w)]
        out = compiled(got[0], shapes, starts, got[1], got[2])
        out.sum().backward()
        out = out.detach().clone()
        ref = [t.clone().requires_grad_(True) for t in (value, loc, w)]
        ref_out = _layer(ref[0], shapes, starts, ref[1], ref[2])
        ref_out.sum().backward()
        assert rel_err(out, ref_out) < 1e-5, step
        for g, r in zip(got, ref):
            assert rel_err(g.grad, r.grad) < 1e-5, step


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_compile_cuda_mixed_precision_fullgraph():
    # autocast-style inputs: f16 value, f32 locations and weights, through the compiled graph.
    torch._dynamo.reset()
    value, shapes, starts, loc, w = make_inputs(SHAPES, device="cuda", seed=90)
    value = value.half()
    compiled = torch.compile(_layer, fullgraph=True)
    got = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    out = compiled(got[0], shapes, starts, got[1], got[2])
    out.float().sum().backward()
    ref = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    ref_out = _layer(ref[0], shapes, starts, ref[1], ref[2])
    ref_out.float().sum().backward()
    assert out.dtype == torch.float16 and got[1].grad.dtype == torch.float32
    assert rel_err(out, ref_out) < 1e-3
    for g, r in zip(got, ref):
        assert g.grad.dtype == r.grad.dtype and rel_err(g.grad, r.grad) < 1e-3


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_compiled_cuda_backward_follows_deterministic_algorithms(deterministic_algorithms):
    # The compiled backward calls the custom op msda::ms_deform_attn_backward, which sums
    # grad_value exactly under the setting: the eager deterministic bits, on every run.
    torch._dynamo.reset()
    value, shapes, starts, loc, w = make_inputs(SHAPES, queries=500, device="cuda", seed=95)
    compiled = torch.compile(_layer, backend="aot_eager", fullgraph=True)
    deterministic_algorithms(True)
    runs = []
    for _ in range(2):
        got = [t.clone().requires_grad_(True) for t in (value, loc, w)]
        compiled(got[0], shapes, starts, got[1], got[2]).sum().backward()
        runs.append(got)
    ref = [t.clone().requires_grad_(True) for t in (value, loc, w)]
    _layer(ref[0], shapes, starts, ref[1], ref[2]).sum().backward()
    for a, b, r in zip(runs[0], runs[1], ref):
        assert torch.equal(a.grad, b.grad) and torch.equal(a.grad, r.grad)
