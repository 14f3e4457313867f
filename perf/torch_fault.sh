#!/usr/bin/env bash
# PyTorch's fault-tolerance paths (perf/torch_fault.py) on NCCL and on rnccl's libnccl.so.2
# (LD_PRELOAD), scenario by scenario, in one run: how each rank ended, in how many seconds, and
# every "NCCL error" PyTorch raised from a library call (the abort path must raise none).
#
#   here:  perf/gpu_build.sh
#   there: perf/torch_fault.sh      (carry .devbin; knobs SCENARIOS, GPUS, LIBS, RUN_LIMIT, CTEST=0
#          skips the C test perf/capi_fault.c)
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-torch-fault-out}
mkdir -p "$out"
gpus=${GPUS:-2}
limit=${RUN_LIMIT:-150}
scenarios=${SCENARIOS:-"death stuck exclude shrink train"}
libs=${LIBS:-"nccl rnccl"}
[ -f .devbin/libnccl.so ] || { echo "torch_fault.sh: .devbin/libnccl.so is missing: run perf/gpu_build.sh" >&2; exit 2; }
mkdir -p /tmp/rnccl-home/lib && cp .devbin/libnccl.so /tmp/rnccl-home/lib/libnccl.so.2
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set
# The C test of growth, revoke, shrink and suspension on every GPU of the host (perf/capi_fault.c),
# on rnccl.
if [ "${CTEST:-1}" != 0 ]; then
  nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
  if "$nvcc" -I capi/include perf/capi_fault.c -o "$out/capi_fault" -Xlinker /tmp/rnccl-home/lib/libnccl.so.2 \
      -lpthread >"$out/capi_fault.build" 2>&1; then
    LD_LIBRARY_PATH=/tmp/rnccl-home/lib:${LD_LIBRARY_PATH:-} timeout 120 "$out/capi_fault" >"$out/capi_fault.log" 2>&1
    echo "capi_fault: rc $?"; tail -8 "$out/capi_fault.log"
  else
    echo "capi_fault did not build:"; tail -8 "$out/capi_fault.build"
  fi
fi
for s in $scenarios; do
  for lib in $libs; do
    pre=(); [ "$lib" = rnccl ] && pre=(LD_PRELOAD=/tmp/rnccl-home/lib/libnccl.so.2)
    # death and stuck: the watchdog tears the process down (1); shrink and exclude: no watchdog
    # teardown (0): the survivors' Work.wait(timeout) raises and they shrink the parent, as
    # torchft-style recovery runs.
    handling=1; case $s in shrink | exclude | train) handling=0 ;; esac
    rm -f "$out/$s.$lib.jsonl"
    start=$(date +%s%N)
    # One process per GPU started by hand: torchrun would tear every rank down when one dies.
    port=$((29500 + RANDOM % 2000))
    pids=()
    for r in $(seq 0 $((gpus - 1))); do
      env "${pre[@]}" NCCL_DEBUG=WARN TORCH_NCCL_ASYNC_ERROR_HANDLING=$handling TORCH_NCCL_DUMP_ON_TIMEOUT=0 \
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=$gpus MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout "$limit" python3 perf/torch_fault.py "$s" "$out/$s.$lib.jsonl" >"$out/$s.$lib.rank$r.log" 2>&1 &
      pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    cat "$out/$s.$lib".rank*.log >"$out/$s.$lib.log"
    (exit $rc)
    echo "$? $(( ($(date +%s%N) - start) / 1000000 ))" >"$out/$s.$lib.rc"
  done
done
python3 - "$out" "$scenarios" "$libs" <<'PY'
import json, os, re, sys
out, scenarios, libs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
print(f"{'scenario':<9}{'lib':<7}{'rc':>4}{'wall s':>8}  ranks (ok / why)  | library errors PyTorch raised")
for s in scenarios:
    for lib in libs:
        rc, ms = open(f"{out}/{s}.{lib}.rc").read().split()
        wall = int(ms) / 1000
        lines = []
        if os.path.exists(f"{out}/{s}.{lib}.jsonl"):
            lines = [json.loads(l) for l in open(f"{out}/{s}.{lib}.jsonl") if l.strip()]
        ranks = "; ".join(f"r{l['rank']}{'/' + l['phase'] if 'phase' in l else ''}:{'ok' if l.get('ok') else '-'} {l['why'][:90]}" for l in lines)
        log = open(f"{out}/{s}.{lib}.log", errors="replace").read()
        errs = sorted(set(re.findall(r"NCCL error in: [^\n]*?:\d+, [^\n,]*", log)))
        caught = log.count("Watchdog caught collective operation timeout")
        if caught:
            ranks = f"watchdog caught {caught} timeout(s); " + ranks
        print(f"{s:<9}{lib:<7}{rc:>4}{float(wall):>8.1f}  {ranks or '(no report)'}  | {'; '.join(errs) or 'none'}")
PY
