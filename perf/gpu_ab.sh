#!/usr/bin/env bash
# Two rnccl builds side by side, interleaved in one run: every round runs `A bench ARGS…` and
# `B bench ARGS…`, each first in turn, and per size the median over rounds of each one's
# out-of-place time and B ÷ A (lower is better for B). For checking that a change costs nothing
# measurable (e.g. the kernels' operation tracking), on the same machine in the same call.
#
#   here:  perf/gpu_build.sh; cp <the old build's rnccl> .devbin/rnccl-base
#   there: perf/gpu_ab.sh .devbin/rnccl-base .devbin/rnccl all_reduce -b 8 -e 1M -f 4 -n 2000
#
# Knobs: ROUNDS (5; an even count runs each build first equally often). NVLink multicast stays
# off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
a=${1:?usage: perf/gpu_ab.sh A B bench-args…}
b=${2:?usage: perf/gpu_ab.sh A B bench-args…}
shift 2
export NCCL_NVLS_ENABLE=0
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
out=${OUT:-gpu-ab-out}
mkdir -p "$out"
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set
rounds=${ROUNDS:-5}
for r in $(seq 1 "$rounds"); do
  # A then B in odd rounds, B then A in even ones: whichever runs second in a round can read a
  # few percent faster (2026-12-04, one H200: B read 0.91-0.94x at sizes both ran alike).
  order="a b"; [ $((r % 2)) = 0 ] && order="b a"
  for which in $order; do
    bin=$a; [ $which = b ] && bin=$b
    timeout 300 "$bin" bench "$@" --format json >"$out/$which-$r.json" 2>"$out/$which-$r.err" \
      || { echo "$which round $r failed:"; tail -5 "$out/$which-$r.err"; }
  done
done
python3 - "$out" "$rounds" "$a" "$b" <<'EOF'
import json, statistics, sys
out, rounds, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
times = {"a": {}, "b": {}}
for which in times:
    for r in range(1, rounds + 1):
        try:
            d = json.load(open(f"{out}/{which}-{r}.json"))
        except (OSError, ValueError):
            continue
        for row in d["results"]:
            times[which].setdefault(row["size"], []).append(row["out_of_place"]["time"])
print(f"A = {a}, B = {b}; out-of-place time (us), median of {rounds} interleaved rounds")
print(f"{'size':>10} {'A':>9} {'B':>9} {'B/A':>6}")
for size in sorted(set(times["a"]) & set(times["b"])):
    ma, mb = statistics.median(times["a"][size]), statistics.median(times["b"][size])
    print(f"{size:>10} {ma:9.2f} {mb:9.2f} {mb / ma:6.3f}")
EOF
