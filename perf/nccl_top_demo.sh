#!/usr/bin/env bash
# `rnccl top` on a job running NVIDIA's NCCL: nccl-tests' all_reduce_perf (built against NCCL
# 2.28.9 from PyTorch's nvidia-nccl-cu13 wheel) with rnccl's profiler plugin loaded through
# NCCL_PROFILER_PLUGIN, and `rnccl top --once` printing the job's screens while it runs. Also
# checks NCCL logged the plugin's init line and that the page is gone after the job.
#
#   here:  perf/gpu_build.sh && perf/gpu_vs_nccl.sh --prepare <nccl-tests checkout>
#   there: perf/nccl_top_demo.sh     (carry .devbin and .nccl-tests; knobs BYTES, ITERS)
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-nccl-top-out}
mkdir -p "$out"
wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
nh=/tmp/nccl-home
rm -rf $nh && mkdir -p $nh/lib && ln -s "$wheel/include" $nh/include
for f in "$wheel"/lib/libnccl.so*; do ln -s "$f" $nh/lib/; done
[ -e $nh/lib/libnccl.so ] || ln -s "$wheel/lib/libnccl.so.2" $nh/lib/libnccl.so
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
[ -n "$cc" ] && export NVCC_GENCODE="-gencode=arch=compute_$cc,code=sm_$cc"
if ! make -C .nccl-tests/src -j"$(nproc)" BUILDDIR=/tmp/nt NCCL_HOME=$nh CUDA_HOME=/usr/local/cuda >"$out/build.log" 2>&1; then
  echo "nccl-tests did not build against NCCL:"; tail -15 "$out/build.log"; exit 1
fi
gpus=$(nvidia-smi -L | wc -l); [ "$gpus" -gt 2 ] && gpus=2
LD_LIBRARY_PATH="$nh/lib:$LD_LIBRARY_PATH" NCCL_PROFILER_PLUGIN="$PWD/.devbin/libnccl-profiler-rnccl.so" \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV timeout 300 /tmp/nt/all_reduce_perf -g "$gpus" \
  -b "${BYTES:-256M}" -e "${BYTES:-256M}" -n "${ITERS:-20000}" -w 5 -c 0 >"$out/nccl.log" 2>&1 &
job=$!
# Wait for the test's page (its pid is timeout's child's), then sample while the test runs.
page=""
for _ in $(seq 150); do
  page=$(ls /dev/shm/rnccl-stats-* 2>/dev/null | grep -v '\.tmp$' | head -1)
  [ -n "$page" ] && break
  sleep 0.2
done
echo "page: ${page:-none appeared}"
sleep 2
COLUMNS=110 LINES=30 .devbin/rnccl top --once --interval 1000 >"$out/top.txt" 2>&1
wait $job; rc=$?
echo "all_reduce_perf on NCCL with rnccl's profiler plugin: rc $rc"
grep -m2 "rnccl profiler\|PROFILER" "$out/nccl.log"
grep -E "^ +[0-9]+ " "$out/nccl.log" | head -3
if [ -n "$page" ] && [ -e "$page" ]; then echo "PAGE LEFT BEHIND: $page"; else echo "no page left after the job"; fi
echo "--- rnccl top --once during the job:"
grep -v '^│ *│$' "$out/top.txt"
