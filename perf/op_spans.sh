#!/usr/bin/env bash
# Where an all-reduce's time per operation goes on the GPU, for the direct kernel (ranks that
# share no group: one thread per rank, `--threads -g 1`) and the symmetric one (one thread
# driving every rank, `-g N`): a build of rnccl whose kernels stamp each operation's start and
# end with %globaltimer (perf/op_spans.py) runs `rnccl bench`, and per run the table gives the
# GPU's medians over 155 operations in a row: start to start (the time per operation the GPU
# sees), span (block 0's start to the last block's end), gap (one operation's end to the next
# one's start on the same rank: launch latency, or the host not keeping up), and the skew
# between the ranks' starts. Beside them the uninstrumented build's own time for the same flags.
# Where start to start exceeds span + about 1.6 µs (the gap in a CUDA graph), the host's
# launches set the pace, not the kernel.
#
#   here:  perf/gpu_build.sh; perf/op_spans.sh --build      (adds .devbin/rnccl-op-spans; the
#          kernels are restored after the build, and the next cargo build rebuilds target/)
#   there: perf/op_spans.sh                                   (carry .devbin)
#
# Knobs: SIZES (bench sizes, "1M 8M"), MODES ("threads group"), ITERS (300: at least 256, the
# stamps print at every 256th operation). Two ranks; on a machine of one GPU both share GPU 0
# (CUDA_VISIBLE_DEVICES=0) and one clock, which the skew needs.
#
# One H200, 2026-12-04 (main 3eb7520), µs: the symmetric kernel (`-g 2`) at 1 MB spans 6.4, and
# runs 7.9 start to start in a graph but 12.9 launched (the one thread's two launches are the
# pace); at 8 MB 10.5 / 12.3 / 13.7. The direct kernel (`--threads`) at 1 MB spans 10.1 and
# runs 11.9 start to start in a graph, 13.1 launched; at 8 MB 19.5 / 21.6 / 23.4. The bench's
# `-G 1 -n 20` time at 1 MB read 12.3 (symmetric) against the GPU's 7.9: with 20 operations per
# graph the graph's launch and the final synchronisation add about 4 µs to each. A build that
# timed its cuLaunchKernel calls (2000 operations, `-g 2`) found them 4.2-4.3 µs of the
# 4.3-4.8 µs the host spent per rank and operation: rnccl's own launch path costs 0.1-0.5 µs,
# so `-g N` at 8 B is N launches of the driver; perf/launch_floor.cu's last line is what one
# stream's wait for another costs instead (0.49 µs on one H200, same GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --build ]; then
  set -e
  keep=$(mktemp -d)
  cp kernels/direct.cuh kernels/symmetric.cuh "$keep/"
  trap 'cp "$keep/direct.cuh" "$keep/symmetric.cuh" kernels/; rm -rf "$keep"' EXIT
  python3 perf/op_spans.py
  cargo build --release -p rnccl-cli
  mkdir -p .devbin
  cp target/release/rnccl .devbin/rnccl-op-spans
  strip .devbin/rnccl-op-spans
  exit 0
fi
[ -x .devbin/rnccl-op-spans ] || { echo "perf/op_spans.sh: run perf/op_spans.sh --build here first" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -le 1 ] && export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
out=${OUT:-op-spans-out}
mkdir -p "$out"
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"
iters=${ITERS:-300}
for mode in ${MODES:-threads group}; do
  case $mode in
    threads) flags="-g 1 --ranks 2 --threads" ;;
    group) flags="-g 2 --ranks 2" ;;
    *) echo "perf/op_spans.sh: MODES takes threads and group, not $mode" >&2; exit 2 ;;
  esac
  for size in ${SIZES:-1M 8M}; do
    for graph in launch graph; do
      extra=""; [ $graph = graph ] && extra="-G 1"
      run="$mode-$size-$graph"
      for bin in rnccl-op-spans rnccl; do
        timeout 120 ".devbin/$bin" bench all_reduce $flags -n "$iters" -w 2 -c 0 $extra -b "$size" -e "$size" \
          >"$out/$run.$bin.log" 2>&1 || echo "$run $bin: rc $?"
      done
    done
  done
done
python3 - "$out" <<'PY'
import glob, os, statistics as st, sys
sys.path.insert(0, "perf")
from bench_rows import result_rows
out = sys.argv[1]
def bench_us(path):
    rows = result_rows(path)
    return rows[0][5] if rows else "-"
print("all_reduce, medians in µs: GPU start to start, span, gap, rank skew; bench = uninstrumented")
print(f"{'run':>20} {'bench':>8} {'start>start':>11} {'span':>7} {'gap':>7} {'skew':>7}")
for path in sorted(glob.glob(f"{out}/*.rnccl-op-spans.log")):
    run = os.path.basename(path).split(".")[0]
    ops = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if line.startswith("OP ") and len(f) == 8:
            ops[(int(f[1][1:]), int(f[2][1:]))] = (int(f[5]), int(f[7]))
    step, span, gap, skew = [], [], [], []
    for (r, i), (s0, e0) in ops.items():
        span.append(e0 - s0)
        if (r, i + 1) in ops:
            step.append(ops[(r, i + 1)][0] - s0)
            gap.append(ops[(r, i + 1)][0] - e0)
        if r == 0 and (1, i) in ops:
            skew.append(ops[(1, i)][0] - s0)
    med = lambda v: f"{st.median(v) / 1000:.2f}" if v else "-"
    plain = bench_us(path.replace(".rnccl-op-spans.log", ".rnccl.log"))
    print(f"{run:>20} {plain:>8} {med(step):>11} {med(span):>7} {med(gap):>7} {med(skew):>7}")
PY
