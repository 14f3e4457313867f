"""PyTorch collectives on buffers its allocator registered with ncclCommRegister
(TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1, set by the caller): all_reduce,
reduce_scatter_tensor and all_gather_into_tensor from 1 MB to 32 MB, every result checked
exactly (small integers in float32), each size ROUNDS times; prints one line per collective
and size with the best microseconds per call, and "torch_registered: ok" at the end (exit 1
on a wrong element).

    TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 LD_PRELOAD=.../libnccl.so.2 \
        python3 -m torch.distributed.run --nproc_per_node 2 perf/torch_registered.py

Ranks beyond the GPUs share them (rank r on GPU r mod count: a one-GPU host runs both ranks
on GPU 0, which rnccl allows and NCCL refuses), so timings there are not NVLink's.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

ROUNDS = int(os.environ.get("ROUNDS", "5"))


def timed(fn, iters=10):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    bad = 0
    for mb in (1, 2, 4, 8, 16, 32):
        n = mb * (1 << 20) // 4
        n -= n % world
        # Values: rank + 1 + (i mod 7), so every sum is exact in float32.
        base = (torch.arange(n, device=dev, dtype=torch.float32) % 7) + (rank + 1)
        want_sum = (torch.arange(n, device=dev, dtype=torch.float32) % 7) * world + world * (world + 1) / 2
        ar = base.clone()
        rs_out = torch.empty(n // world, device=dev)
        ag_out = torch.empty(n * world, device=dev)
        best = {"all_reduce": float("inf"), "reduce_scatter": float("inf"), "all_gather": float("inf")}
        for _ in range(ROUNDS):
            ar.copy_(base)
            best["all_reduce"] = min(best["all_reduce"], timed(lambda: dist.all_reduce(ar), 1))
            # One call checked: the buffer now holds the sum.
            bad += int((ar != want_sum).sum().item())
            best["reduce_scatter"] = min(
                best["reduce_scatter"], timed(lambda: dist.reduce_scatter_tensor(rs_out, base), 1)
            )
            shard = want_sum[rank * (n // world):(rank + 1) * (n // world)]
            bad += int((rs_out != shard).sum().item())
            best["all_gather"] = min(
                best["all_gather"], timed(lambda: dist.all_gather_into_tensor(ag_out, base), 1)
            )
            for r in range(world):
                piece = ag_out[r * n:(r + 1) * n]
                bad += int((piece != (torch.arange(n, device=dev, dtype=torch.float32) % 7) + (r + 1)).sum().item())
        if rank == 0:
            for k, v in best.items():
                print(f"{k:>15} {mb:>3} MB {v:>10.1f} us", flush=True)
    total = torch.tensor([bad], device=dev)
    dist.all_reduce(total)
    dist.destroy_process_group()
    if rank == 0:
        print("torch_registered: ok" if total.item() == 0 else f"torch_registered: {int(total.item())} wrong elements")
    sys.exit(0 if total.item() == 0 else 1)


if __name__ == "__main__":
    main()
