#!/usr/bin/env bash
# Collectives on symmetric windows through nccl.h (issue 27): perf/capi_symmetric.cu built
# against rnccl's nccl.h and run on rnccl's libnccl.so.2, one thread driving two ranks (one per
# GPU, or both on GPU 0 of a one-GPU host). Prints every check and "all ok" last; rc 0 when all
# pass.
#
#   here:  perf/gpu_build.sh
#   there: perf/capi_symmetric.sh        (carry .devbin; logs under $OUT)
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-capi-symmetric-out}
mkdir -p "$out"
[ -f .devbin/libnccl.so ] || { echo "capi_symmetric.sh: .devbin/libnccl.so is missing: run perf/gpu_build.sh" >&2; exit 2; }
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"
rh=/tmp/rnccl-symmetric-home
rm -rf $rh && mkdir -p $rh
cp .devbin/libnccl.so $rh/libnccl.so.2 && ln -s libnccl.so.2 $rh/libnccl.so
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
if ! nvcc -O2 -std=c++17 -arch=sm_$cc -Icapi/include perf/capi_symmetric.cu -o "$out/capi_symmetric" \
    -L$rh -lnccl >"$out/build.log" 2>&1; then
  echo "capi_symmetric.cu did not build:"; tail -20 "$out/build.log"; exit 1
fi
LD_LIBRARY_PATH="$rh:$LD_LIBRARY_PATH" timeout "${RUN_LIMIT:-300}" "$out/capi_symmetric" >"$out/run.log" 2>&1
rc=$?
grep -E "^check|FAILED|all ok|rank|error" "$out/run.log" | head -60
echo "capi_symmetric: rc $rc"
exit $rc
