#!/usr/bin/env bash
# One-sided operations through nccl.h on two GPUs (issue 30): perf/capi_rma.cu built against
# rnccl's nccl.h, run on rnccl's libnccl.so.2 in two processes, then with one thread driving both
# GPUs, then a wait nobody signals (RNCCL_TIMEOUT=5), then on NCCL's library for its Send/Recv
# times (NCCL 2.28 has no one-sided calls). Prints every check, then a table: one-way time of a
# put + signal (rank 1 waiting) and of a Send/Recv, µs, on rnccl, and NCCL's Send/Recv beside.
#
#   here:  perf/gpu_build.sh
#   there: perf/capi_rma.sh          (carry .devbin; logs under $OUT)
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-capi-rma-out}
mkdir -p "$out"
[ -f .devbin/libnccl.so ] || { echo "capi_rma.sh: .devbin/libnccl.so is missing: run perf/gpu_build.sh" >&2; exit 2; }
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"
base_ld=$LD_LIBRARY_PATH
rh=/tmp/rnccl-rma-home
rm -rf $rh && mkdir -p $rh
cp .devbin/libnccl.so $rh/libnccl.so.2 && ln -s libnccl.so.2 $rh/libnccl.so
wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
if ! nvcc -O2 -std=c++17 -arch=sm_$cc -Icapi/include perf/capi_rma.cu -o "$out/capi_rma" \
    -L$rh -lnccl -ldl >"$out/build.log" 2>&1; then
  echo "capi_rma.cu did not build:"; tail -20 "$out/build.log"; exit 1
fi
rc=0
run() { # tag, library dir, mode, extra env...
  local tag=$1 lib=$2 mode=$3; shift 3
  env "$@" LD_LIBRARY_PATH="$lib:$base_ld" timeout "${RUN_LIMIT:-240}" "$out/capi_rma" "$mode" >"$out/$tag.log" 2>&1
  local r=$?
  echo "== $tag: rc $r"; grep -E "^(check|#|rank 1)|FAILED|window byte|error" "$out/$tag.log" | head -40
  [ $r = 0 ] || rc=1
}
run rnccl-procs $rh procs
run rnccl-thread $rh thread
run rnccl-timeout $rh timeout RNCCL_TIMEOUT=5
run nccl-procs "$wheel/lib" procs
python3 - "$out" <<'PY'
import os, sys
out = sys.argv[1]
def times(tag):
    t = {}
    for line in open(os.path.join(out, tag + ".log"), errors="replace"):
        f = line.split()
        if len(f) == 6 and f[0] == "time":
            t[int(f[1])] = (float(f[3]), float(f[5]))
    return t
r, n, th = times("rnccl-procs"), times("nccl-procs"), times("rnccl-thread")
print(f"{'bytes':>10} {'put':>9} {'sendrecv':>9} {'NCCL s/r':>9} {'put/NCCL':>9} {'put/s-r':>8} {'put -g 2':>9}  one way, us (rnccl two processes; last: one thread)")
for s in sorted(r):
    p, sr = r[s]
    ns = n.get(s, (0, 0))[1]
    tp = th.get(s, (0, 0))[0]
    print(f"{s:>10} {p:>9.2f} {sr:>9.2f} {ns:>9.2f} {p / ns if ns else 0:>9.3f} {p / sr:>8.3f} {tp:>9.2f}")
PY
exit $rc
