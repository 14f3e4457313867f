#!/usr/bin/env bash
# perf/capi_fp8_scalar.cu (FP8 reductions bit for bit against CUDA's conversions, and
# ncclScalarDevice PreMulSum, also in a replayed graph) built once against NCCL's nccl.h and
# run on NCCL and on rnccl's libnccl.so.2 by LD_LIBRARY_PATH alone, on two GPUs.
#
#   here:  perf/gpu_build.sh
#   there: perf/capi_fp8_scalar.sh    (carry .devbin)
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-capi-fp8-out}
mkdir -p "$out"
[ -f .devbin/libnccl.so ] || { echo "capi_fp8_scalar.sh: .devbin/libnccl.so is missing: run perf/gpu_build.sh" >&2; exit 2; }
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set
wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
nh=/tmp/nccl-fp8-home rh=/tmp/rnccl-fp8-home
rm -rf $nh $rh && mkdir -p $nh/lib $rh/lib
for f in "$wheel"/lib/libnccl.so*; do ln -s "$f" $nh/lib/; done
cp .devbin/libnccl.so $rh/lib/libnccl.so.2
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
if ! "$nvcc" -I "$wheel/include" perf/capi_fp8_scalar.cu -o "$out/capi_fp8_scalar" -Xlinker "$nh/lib/libnccl.so.2" >"$out/build.log" 2>&1; then
  echo "capi_fp8_scalar did not build:"; tail -8 "$out/build.log"; exit 1
fi
rc=0
for who in nccl rnccl; do
  home=$nh; [ $who = rnccl ] && home=$rh
  LD_LIBRARY_PATH="$home/lib:${LD_LIBRARY_PATH:-}" NCCL_DEBUG=VERSION timeout 300 "$out/capi_fp8_scalar" >"$out/$who.log" 2>&1
  r=$?; [ $r = 0 ] || rc=1
  echo "== $who: rc $r ($(grep -m1 -o 'NCCL version [^ ]*\|rnccl [^ ]*' "$out/$who.log" | head -1))"
  grep -v "^NCCL\|^rnccl\|INFO" "$out/$who.log" | tail -12
done
exit $rc
