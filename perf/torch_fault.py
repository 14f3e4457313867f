"""PyTorch's fault-tolerance paths on whichever libnccl.so.2 the process loaded (issue 30's
acceptance), one scenario per run, started by perf/torch_fault.sh with NCCL and with rnccl
preloaded. Every rank appends one JSON line to OUT saying how it ended.

    python3 -m torch.distributed.run --nproc_per_node N perf/torch_fault.py SCENARIO OUT

Scenarios:
  death   the last rank SIGKILLs itself at step 20 of an all_reduce loop (4 MiB); the survivors'
          watchdog (TORCH_NCCL_ASYNC_ERROR_HANDLING=1, 10 s timeout) must end their collectives
          with a DistBackendError and no library error on the abort path.
  shrink  the last rank SIGKILLs itself at step 20; the survivors (no watchdog teardown:
          TORCH_NCCL_ASYNC_ERROR_HANDLING=0) see their collective time out in Work.wait(5 s),
          call dist.shrink_group on the dead rank with SHRINK_ABORT (1) and run 20 more
          all_reduce steps on the shrunk group, checking every result.
          (PyTorch 2.11 aborts the communicator of a Work.wait that timed out, on NCCL as on
          rnccl, so the shrink of the aborted parent fails on both: kept to show they agree.)
  train   DDP training (a small MLP, 20 steps) on every rank; then the last rank SIGKILLs itself
          between steps, after telling the store its pid (the failure detector torchft-style
          recovery has); the survivors wait until that process is dead, call dist.shrink_group
          on it (SHRINK_ABORT) and train 20 more steps with DDP over the shrunk group. Each
          survivor reports its last loss, so NCCL's and rnccl's runs can be compared.
  exclude the last rank leaves on purpose after step 20 (no death): the others shrink it out
          with SHRINK_DEFAULT (0) and go on.
  stuck   the last rank never enters step 20's all_reduce (it sleeps); the others' watchdog
          aborts the stuck collective within the timeout (ok: it ended within 30 s, however).
Ranks are started by hand (perf/torch_fault.sh), not by torchrun, which would tear every rank
down as soon as one dies.
NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NCCL_NVLS_ENABLE=0 from the
caller).
"""

import datetime
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

STEPS = 20
ELEMS = 1 << 20  # 4 MiB of float32


def report(path, **fields):
    with open(path, "a") as f:
        f.write(json.dumps(fields) + "\n")


def steps(rank, world, dev, group, first, count, die_at=None, wait=None):
    """All-reduces of step-dependent tensors; checks each result. With `wait` (seconds), each
    all-reduce is waited for with Work.wait(timeout), which raises when it does not finish.
    Returns the steps done."""
    n = dist.get_world_size(group)
    for i in range(first, first + count):
        if die_at is not None and i == die_at:
            torch.cuda.synchronize()
            os.kill(os.getpid(), signal.SIGKILL)
        t = torch.full((ELEMS,), float(i + 1), device=dev)
        work = dist.all_reduce(t, group=group, async_op=True)
        if wait is None:
            work.wait()
        elif not work.wait(timeout=datetime.timedelta(seconds=wait)):
            raise RuntimeError(f"step {i}: all_reduce did not finish in {wait} s")
        torch.cuda.synchronize()
        want = float((i + 1) * n)
        if t[0].item() != want or t[-1].item() != want:
            raise RuntimeError(f"step {i}: got {t[0].item()}, want {want}")
    return count


