"""PyTorch on whichever libnccl.so.2 the process loaded: the collectives PyTorch users call,
a DDP training run and one FSDP2 step, results written as JSON for perf/capi_acceptance.sh to
compare between NCCL and rnccl (LD_PRELOAD of rnccl's libnccl.so.2).

    python3 -m torch.distributed.run --nproc_per_node 2 perf/torch_check.py OUT.json

Every rank writes OUT.json with its rank inserted before the extension. NVLink multicast
stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NCCL_NVLS_ENABLE=0 from the caller).
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist


def collectives(rank, world, dev):
    """Each collective of the acceptance list on small deterministic tensors; returns
    name -> list of floats (this rank's result)."""
    out = {}
    base = torch.arange(1, 1025, device=dev, dtype=torch.float32) * (rank + 1)
    for dtype in (torch.float32, torch.bfloat16):
        for op_name, op in (("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("max", dist.ReduceOp.MAX)):
            t = base.to(dtype).clone()
            dist.all_reduce(t, op=op)
            out[f"all_reduce_{op_name}_{dtype}"] = t.float().tolist()
    g = torch.empty(world * base.numel(), device=dev)
    dist.all_gather_into_tensor(g, base)
    out["all_gather_into_tensor"] = g.tolist()
    rs = torch.empty(base.numel() // world, device=dev)
    dist.reduce_scatter_tensor(rs, base)
    out["reduce_scatter_tensor"] = rs.tolist()
    b = base.clone()
    dist.broadcast(b, src=world - 1)
    out["broadcast"] = b.tolist()
    a2a = torch.empty_like(base)
    dist.all_to_all_single(a2a, base)
    out["all_to_all_single"] = a2a.tolist()
    if world > 1:  # PyTorch refuses a send to oneself
        peer = (rank + 1) % world
        recv = torch.empty_like(base)
        if rank % 2 == 0:
            dist.send(base, dst=peer)
            dist.recv(recv, src=(rank - 1) % world)
        else:
            dist.recv(recv, src=(rank - 1) % world)
            dist.send(base, dst=peer)
        out["send_recv"] = recv.tolist()
    dist.barrier()
    sub = dist.new_group(list(range(world)))
    s = base.clone()
    dist.all_reduce(s, group=sub)
    out["new_group_all_reduce"] = s.tolist()
    return out


def ddp(rank, dev, steps=200):
    """200 SGD steps of a 1024-4096-4096-10 MLP under DDP, batch 256, fixed seed: the losses
    and the wall time of the steps (after one warm-up step)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 10),
    ).to(dev)
    model = DDP(model, device_ids=[dev.index])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator(device=dev).manual_seed(1234 + rank)
    batches = [(torch.randn(256, 1024, device=dev, generator=gen),
                torch.randint(0, 10, (256,), device=dev, generator=gen)) for _ in range(steps + 1)]
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    for i, (x, y) in enumerate(batches):
        if i == 1:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    return losses[1:], time.perf_counter() - t0


def fsdp2_step(dev):
    """One forward/backward/step of a small MLP under FSDP2 (fully_shard): its loss."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 512, device=dev, generator=torch.Generator(device=dev).manual_seed(7))
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss.item()


def main():
    path = sys.argv[1]
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    result = {"rank": rank, "collectives": collectives(rank, world, dev)}
    result["ddp_losses"], result["ddp_seconds"] = ddp(rank, dev)
    result["fsdp2_loss"] = fsdp2_step(dev)
    dist.destroy_process_group()
    stem, ext = os.path.splitext(path)
    with open(f"{stem}.rank{rank}{ext}", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
