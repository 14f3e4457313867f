#!/usr/bin/env bash
# GPU ranks on two "hosts" over sockets, rnccl against NCCL in one run (issue 29's GPU bar):
# PyTorch dist.all_reduce (float32) under torch.distributed.run, 2 processes, each rank its own
# NCCL_HOSTID (perf/torch_sockets.py), NCCL_SOCKET_IFNAME=lo, P2P, SHM and IB off, so both
# libraries stage through host memory and cross by TCP. NCCL is PyTorch's wheel; rnccl is
# .devbin/libnccl.so preloaded. Rounds alternate NCCL, rnccl; the table last gives each
# library's best round per size and rnccl's time ÷ NCCL's (below 1: rnccl faster).
#
#   here:  perf/gpu_build.sh
#   there: perf/gpu_sockets_vs_nccl.sh     (ROUNDS=3, SIZES="8 65536 1048576 16777216 134217728")
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NCCL_SOCKET_IFNAME=lo NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
out=${OUT:-gpu-sockets-out}
mkdir -p "$out"
# Two processes on one GPU take turns on it (time slices of milliseconds: on one H200, 8 B took
# 4.5 ms per call on NCCL and 2.3 ms on rnccl, 2026-12-02), so the run would time the GPU's
# context switches, not the sockets.
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpus" -ge 2 ] || { echo "gpu_sockets_vs_nccl.sh: needs 2 GPUs (one per rank), this machine has $ngpus" >&2; exit 2; }
[ -f .devbin/libnccl.so ] || { echo "gpu_sockets_vs_nccl.sh: .devbin/libnccl.so is missing: run perf/gpu_build.sh" >&2; exit 2; }
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"
rh=/tmp/rnccl-sockets-home
mkdir -p $rh && cp .devbin/libnccl.so $rh/libnccl.so.2
sizes=${SIZES:-"8 65536 1048576 16777216 134217728"}
# rnccl's data sockets take CUBIC where this default is a BBR (RNCCL_SOCKET_CC auto); NCCL's keep it.
echo "kernel congestion control: $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for who in nccl rnccl; do
    pre=""; [ $who = rnccl ] && pre="$rh/libnccl.so.2"
    LD_PRELOAD=$pre timeout "${RUN_LIMIT:-240}" python3 -m torch.distributed.run --nproc_per_node 2 \
      perf/torch_sockets.py $sizes >"$out/$who.$round.log" 2>&1
    echo "$who round $round: rc $?"
  done
done
python3 - "$out" "${ROUNDS:-3}" <<'PY'
import os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
best, bad = {}, []
for who in ("nccl", "rnccl"):
    for r in range(1, rounds + 1):
        for line in open(os.path.join(out, f"{who}.{r}.log"), errors="replace"):
            f = line.split()
            if len(f) == 4 and all(x.replace(".", "").isdigit() for x in f):
                size, us, ok = int(f[0]), float(f[1]), f[3] == "1"
                if not ok:
                    bad.append(f"{who} round {r} size {size}")
                best.setdefault(who, {})[size] = min(us, best.get(who, {}).get(size, 1e18))
print(f"{'bytes':>10} {'NCCL us':>10} {'rnccl us':>10} {'rnccl/NCCL time':>16}  (best of {rounds} rounds each)")
for s in sorted(best.get("nccl", {})):
    n, r = best["nccl"][s], best.get("rnccl", {}).get(s)
    print(f"{s:>10} {n:>10.1f} {r if r is None else f'{r:.1f}':>10} {'' if r is None else f'{r / n:.3f}':>16}")
print("results: " + ("all correct" if not bad else "WRONG in " + ", ".join(bad)))
PY
