#!/usr/bin/env bash
# PyTorch dist.all_reduce from 1 MB to 32 MB on NCCL and on rnccl (LD_PRELOAD of rnccl's
# libnccl.so.2), interleaved for ROUNDS rounds (default 2), with SymmetricMemory's two-shot
# all-reduce timed in the same processes (perf/torch_midsize.py); the last lines are the table
# issue 27's PyTorch bar reads: per size the best µs per call of each, the ratio rnccl ÷ NCCL
# (time: ≤ 1.0 is the bar) and, where timed, the two-shot's best in rnccl's processes.
#
# REGISTER=1 runs both with TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 (PyTorch registers
# its allocator's segments with ncclCommRegister: rnccl's registered kernel).
#
#   on the device machine: GPUS=2 perf/torch_midsize.sh   (carry .devbin; needs .devbin/libnccl.so)
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
gpus=${GPUS:-2}
rounds=${ROUNDS:-2}
[ -f .devbin/libnccl.so ] || { echo "torch_midsize.sh: .devbin/libnccl.so is missing: run perf/gpu_build.sh" >&2; exit 2; }
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp .devbin/libnccl.so "$work/libnccl.so.2"
for r in $(seq "$rounds"); do
  for who in nccl rnccl; do
    pre=(env TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK="${REGISTER:-0}")
    [ $who = rnccl ] && pre+=(LD_PRELOAD="$work/libnccl.so.2")
    if ! "${pre[@]}" timeout 300 python3 -m torch.distributed.run --nproc_per_node "$gpus" \
      perf/torch_midsize.py 1 >"$work/$who.$r.log" 2>&1; then
      echo "== $who, round $r failed:"; tail -15 "$work/$who.$r.log"; exit 1
    fi
    grep -E '^round ' "$work/$who.$r.log" | sed "s/^round 1/$who round $r/"
    grep -h 'two_shot: unavailable' "$work/$who.$r.log" | head -1 || true
  done
done | tee "$work/all"
python3 - "$work/all" <<'PY'
import sys, collections
best = collections.defaultdict(lambda: float("inf"))
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 6 and f[1] == "round":
        who, kind, size, us = f[0], f[3], int(f[4]), float(f[5])
        key = (who, kind, size)
        best[key] = min(best[key], us)
sizes = sorted({k[2] for k in best if k[1] == "allreduce"})
print(f"{'size':>10} {'NCCL us':>9} {'rnccl us':>9} {'rnccl/NCCL':>10} {'two-shot us':>12} {'rnccl/two-shot':>14}  (best of the rounds)")
for s in sizes:
    n, r = best[("nccl", "allreduce", s)], best[("rnccl", "allreduce", s)]
    t = best.get(("rnccl", "two_shot", s))
    ts = f"{t:>12.2f} {r / t:>14.2f}" if t else f"{'-':>12} {'-':>14}"
    print(f"{s:>10} {n:>9.2f} {r:>9.2f} {r / n:>10.2f} {ts}")
PY
