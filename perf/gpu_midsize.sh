#!/usr/bin/env bash
# One collective through four paths, interleaved in one run, for finding where rnccl's time goes
# at a range of sizes: NCCL (nccl-tests -g N), rnccl bench -g N (one thread drives every GPU),
# rnccl bench --ranks N (one process per GPU), and the same with NCCL_ALGO=Ring (rnccl's rings
# instead of its own selection). Prints per size the median over rounds of each path's
# out-of-place time (µs) and each rnccl path's busbw ÷ NCCL's (higher is better).
#
#   here:  perf/gpu_build.sh && perf/gpu_vs_nccl.sh --prepare <nccl-tests checkout>
#   there: perf/gpu_midsize.sh [collective] [bench size flags…]   (carry .devbin and .nccl-tests)
#          e.g. perf/gpu_midsize.sh all_reduce -b 1M -e 256M -f 2
#
# Knobs: ROUNDS (3), GPUS (all), DTYPE (float), EXTRA (more bench flags for every path, e.g.
# "-R 2"), RUN_LIMIT (seconds per program run). NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
coll=${1:-all_reduce}
shift || true
sizes=${*:-"-b 1M -e 256M -f 2"}
export NCCL_NVLS_ENABLE=0
out=${OUT:-gpu-midsize-out}
mkdir -p "$out"
rounds=${ROUNDS:-3}
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
limit=${RUN_LIMIT:-120}
dtype=${DTYPE:-float}
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set
wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
home=/tmp/nccl-home
mkdir -p $home/lib && ln -sf "$wheel/include" $home/include
for f in "$wheel"/lib/libnccl.so*; do ln -sf "$f" $home/lib/; done
[ -e $home/lib/libnccl.so ] || ln -sf "$wheel/lib/libnccl.so.2" $home/lib/libnccl.so
export LD_LIBRARY_PATH="$home/lib:$LD_LIBRARY_PATH"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
[ -n "$cc" ] && export NVCC_GENCODE="-gencode=arch=compute_$cc,code=sm_$cc"
if [ ! -x /tmp/nt/${coll}_perf ]; then
  make -C .nccl-tests/src -j"$(nproc)" BUILDDIR=/tmp/nt NCCL_HOME=$home CUDA_HOME=/usr/local/cuda \
    >"$out/nccl-tests-build.log" 2>&1 || { tail -20 "$out/nccl-tests-build.log"; exit 1; }
fi
common="-n 20 -w 5 -c 0 -d $dtype ${EXTRA:-}"
for r in $(seq 1 "$rounds"); do
  timeout "$limit" /tmp/nt/${coll}_perf -g "$gpus" $common $sizes >"$out/nccl.$r.log" 2>&1
  timeout "$limit" .devbin/rnccl bench "$coll" -g "$gpus" --ranks "$gpus" $common $sizes >"$out/g.$r.log" 2>&1
  timeout "$limit" .devbin/rnccl bench "$coll" --ranks "$gpus" $common $sizes >"$out/ranks.$r.log" 2>&1
  NCCL_ALGO=Ring timeout "$limit" .devbin/rnccl bench "$coll" --ranks "$gpus" $common $sizes \
    >"$out/ring.$r.log" 2>&1
done
python3 - "$out" "$rounds" <<'EOF'
import statistics, sys
sys.path.insert(0, "perf")
from bench_rows import result_rows
out, rounds = sys.argv[1], int(sys.argv[2])
def table(path):
    return {int(f[0]): (float(f[5]), float(f[7])) for f in result_rows(path)}
paths = ["nccl", "g", "ranks", "ring"]
t = {p: {} for p in paths}
for p in paths:
    for r in range(1, rounds + 1):
        for size, v in table(f"{out}/{p}.{r}.log").items():
            t[p].setdefault(size, []).append(v)
print(f"{'size':>11} {'NCCL us':>9} {'-g us':>8} {'ranks us':>9} {'ring us':>8} "
      f"{'-g/N':>6} {'ranks/N':>7} {'ring/N':>6}  (busbw ratios, medians of {rounds} rounds)")
for size in sorted(t["nccl"]):
    med = {p: (statistics.median(x[0] for x in t[p][size]),
               statistics.median(x[1] for x in t[p][size])) if size in t[p] else None
           for p in paths}
    def us(p):
        return f"{med[p][0]:.1f}" if med[p] else "-"
    def ratio(p):
        if not med[p] or not med["nccl"] or med["nccl"][1] == 0:
            return "-"
        return f"{med[p][1] / med['nccl'][1]:.3f}"
    print(f"{size:>11} {us('nccl'):>9} {us('g'):>8} {us('ranks'):>9} {us('ring'):>8} "
          f"{ratio('g'):>6} {ratio('ranks'):>7} {ratio('ring'):>6}")
EOF
