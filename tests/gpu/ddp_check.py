"""Data-parallel training step with msda.MSDeformAttn over NCCL, one process per GPU:
    torchrun --standalone --nproc_per_node=N tests/gpu/ddp_check.py
Every rank builds the same layer (seeded) and the same global batch, runs forward and backward on
its own slice under DistributedDataParallel, whose all-reduce averages the parameter gradients.
Rank 0 then runs the whole batch through a copy of the layer on one GPU: N times the averaged
gradients must equal its gradients, and the gathered outputs its output. Prints one line per
check and "N passed, M failed" (rank 0); exits 1 on a failure."""
import copy
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import msda

SHAPES = [(16, 20), (8, 10), (4, 5), (2, 3)]
D_MODEL, HEADS, POINTS, PER_RANK, QUERIES = 64, 4, 4, 2, 120


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)

    torch.manual_seed(0)
    layer = msda.MSDeformAttn(d_model=D_MODEL, n_levels=len(SHAPES), n_heads=HEADS, n_points=POINTS)
    with torch.no_grad():  # offsets and weights that depend on the query
        layer.sampling_offsets.weight.normal_(0, 0.05)
        layer.attention_weights.weight.normal_(0, 0.1)
    single = copy.deepcopy(layer)
    S = sum(h * w for h, w in SHAPES)
    batch = PER_RANK * world
    g = torch.Generator().manual_seed(1)
    query = torch.randn(batch, QUERIES, D_MODEL, generator=g)
    ref = torch.rand(batch, QUERIES, len(SHAPES), 2, generator=g)
    src = torch.randn(batch, S, D_MODEL, generator=g)
    gout = torch.randn(batch, QUERIES, D_MODEL, generator=g)
    shapes = torch.tensor(SHAPES)
    starts = torch.cat([shapes.new_zeros(1), shapes.prod(1).cumsum(0)[:-1]])

    ddp = DistributedDataParallel(layer.to(dev), device_ids=[local])
    mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    out = ddp(query[mine].to(dev), ref[mine].to(dev), src[mine].to(dev), shapes.to(dev), starts.to(dev))
    (out * gout[mine].to(dev)).sum().backward()
    outs = [torch.empty_like(out) for _ in range(world)]
    dist.all_gather(outs, out.detach().contiguous())
    torch.cuda.synchronize()

    failed = 0
    if rank == 0:
        single = single.to(dev)
        whole = single(query.to(dev), ref.to(dev), src.to(dev), shapes.to(dev), starts.to(dev))
        (whole * gout.to(dev)).sum().backward()
        checks = [(f"gathered outputs of {world} GPUs = one GPU's output", rel(torch.cat(outs), whole), 1e-6)]
        for (name, p), q in zip(ddp.module.named_parameters(), single.parameters()):
            checks.append((f"{world} x all-reduced mean gradient of {name} = one GPU's", rel(p.grad * world, q.grad), 1e-5))
        for what, err, tol in checks:
            ok = err < tol
            failed += not ok
            print(f"{what:<72} {err:9.2e}  {'PASS' if ok else 'FAIL'}", flush=True)
        print(f"{len(checks) - failed} passed, {failed} failed", flush=True)
    flag = torch.tensor([failed], device=dev)
    dist.broadcast(flag, 0)
    dist.destroy_process_group()
    sys.exit(1 if flag.item() else 0)


if __name__ == "__main__":
    main()
