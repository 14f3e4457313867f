"""dist.all_reduce at the sizes DDP buckets and tensor-parallel activations use, on whichever
libnccl.so.2 the process loaded, beside PyTorch's SymmetricMemory two-shot all-reduce in the
same processes (issue 27's PyTorch bar: 1-32 MB no slower than NCCL, 8 MB no slower than
`torch.ops.symm_mem.two_shot_all_reduce_`).

    python3 -m torch.distributed.run --nproc_per_node 2 perf/torch_midsize.py [ROUNDS]

Run it once on NCCL and once with rnccl's libnccl.so.2 in LD_PRELOAD (perf/torch_midsize.sh
does both, interleaved). Rank 0 prints one line per size and round: `allreduce <bytes> <us>`
and `two_shot <bytes> <us>`, µs per call from CUDA events around back-to-back calls on float32
tensors. NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NCCL_NVLS_ENABLE=0, set here before anything is initialised).
"""

import os
import sys

os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NCCL_NVLS_ENABLE"] = "0"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

SIZES = [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20]
TWO_SHOT_SIZES = [1 << 20, 8 << 20, 32 << 20]


def timed(fn, iters, warmup=20):
    """µs per call of `fn` over `iters` back-to-back calls (after `warmup`), every rank in step."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def iters_for(nbytes):
    return 200 if nbytes <= (8 << 20) else 50


def two_shot(dev, group, nbytes):
    """A SymmetricMemory buffer of `nbytes` and a call of the two-shot all-reduce on it, or
    None (with the reason on stderr) where this PyTorch cannot make one."""
    try:
        import torch.distributed._symmetric_memory as symm_mem

        name = group.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(name)
        t = symm_mem.empty(nbytes // 4, device=dev, dtype=torch.float32)
        symm_mem.rendezvous(t, name)
        t.fill_(1.0)
        return lambda: torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", name)
    except Exception as e:  # an old PyTorch, or no peer access: report and go on
        print(f"two_shot: unavailable ({type(e).__name__}: {e})", file=sys.stderr)
        return None


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(dev)
    group = dist.group.WORLD
    tensors = {s: torch.ones(s // 4, device=dev) for s in SIZES}
    shots = {s: two_shot(dev, group, s) for s in TWO_SHOT_SIZES}
    for r in range(rounds):
        for s in SIZES:
            us = timed(lambda: dist.all_reduce(tensors[s]), iters_for(s))
            if rank == 0:
                print(f"round {r + 1} allreduce {s} {us:.2f}", flush=True)
            if shots.get(s):
                us = timed(shots[s], iters_for(s))
                if rank == 0:
                    print(f"round {r + 1} two_shot {s} {us:.2f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
