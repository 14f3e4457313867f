#!/usr/bin/env bash
# One device call, several of the perf/ scripts in it ("phases"), each under its own time limit,
# with one NVRTC kernel cache shared by all of them and carried from call to call: a fresh device
# machine otherwise compiles every kernel module again (about 40 s per data type), which took
# half of a 10-minute call. Each phase's output goes to $OUT/<phase>.txt and its last lines are
# printed at the end; the scripts' own logs come back as $OUT/logs.tgz (the device tool returns
# at most 8 files).
#
#   here:  perf/gpu_build.sh && perf/gpu_vs_nccl.sh --prepare <nccl-tests checkout>
#   there: perf/device_phases.sh PHASE[:SECONDS]...   (carry .devbin, .nccl-tests, and .kc.tgz
#          once a call has brought one back)
#
# Phases: suite (perf/gpu_suite.sh), vs (perf/gpu_vs_nccl.sh, ROUNDS, VSARGS), capi
# (perf/capi_acceptance.sh), torch (its PyTorch part only), dall (nccl-tests `-d all` on rnccl
# alone: DMODES, ITERS, MAXBYTES, TESTS), fault (perf/torch_fault.sh), rma (perf/capi_rma.sh), sock
# (perf/gpu_sockets_vs_nccl.sh, SROUNDS, RNCCL_VARIANTS; 2 GPUs, or one under MPS), mid
# (perf/gpu_midsize.sh, MIDARGS), gc (the gpu_collectives test binary alone), gf (the gpu_faults
# test binary alone), floor (perf/launch_floor.cu: one thread's launch floor on 1..N GPUs), llfloor
# (perf/ll_floor.sh: rnccl's 8-byte all-reduce against the bare LL exchange), llkernel
# (perf/ll_kernel.cu: the LL kernel alone against that exchange, and with parts of it off; a carried
# .llbase/kernels, e.g. `git archive <commit> kernels | tar x -C .llbase`, adds that kernel beside),
# spans (perf/op_spans.sh: each operation's GPU span and gap; needs .devbin/rnccl-op-spans from
# `perf/op_spans.sh --build`), eff (perf/gpu_copy_efficiency.sh on GPU 0: MODE, EXTRA), kc (the
# kernel cache as $OUT/kc.tgz: copy it to .kc.tgz here, `echo /.kc.tgz >> .git/info/exclude`,
# and carry it). A phase without :SECONDS gets 600. GPUS and the scripts' other knobs pass
# through the environment.
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take a shared host's GPUs down.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export RNCCL_KERNEL_CACHE=/tmp/rnccl-kernel-cache
mkdir -p "$RNCCL_KERNEL_CACHE"
if [ -f .kc.tgz ]; then
  tar xzf .kc.tgz -C "$RNCCL_KERNEL_CACHE" && echo "kernel cache seeded: $(ls "$RNCCL_KERNEL_CACHE" | wc -l) files"
fi
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
out=${OUT:-device-phases-out}
mkdir -p "$out"
logs=/tmp/device-phases
t0=$SECONDS
names=()
for arg in "$@"; do
  phase=${arg%%:*}
  limit=600
  [ "$phase" != "$arg" ] && limit=${arg#*:}
  names+=("$phase")
  start=$SECONDS
  run() { OUT="$logs/$phase" timeout "$limit" "$@" >"$out/$phase.txt" 2>&1; }
  case $phase in
    suite) run bash perf/gpu_suite.sh ;;
    vs) ROUNDS=${ROUNDS:-2} run bash perf/gpu_vs_nccl.sh ${VSARGS:-} ;;
    capi) run bash perf/capi_acceptance.sh ;;
    torch) TESTS="" run bash perf/capi_acceptance.sh ;;
    dall) TORCH=0 LIBS=rnccl MODES="${DMODES:-Dall DallG1 DallR2}" ITERS=${ITERS:-2} run bash perf/capi_acceptance.sh ;;
    fault) run bash perf/torch_fault.sh ;;
    rma) run bash perf/capi_rma.sh ;;
    sock) ROUNDS=${SROUNDS:-2} run bash perf/gpu_sockets_vs_nccl.sh ;;
    mid) run bash perf/gpu_midsize.sh ${MIDARGS:-} ;;
    gc) RNCCL_REQUIRE_GPU=1 run bash -c '.devbin/gpu_collectives-* --test-threads=1' ;;
    gf) RNCCL_REQUIRE_GPU=1 run bash -c '.devbin/gpu_faults-* --test-threads=1' ;;
    floor) run bash -c 'nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); "$nvcc" -O2 -arch=native -Xcompiler -pthread -o /tmp/launch_floor perf/launch_floor.cu && /tmp/launch_floor 20000' ;;
    llfloor) run bash perf/ll_floor.sh ;;
    llkernel) run bash -c 'nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); g="0 1"; [ "$(nvidia-smi -L | grep -c ^GPU)" -ge 2 ] || g="0 0"
      export CUDA_INC=$(python3 -c "import nvidia, os; print(os.path.join(nvidia.__path__[0], \"cu13\", \"include\"))" 2>/dev/null)
      [ -d .llbase/kernels ] && export LL_BASE=.llbase
      "$nvcc" -O2 -o /tmp/ll_kernel perf/ll_kernel.cu -lcuda -lnvrtc && /tmp/ll_kernel 20000 5 $g' ;;
    spans) run bash perf/op_spans.sh ;;
    eff) run bash perf/gpu_copy_efficiency.sh ;;
    kc) tar czf "$out/kc.tgz" -C "$RNCCL_KERNEL_CACHE" . && ls -la "$out/kc.tgz" >"$out/kc.txt" 2>&1 ;;
    *) echo "device_phases.sh: unknown phase '$phase' (see the list at the top)" >"$out/$phase.txt"; false ;;
  esac
  echo "phase $phase: rc $? in $((SECONDS - start)) s (limit $limit s)"
done
for phase in "${names[@]}"; do
  echo "=== $phase"
  tail -"${TAILN:-40}" "$out/$phase.txt"
done
[ -d "$logs" ] && tar czf "$out/logs.tgz" -C "$logs" . --exclude=kernel-cache --exclude='*.so*' 2>/dev/null
echo "total $((SECONDS - t0)) s"
