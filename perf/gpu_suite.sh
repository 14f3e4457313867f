#!/usr/bin/env bash
# The GPU suite, run on a device machine in one call: the GPU tests (every collective × type ×
# op × in/out of place on one rank and on two, faults), then `rnccl bench` on the GPUs (also
# four ranks sharing GPU 0), with a short table last. Binaries are built on the development
# machine and carried in .devbin/ (perf/gpu_build.sh makes them): the device machine has CUDA
# and NCCL but no Rust.
#
#   perf/gpu_build.sh            # here: release binaries into .devbin/
#   perf/gpu_suite.sh            # there: writes logs under $OUT (or ./gpu-suite-out)
#
# NVLink multicast stays off everywhere (NCCL_NVLS_ENABLE=0): rnccl never creates multicast
# objects, and nothing this script starts may either.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# A device run that found no GPU fails instead of reporting the GPU tests as ignored.
export RNCCL_REQUIRE_GPU=1
out=${OUT:-gpu-suite-out}
mkdir -p "$out"
# NVRTC: the toolkit's, else the pip wheel beside PyTorch.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set
nvidia-smi -L | tee "$out/gpus.txt"
declare -A status
run() { # name, command...
  local name=$1; shift
  local t0=$SECONDS
  if "$@" >"$out/$name.log" 2>&1; then status[$name]="ok $((SECONDS - t0))s"; else status[$name]="FAILED($?) $((SECONDS - t0))s"; fi
  tail -5 "$out/$name.log"
}
if [ -x .devbin/rnccl ]; then
  run bench_first_start .devbin/rnccl bench all_reduce -b 8 -e 8 -n 1 -w 0
  run bench_allreduce .devbin/rnccl bench all_reduce -b 8 -e 256M -f 4 -n 20 -w 5
  # Two ranks as processes (one GPU per process; on a one-GPU host both share GPU 0).
  run bench_processes .devbin/rnccl bench all_reduce --ranks 2 -b 8 -e 16M -f 8 -n 5 -w 2
  run bench_graph .devbin/rnccl bench all_gather --threads --ranks 2 -G 2 -b 1K -e 4M -f 16 -n 5 -w 2
  # Four ranks of one process on GPU 0: every rank's blocks must stay resident at once
  # (GpuComm::block_cap; without it they waited for each other from 9 MB). The symmetric
  # kernels on the group's buffers, the direct kernel, and ring programs; -c 1 fails the run
  # on a wrong element.
  shared="env CUDA_VISIBLE_DEVICES=0 timeout 120 .devbin/rnccl bench -g 4 --ranks 4 -b 64K -e 256M -f 16 -n 2 -w 1 -c 1"
  run bench_shared_gpu_group $shared all_reduce
  run bench_shared_gpu_direct env NCCL_P2P_DIRECT_DISABLE=1 $shared reduce_scatter
  run bench_shared_gpu_rings $shared sendrecv
  # Buffers registered with ncclCommRegister (-R 1): the registered kernel, ranks as threads
  # and as processes (on a one-GPU host both share GPU 0).
  run bench_registered_threads .devbin/rnccl bench all_reduce --threads --ranks 2 -R 1 -b 1M -e 64M -f 4 -n 5 -w 2 -c 1
  run bench_registered_processes .devbin/rnccl bench reduce_scatter --ranks 2 -R 1 -b 1M -e 16M -f 4 -n 3 -w 2 -c 1
  cat "$out/bench_allreduce.log"
fi
for t in .devbin/gpu_collectives-* .devbin/gpu_faults-*; do
  [ -x "$t" ] || continue
  name=$(basename "$t" | cut -d- -f1)
  run "$name" timeout "${GPU_TESTS_LIMIT:-900}" "$t" --test-threads=1
  grep -E "^test |panicked|rank [0-9]:" "$out/$name.log" | cut -c1-300 | head -40
done
echo "== summary =="
for k in "${!status[@]}"; do printf '%-24s %s\n' "$k" "${status[$k]}"; done | sort
