"""dist.all_reduce timed on whichever libnccl.so.2 the process loaded, with every rank on its own
"host" (NCCL_HOSTID = h<rank>, set before the communicator is made), so the library connects
the ranks over its network transport even on one machine. Run by perf/gpu_sockets_vs_nccl.sh
under torch.distributed.run; rank 0 prints one line per size:

    size_bytes  us_per_call  algbw_GB/s  correct(0/1)

Sizes come from argv (bytes, float32, rounded down to whole elements, at least one).
"""

import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["RANK"])
    os.environ["NCCL_HOSTID"] = f"h{rank}"
    # One GPU (gpu_sockets_vs_nccl.sh under CUDA MPS): every rank on it.
    local = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    world = dist.get_world_size()
    for size in (int(s) for s in sys.argv[1:]):
        n = max(1, size // 4)
        t = torch.full((n,), float(rank + 1), device="cuda")
        dist.all_reduce(t)
        want = world * (world + 1) / 2
        ok = bool(torch.all(t == want).item())
        # About 50 ms of calls, at least 5, after a warm-up of 3.
        for _ in range(3):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        torch.cuda.synchronize()
        one = time.perf_counter() - t0
        # Every rank must run as many calls: rank 0's count for all.
        n_iters = torch.tensor([max(5, min(2000, int(0.05 / max(one, 1e-6))))], device="cuda")
        dist.broadcast(n_iters, 0)
        iters = int(n_iters.item())
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / iters * 1e6
        if rank == 0:
            print(f"{n * 4} {us:.1f} {n * 4 / us / 1e3:.2f} {int(ok)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