def train(dev, group, first, count):
    """`count` DDP steps of a fixed MLP (seeded, step-dependent inputs) over `group`; the last loss."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to(dev)
    ddp = DDP(model, device_ids=[dev], process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss = None
    for i in range(first, first + count):
        g = torch.Generator(device=dev).manual_seed(1000 * i + dist.get_rank(group))
        x = torch.randn(64, 256, device=dev, generator=g)
        opt.zero_grad()
        loss = (ddp(x) - x).pow(2).mean()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return float(loss)


def wait_gone(pid, seconds):
    """Waits until process `pid` is dead (gone, or a zombie its parent has not reaped)."""
    end = time.time() + seconds
    while time.time() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    raise RuntimeError(f"process {pid} still runs after {seconds} s")


def main():
    scenario, out = sys.argv[1], sys.argv[2]
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    last = world - 1
    # Shrink scenarios wait 5 s for the collective the dead rank misses: the watchdog's
    # timeout (30 s there) must not abort the parent first.
    pg_timeout = 30 if scenario in ("shrink", "exclude", "train") else 10
    dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(seconds=pg_timeout))
    t0 = time.time()
    try:
        if scenario == "death":
            done = steps(rank, world, dev, None, 0, 2 * STEPS, die_at=STEPS if rank == last else None)
            report(out, rank=rank, scenario=scenario, ok=False, why=f"finished {done} steps after a death")
        elif scenario == "stuck":
            if rank == last:
                steps(rank, world, dev, None, 0, STEPS)
                time.sleep(25)  # never enters step STEPS's all_reduce
                report(out, rank=rank, scenario=scenario, ok=True, why="stalled")
                os._exit(0)
            steps(rank, world, dev, None, 0, STEPS)
            t1 = time.time()
            try:
                steps(rank, world, dev, None, STEPS, 1)
                outcome = "returned a wrong result"
            except Exception as e:
                outcome = f"raised {repr(e)[:120]}"
            took = time.time() - t1
            report(out, rank=rank, scenario=scenario, ok=took < 30,
                   why=f"the stuck all_reduce ended after {took:.1f} s ({outcome})", seconds=round(took, 1))
        elif scenario == "train":
            store = dist.distributed_c10d._get_default_store()
            before = train(dev, None, 0, STEPS)
            if rank == last:
                store.set("dead", str(os.getpid()))
                torch.cuda.synchronize()
                os.kill(os.getpid(), signal.SIGKILL)
            store.wait(["dead"], datetime.timedelta(seconds=30))
            wait_gone(int(store.get("dead")), 30)
            new = dist.shrink_group([last], shrink_flags=1)
            after = train(dev, new, STEPS, STEPS)
            report(out, rank=rank, scenario=scenario, ok=after == after,
                   why=f"{STEPS} DDP steps on the shrunk group, loss {before:.6f} before the death, {after:.6f} after",
                   seconds=round(time.time() - t0, 1))
        elif scenario in ("shrink", "exclude"):
            died = False
            try:
                steps(rank, world, dev, None, 0, STEPS)
                if scenario == "shrink":
                    steps(rank, world, dev, None, STEPS, 1, die_at=STEPS if rank == last else None, wait=5)
            except Exception as e:  # the peer died: the watchdog or the collective says so
                died = True
                report(out, rank=rank, scenario=scenario, phase="failure", why=repr(e)[:400],
                       seconds=round(time.time() - t0, 1))
            if rank == last:  # excluded on purpose: leave without another collective
                report(out, rank=rank, scenario=scenario, ok=True, why="left")
                os._exit(0)
            flags = 1 if died else 0  # NCCL_SHRINK_ABORT after a death
            new = dist.shrink_group([last], shrink_flags=flags) if hasattr(dist, "shrink_group") else None
            if new is None:
                raise RuntimeError("this PyTorch has no dist.shrink_group")
            done = steps(rank, world, dev, new, STEPS + 1, STEPS)
            report(out, rank=rank, scenario=scenario, ok=done == STEPS, why=f"{done} steps on the shrunk group",
                   seconds=round(time.time() - t0, 1))
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    except Exception as e:
        ok = scenario in ("death", "stuck") and rank != last
        report(out, rank=rank, scenario=scenario, ok=ok, why=repr(e)[:400], seconds=round(time.time() - t0, 1))
    try:
        dist.destroy_process_group()
    except Exception as e:
        report(out, rank=rank, scenario=scenario, phase="destroy", why=repr(e)[:400])
    os._exit(0)


if __name__ == "__main__":
    main()
