#!/usr/bin/env bash
# rnccl's 8-byte all-reduce between two ranks against its floor, interleaved in one run: the
# bare one-shot LL exchange of perf/ll_floor.cu (no tracking, counters, timeouts) and `rnccl
# bench all_reduce -b 8 -e 8 -g 2` (one thread, both ranks), launched back to back and inside
# CUDA graphs (`-G 1`, both timed on the graph's first launch, as nccl-tests does). Per mode, the
# median over rounds of each one's µs per operation and rnccl ÷ floor: what rnccl's own kernel
# and launch path add to what the hardware needs. Last, the floor's replays of an uploaded graph,
# which leave out the upload of the nodes' arguments that a first launch pays.
# On a one-GPU machine both ranks share GPU 0 (`--ranks 2`), each on its own stream.
#
#   here:  perf/gpu_build.sh
#   there: perf/ll_floor.sh        (ROUNDS=5, ITERS=20000)
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
out=${OUT:-ll-floor-out}
mkdir -p "$out"
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"
rnccl=${RNCCL:-.devbin/rnccl}
[ -x "$rnccl" ] || { echo "ll_floor.sh: $rnccl is missing: run perf/gpu_build.sh" >&2; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc" -O2 -arch=native -o /tmp/ll_floor perf/ll_floor.cu || exit 2
iters=${ITERS:-20000}
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpus" -ge 2 ]; then gpus="0 1"; layout="-g 2"; else gpus="0 0"; layout="-g 2 --ranks 2"; fi
echo "ranks on GPUs $gpus; rnccl bench $layout"
for r in $(seq 1 "${ROUNDS:-5}"); do
  /tmp/ll_floor "$iters" $gpus >"$out/floor-$r.txt" 2>&1 || { echo "floor round $r failed:"; tail -3 "$out/floor-$r.txt"; }
  for mode in launched graph; do
    g=""; [ $mode = graph ] && g="-G 1"
    # shellcheck disable=SC2086
    timeout 300 "$rnccl" bench all_reduce -b 8 -e 8 -n "$iters" -w 200 -c 1 $layout $g --format json \
      >"$out/rnccl-$mode-$r.json" 2>"$out/rnccl-$mode-$r.err" \
      || { echo "rnccl $mode round $r failed:"; tail -3 "$out/rnccl-$mode-$r.err"; }
  done
done
python3 - "$out" "${ROUNDS:-5}" <<'EOF'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
floor = {"launched": [], "graph": [], "replay": []}
rnccl = {"launched": [], "graph": []}
for r in range(1, rounds + 1):
    try:
        m = re.search(r"launched ([\d.]+) us/op, graph ([\d.]+) us/op, replay ([\d.]+) us/op",
                      open(f"{out}/floor-{r}.txt").read())
        if m:
            for k, key in enumerate(("launched", "graph", "replay")):
                floor[key].append(float(m.group(k + 1)))
    except OSError:
        pass
    for mode in rnccl:
        try:
            d = json.load(open(f"{out}/rnccl-{mode}-{r}.json"))
        except (OSError, ValueError):
            continue
        for row in d["results"]:
            rnccl[mode].append(row["out_of_place"]["time"])
            if row["out_of_place"].get("nwrong") not in (0, None):
                print(f"rnccl {mode} round {r}: WRONG results")
print(f"8-byte all-reduce, 2 ranks, us per operation, median of {rounds} interleaved rounds")
print(f"{'mode':>9} {'floor':>8} {'rnccl':>8} {'rnccl/floor':>12}")
for mode in ("launched", "graph"):
    if floor[mode] and rnccl[mode]:
        f, x = statistics.median(floor[mode]), statistics.median(rnccl[mode])
        print(f"{mode:>9} {f:8.2f} {x:8.2f} {x / f:12.2f}")
    else:
        print(f"{mode:>9} missing (floor {len(floor[mode])}, rnccl {len(rnccl[mode])} rounds)")
if floor["replay"]:
    print(f"{'replay':>9} {statistics.median(floor['replay']):8.2f}  (floor only: graphs uploaded)")
EOF
