#!/usr/bin/env bash
# rnccl's mid-size all-reduce against the device's own copy bandwidth, on a machine of one GPU:
# N ranks (RANKS, default 2) share GPU 0, so every "peer" store and load goes to the same HBM
# and L2, and the kernel's time can be set beside a plain device-to-device copy moving the same
# bytes (issue 27: on one GPU, the kernel's own efficiency). NCCL refuses two ranks on one GPU,
# so the anchor here is the copy, timed in the same run (PyTorch's `copy_` on uint8 tensors).
#
# MODE picks the kernel: `group` (default) has one thread drive every rank (`-g N`), so the
# ranks' buffers are one group's and the symmetric kernel (kernels/symmetric.cuh) loads and
# stores the peers' buffers in place; `threads` gives each rank its own thread (`--threads
# -g 1`), as one process per GPU does, and the direct kernel (kernels/direct.cuh) moves the
# bytes through its slots. Either way every rank reads its input and writes its output once
# (n S bytes each way over n ranks, out of place; the direct kernel's slots, a few MB per rank
# reused round after round, stay in L2), so the copy beside it moves n S bytes, and "ratio" is
# the kernel's time over that copy's: 1.0 is the memory floor, above it time the kernel spends
# on something other than moving the buffers' bytes (launch, flag hops, phases that do not
# overlap, slot traffic). Both are timed as 20 operations in a row: the copies captured into
# one CUDA graph (a host call per copy costs more than a small copy), the all-reduces as
# `rnccl bench` launches them (EXTRA="-G 1" captures them too; perf/op_spans.sh says how much
# of a 20-operation graph's time is its launch). Sizes the LL kernel takes (512 KiB and below)
# read against the same copy, for comparison only.
#
# One H200, 2026-12-04 (main 3eb7520), MODE=group EXTRA="-G 1", 1/2/4/8/16/32/64 MB: copy
# 1.71/2.34/3.36/5.50/17.4/33.5/64.5 µs, rnccl 12.1/12.7/13.8/16.5/29.3/47.8/85.5 (ratio
# 7.1/5.4/4.1/3.0/1.68/1.42/1.33): an intercept of about 8.4 µs over 1.19 µs per MB.
#
#   here:  perf/gpu_build.sh
#   there: perf/gpu_copy_efficiency.sh [bench size flags…]        (carry .devbin)
#          e.g. ROUNDS=3 MODE=threads VARIANTS="NCCL_MAX_NCHANNELS=32" perf/gpu_copy_efficiency.sh
#
# Knobs: MODE (group), ROUNDS (2), RANKS (2), EXTRA (more bench flags for every run, e.g.
# "-G 1"), VARIANTS (more rnccl runs per round, each one environment assignment,
# space-separated; each gets its own column), RUN_LIMIT (seconds per run, 180).
# Prints per size the medians over rounds: the copy's µs (best of 5 graph replays in a round),
# each run's out-of-place µs and its ratio to the copy.
set -uo pipefail
cd "$(dirname "$0")/.."
sizes=${*:-"-b 1M -e 64M -f 2"}
export NCCL_NVLS_ENABLE=0
out=${OUT:-gpu-copy-eff-out}
mkdir -p "$out"
rounds=${ROUNDS:-2}
ranks=${RANKS:-2}
limit=${RUN_LIMIT:-180}
case ${MODE:-group} in
  group) launch="-g $ranks --ranks $ranks" ;;
  threads) launch="-g 1 --ranks $ranks --threads" ;;
  *) echo "perf/gpu_copy_efficiency.sh: MODE is group or threads, not $MODE" >&2; exit 2 ;;
esac
read -r -a variants <<<"default ${VARIANTS:-}"
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
for r in $(seq 1 "$rounds"); do
  for i in "${!variants[@]}"; do
    assign=()
    [ "${variants[$i]}" = default ] || assign=("${variants[$i]}")
    env "${assign[@]}" timeout "$limit" .devbin/rnccl bench all_reduce $launch -n 20 -w 5 -c 0 ${EXTRA:-} $sizes \
      >"$out/run$i.$r.log" 2>&1
    echo "round $r ${variants[$i]}: rc $?"
  done
  python3 - "$out/copy.$r.log" "$ranks" $(awk '!/^#/ && $1 ~ /^[0-9]+$/ && NF >= 13 {print $1}' "$out/run0.$r.log") <<'PY'
import sys, torch
path, n, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
with open(path, "w") as f:
    for s in sizes:
        a = torch.empty(n * s, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            b.copy_(a)  # warm-up outside the capture, as CUDA graphs ask
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                b.copy_(a)
        best = None
        for _ in range(5):
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            g.replay()
            t1.record()
            t1.synchronize()
            us = t0.elapsed_time(t1) * 1000 / 20
            best = us if best is None else min(best, us)
        f.write(f"{s} {best:.2f}\n")
PY
done
python3 - "$out" "$rounds" "${variants[@]}" <<'EOF'
import os, statistics, sys
sys.path.insert(0, "perf")
from bench_rows import result_rows
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def table(path):
    return {int(f[0]): float(f[5]) for f in result_rows(path)}
copy, runs = {}, [{} for _ in variants]
for r in range(1, rounds + 1):
    try:
        for line in open(f"{out}/copy.{r}.log"):
            s, t = line.split()
            copy.setdefault(int(s), []).append(float(t))
    except OSError:
        pass
    for i in range(len(variants)):
        for s, t in table(f"{out}/run{i}.{r}.log").items():
            runs[i].setdefault(s, []).append(t)
print(f"all_reduce on one GPU, MODE={os.environ.get('MODE', 'group')}, medians of {rounds} rounds, out-of-place µs; ratio = rnccl ÷ the copy")
print(f"{'size':>10} {'copy us':>8}" + "".join(f" {v[:22]:>22} {'ratio':>6}" for v in variants))
for s in sorted(copy):
    c = statistics.median(copy[s])
    row = f"{s:>10} {c:>8.2f}"
    for i in range(len(variants)):
        if s in runs[i]:
            t = statistics.median(runs[i][s])
            row += f" {t:>22.2f} {t / c:>6.2f}"
        else:
            row += f" {'-':>22} {'-':>6}"
    print(row)
EOF
