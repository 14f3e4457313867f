#!/usr/bin/env bash
# rnccl against NCCL on the GPUs of one host, interleaved in one run: for every round and every
# collective, nccl-tests (built here against the NCCL of PyTorch's nvidia-nccl-cu13 wheel) then
# `rnccl bench` with the same flags, one process driving every GPU (-g). Prints, per collective
# and size, the median over rounds of rnccl ÷ NCCL: busbw ratios (higher is better) for sizes of
# 1 MiB and more (algbw on one GPU, whose busbw is 0), time ratios (lower is better) below. Then
# the same for all_reduce with NCCL_P2P_DISABLE=1 (host shared memory).
#
#   here:  perf/gpu_build.sh && perf/gpu_vs_nccl.sh --prepare <nccl-tests checkout>
#   there: perf/gpu_vs_nccl.sh            (carry .devbin and .nccl-tests)
#
# Knobs: ROUNDS (3), GPUS (all), COLLS, SMALL_COLLS, MINBYTES/MAXBYTES/FACTOR for the bandwidth
# sweep, SHM (0 skips the NCCL_P2P_DISABLE=1 runs), RUN_LIMIT (seconds per program run), FLAGS
# (added to both programs' command lines: "-R 2" registers symmetric windows, "-G 1" launches
# CUDA graphs).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take a shared host's GPUs down.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --prepare ]; then
  src=${2:?usage: perf/gpu_vs_nccl.sh --prepare <nccl-tests checkout>}
  rm -rf .nccl-tests && mkdir .nccl-tests
  if [ -d "$src/.git" ] || git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" archive HEAD | tar -x -C .nccl-tests
  else
    cp -r "$src"/. .nccl-tests/
  fi
  excl="$(git rev-parse --git-common-dir)/info/exclude"; mkdir -p "$(dirname "$excl")"
  grep -qx "/.nccl-tests/" "$excl" 2>/dev/null || echo "/.nccl-tests/" >>"$excl"
  echo "prepared .nccl-tests (carry it with .devbin)"
  exit 0
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-gpu-vs-nccl-out}
mkdir -p "$out"
rounds=${ROUNDS:-3}
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
colls=${COLLS:-"all_reduce all_gather reduce_scatter broadcast alltoall sendrecv"}
small=${SMALL_COLLS:-$colls}  # the collectives also timed at 8 B to 512 KB
minb=${MINBYTES:-1M}
maxb=${MAXBYTES:-8G}
factor=${FACTOR:-4}
limit=${RUN_LIMIT:-120}  # seconds per program run: a hang costs one run, not the whole call
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set
# NCCL from the wheel, as PyTorch loads it; nccl-tests wants lib/libnccl.so and include/nccl.h.
wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
home=/tmp/nccl-home
mkdir -p $home/lib && ln -sf "$wheel/include" $home/include
for f in "$wheel"/lib/libnccl.so*; do ln -sf "$f" $home/lib/; done
[ -e $home/lib/libnccl.so ] || ln -sf "$wheel/lib/libnccl.so.2" $home/lib/libnccl.so
export LD_LIBRARY_PATH="$home/lib:$LD_LIBRARY_PATH"
# Built outside the checkout (/tmp/nt, shared with capi_acceptance.sh), so a warm machine's build
# survives the next call's copy of the tree and make has nothing to do.
# Only this machine's GPU architecture: nccl-tests builds six by default, which took two of a
# device call's ten minutes on a fresh H200 machine.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
[ -n "$cc" ] && export NVCC_GENCODE="-gencode=arch=compute_$cc,code=sm_$cc"
if ! make -C .nccl-tests/src -j"$(nproc)" BUILDDIR=/tmp/nt NCCL_HOME=$home CUDA_HOME=/usr/local/cuda >"$out/nccl-tests-build.log" 2>&1; then
  tail -20 "$out/nccl-tests-build.log"; exit 1
fi
nccl_version=$(python3 -c 'import nvidia.nccl, importlib.metadata as m; print(m.version("nvidia-nccl-cu13"))' 2>/dev/null)
echo "NCCL $nccl_version (nvidia-nccl-cu13), nccl-tests $(git -C .nccl-tests log -1 --format=%h 2>/dev/null || echo src), $gpus GPUs, $rounds rounds, flags: ${FLAGS:-none}"
common="-g $gpus -n 20 -w 5 -c 0 ${FLAGS:-}"
# rnccl bench also gets --ranks "$gpus": without it, a host with more GPUs than -g gets one
# process per -g GPUs for all of them (2026-11-28: GPUS=2 on a 4-GPU host ran 4 ranks against
# NCCL's 2).
for r in $(seq 1 "$rounds"); do
  for c in $colls; do
    for range in "-b 8 -e 512K -f 4" "-b $minb -e $maxb -f $factor"; do
      [[ "$range" == "-b 8 "* && " $small " != *" $c "* ]] && continue
      tag=$(echo "$range" | tr -d ' -')
      timeout "$limit" /tmp/nt/${c}_perf $common $range >"$out/nccl.$c.$tag.$r.log" 2>&1
      timeout "$limit" .devbin/rnccl bench "$c" $common --ranks "$gpus" $range >"$out/rnccl.$c.$tag.$r.log" 2>&1
    done
  done
  [ "${SHM:-1}" = 0 ] && continue
  for tag in shm; do
    NCCL_P2P_DISABLE=1 timeout "$limit" /tmp/nt/all_reduce_perf $common -b 8 -e 1G -f 8 >"$out/nccl.all_reduce_$tag.x.$r.log" 2>&1
    NCCL_P2P_DISABLE=1 timeout "$limit" .devbin/rnccl bench all_reduce $common --ranks "$gpus" -b 8 -e 1G -f 8 >"$out/rnccl.all_reduce_$tag.x.$r.log" 2>&1
  done
done
python3 - "$out" <<'EOF'
import glob, os, re, statistics, sys
out = sys.argv[1]
sys.path.insert(0, "perf")
from bench_rows import result_rows
def table(path):
    # out-of-place time (us), and busbw (algbw on one rank, whose busbw is 0)
    return {int(f[0]): (float(f[5]), float(f[7]) or float(f[6])) for f in result_rows(path)}
ratios = {}
for p in glob.glob(os.path.join(out, "rnccl.*.log")):
    q = p.replace("/rnccl.", "/nccl.")
    if not os.path.exists(q):
        continue
    coll = os.path.basename(p).split(".")[1]
    a, b = table(p), table(q)
    for size in sorted(set(a) & set(b)):
        (ta, ba), (tb, bb) = a[size], b[size]
        if size >= 1 << 20 and bb > 0:
            ratios.setdefault((coll, size, "busbw"), []).append(ba / bb)
        elif size < 1 << 20 and tb > 0:
            ratios.setdefault((coll, size, "time"), []).append(ta / tb)
print(f"{'collective':<18}{'size':>12}  {'rnccl/NCCL':>10}  measure (median of rounds)")
for (coll, size, kind), v in sorted(ratios.items()):
    print(f"{coll:<18}{size:>12}  {statistics.median(v):>10.3f}  {kind}{'' if kind == 'busbw' else ' (lower is better)'}")
EOF
