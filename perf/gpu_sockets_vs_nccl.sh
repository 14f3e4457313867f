#!/usr/bin/env bash
# GPU ranks on two "hosts" over sockets, rnccl against NCCL in one run (issue 29's GPU bar):
# PyTorch dist.all_reduce (float32) under torch.distributed.run, 2 processes, each rank its own
# NCCL_HOSTID (perf/torch_sockets.py), NCCL_SOCKET_IFNAME=lo, P2P, SHM and IB off, so both
# libraries stage through host memory and cross by TCP. NCCL is PyTorch's wheel; rnccl is
# .devbin/libnccl.so preloaded. Rounds alternate NCCL, rnccl (and RNCCL_VARIANTS below); the
# table last gives each library's best round per size and rnccl's time ÷ NCCL's (below 1:
# rnccl faster).
#
#   here:  perf/gpu_build.sh
#   there: perf/gpu_sockets_vs_nccl.sh     (ROUNDS=3, SIZES="8 65536 1048576 16777216 134217728")
#
# Two GPUs (one per rank) are the issue's setting; on a machine of one, both ranks share it
# under CUDA MPS (below), which times both libraries' socket paths the same way but not their
# PCIe staging to two cards. Measured so on one H200 (2026-12-04, 3 rounds, best each), rnccl's
# time ÷ NCCL's: 8 B 0.94, 64 KiB 0.33, 1 MiB 0.83, 16 MiB 0.96, 128 MiB 0.96 (43.8 ms NCCL);
# RNCCL_VARIANTS NCCL_SOCKET_NTHREADS=2 and =4 moved 16-128 MiB by at most 4% either way.
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
# context switches, not the sockets. With one GPU the script therefore starts a CUDA MPS control
# daemon of its own (private pipe and log folders under /tmp, the card's compute mode and every
# other setting left as found) so both ranks' kernels run at once, both libraries under it alike,
# and quits the daemon when it ends. MPS=0 refuses one GPU instead.
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpus" -lt 2 ]; then
  [ "${MPS:-1}" = 1 ] && [ "$ngpus" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null ||
    { echo "gpu_sockets_vs_nccl.sh: needs 2 GPUs (one per rank), or one and nvidia-cuda-mps-control; this machine has $ngpus" >&2; exit 2; }
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/rnccl-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/rnccl-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "gpu_sockets_vs_nccl.sh: the MPS control daemon did not start" >&2; exit 2; }
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  echo "one GPU: both ranks on it under CUDA MPS (daemon in $CUDA_MPS_PIPE_DIRECTORY)"
fi
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
# RNCCL_VARIANTS: more rnccl runs per round, each with its own environment, e.g.
# "NCCL_SOCKET_NTHREADS=2 NCCL_SOCKET_NTHREADS=4,NCCL_NSOCKS_PERTHREAD=1" (space between
# variants, comma between a variant's settings); each gets its own columns.
whos="nccl rnccl"
for v in ${RNCCL_VARIANTS:-}; do whos="$whos rnccl:$v"; done
for round in $(seq 1 "${ROUNDS:-3}"); do
  i=0
  for who in $whos; do
    i=$((i + 1))
    pre=""; [ "$who" != nccl ] && pre="$rh/libnccl.so.2"
    envs=(); [ "${who#rnccl:}" != "$who" ] && IFS=, read -ra envs <<<"${who#rnccl:}"
    env "${envs[@]}" LD_PRELOAD=$pre timeout "${RUN_LIMIT:-240}" python3 -m torch.distributed.run \
      --nproc_per_node 2 perf/torch_sockets.py $sizes >"$out/run$i.$round.log" 2>&1
    echo "$who round $round: rc $?"
  done
done
python3 - "$out" "${ROUNDS:-3}" $whos <<'PY'
import os, sys
out, rounds, whos = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
best, bad = {}, []
for i, who in enumerate(whos, 1):
    for r in range(1, rounds + 1):
        for line in open(os.path.join(out, f"run{i}.{r}.log"), errors="replace"):
            f = line.split()
            if len(f) == 4 and all(x.replace(".", "").isdigit() for x in f):
                size, us, ok = int(f[0]), float(f[1]), f[3] == "1"
                if not ok:
                    bad.append(f"{who} round {r} size {size}")
                best.setdefault(who, {})[size] = min(us, best.get(who, {}).get(size, 1e18))
for i, who in enumerate(whos[1:], 1):
    print(f"[{i}] {who}")
head = f"{'bytes':>10} {'NCCL us':>10}" + "".join(f" {f'[{i}] us':>10} {f'[{i}]/NCCL':>9}" for i in range(1, len(whos)))
print(head + f"  (best of {rounds} rounds each; time ratio, below 1: rnccl faster)")
for s in sorted(best.get("nccl", {})):
    n = best["nccl"][s]
    row = f"{s:>10} {n:>10.1f}"
    for who in whos[1:]:
        r = best.get(who, {}).get(s)
        row += f" {'-':>10} {'':>9}" if r is None else f" {r:>10.1f} {r / n:>9.3f}"
    print(row)
print("results: " + ("all correct" if not bad else "WRONG in " + ", ".join(bad)))
PY
