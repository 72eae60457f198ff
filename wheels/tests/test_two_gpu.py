"""Two GPUs: the op on one device while the other is current gives what it gives there alone.
libmsda launches in the calling thread's current context, so the wrapper must make the tensors'
device current for the call (and put the caller's back). Skipped with fewer than two GPUs;
tests/gpu/two-gpu.sh runs it where there are two and counts a skip as a failure."""
import pytest
import torch

import msda
from reference import make_inputs, rel_err

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                       reason="needs two GPUs"),
]

SHAPES = [(13, 17), (7, 9), (4, 5), (2, 3)]
# grad_value is summed with atomics, in another order on each run; the rest is deterministic.
TOL = {torch.float32: 1e-6, torch.float16: 5e-3, torch.bfloat16: 2e-2}


def _fwd_bwd(inputs, grad_out, current):
    value, shapes, starts, loc, w = inputs
    leaves = [t.detach().clone().requires_grad_(True) for t in (value, loc, w)]
    with torch.cuda.device(current):
        out = msda.ms_deform_attn(leaves[0], shapes, starts, leaves[1], leaves[2])
        out.backward(grad_out)
        assert torch.cuda.current_device() == current
    torch.cuda.synchronize(value.device)
    return out.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("data,current", [(1, 0), (0, 1)])
def test_op_on_one_gpu_while_the_other_is_current(dtype, data, current):
    inputs = make_inputs(SHAPES, batch=3, queries=200, heads=8, channels=32, points=4,
                         dtype=dtype, device=f"cuda:{data}", seed=95)
    grad_out = torch.randn(3, 200, 256, device=f"cuda:{data}").to(dtype)
    out, grads = _fwd_bwd(inputs, grad_out, current)
    alone, alone_grads = _fwd_bwd(inputs, grad_out, data)
    assert out.device == torch.device(f"cuda:{data}")
    assert all(g.device == out.device for g in grads)
    assert torch.equal(out, alone)
    assert torch.equal(grads[1], alone_grads[1]) and torch.equal(grads[2], alone_grads[2])
    assert rel_err(grads[0], alone_grads[0]) < TOL[dtype]
    # And the same numbers as on the first GPU.
    first = [t.to("cuda:0") for t in inputs]
    out0, grads0 = _fwd_bwd(first, grad_out.to("cuda:0"), 0)
    assert torch.equal(out.cpu(), out0.cpu())
    for g, g0 in zip(grads, grads0):
        assert rel_err(g, g0) < TOL[dtype]


def test_both_gpus_from_two_threads_at_once():
    import threading
    inputs = [make_inputs(SHAPES, batch=4, queries=300, heads=8, channels=32, points=4,
                          device=f"cuda:{d}", seed=96) for d in (0, 1)]
    expected = [msda.ms_deform_attn(*x) for x in inputs]
    got, errors = [None, None], []

    def work(d):
        try:
            with torch.cuda.device(d):
                for _ in range(20):
                    got[d] = msda.ms_deform_attn(*inputs[d])
                torch.cuda.synchronize(d)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for d in (0, 1):
        assert torch.equal(got[d], expected[d])
