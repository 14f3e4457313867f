#!/usr/bin/env bash
# What `rnccl top` and `rnccl status` say about a GPU job, beside the job's own measurement:
#   1. rnccl bench all_reduce on every GPU (256 MiB back to back), `rnccl top --once` and
#      `rnccl status --format json` while it runs: top's busbw against bench's, the links' paths;
#   2. nccl-tests all_reduce_perf on NVIDIA NCCL with rnccl's profiler plugin, the same;
#   3. host_hash of `rnccl topo --format xml` against NCCL's NCCL_TOPO_DUMP_FILE on this host,
#      and with NCCL_HOSTID set (a vector for the unit test).
#
#   here:  perf/gpu_build.sh && perf/gpu_vs_nccl.sh --prepare <nccl-tests checkout>
#   there: perf/top_vs_job.sh     (carry .devbin and .nccl-tests; knobs BYTES, ITERS)
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-top-vs-job-out}
mkdir -p "$out"
bytes=${BYTES:-256M}
iters=${ITERS:-20000}
gpus=$(nvidia-smi -L | wc -l)
wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
nh=/tmp/nccl-home
rm -rf $nh && mkdir -p $nh/lib && ln -s "$wheel/include" $nh/include
for f in "$wheel"/lib/libnccl.so*; do ln -s "$f" $nh/lib/; done
[ -e $nh/lib/libnccl.so ] || ln -s "$wheel/lib/libnccl.so.2" $nh/lib/libnccl.so
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
export NVCC_GENCODE="-gencode=arch=compute_$cc,code=sm_$cc"
make -C .nccl-tests/src -j"$(nproc)" BUILDDIR=/tmp/nt NCCL_HOME=$nh CUDA_HOME=/usr/local/cuda >"$out/build.log" 2>&1 &
build=$!

# Waits for every page of processes under $1 (pid) and for the job to run, samples top and status.
sample() {
  local parent=$1 tag=$2 n=0
  for _ in $(seq 300); do
    n=$(ls /dev/shm/rnccl-stats-* 2>/dev/null | grep -vc '\.tmp$')
    [ "$n" -ge "$3" ] && break
    sleep 0.1
  done
  # rnccl's job: past the first start (NVRTC compiles the kernels on a fresh machine) and the
  # warmup, it has begun operation 100. NCCL's job (no status service) runs at once.
  [ "$tag" = rnccl ] && for _ in $(seq 120); do
    .devbin/rnccl status --format json 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(c.get("max_started", 0) >= 100 for c in json.load(sys.stdin)) else 1)' && break
    sleep 0.5
  done
  sleep 1
  COLUMNS=160 LINES=40 .devbin/rnccl top --once --interval 3000 >"$out/$tag.top" 2>&1
  .devbin/rnccl status --format json >"$out/$tag.status.json" 2>"$out/$tag.status.err"
}
busbw_of_top() { grep -o 'busbw [0-9.]* GB/s' "$1" | head -1 | awk '{print $2}'; }

# 1. rnccl GPU ranks.
.devbin/rnccl bench -b "$bytes" -e "$bytes" -w 20 -n "$iters" -c 0 >"$out/rnccl.bench" 2>&1 &
job=$!
sample $job rnccl "$gpus"
wait $job; rc_r=$?
r_bench=$(awk -F: '/Avg bus bandwidth/ {print $2}' "$out/rnccl.bench" | awk '{print $1}')
r_top=$(busbw_of_top "$out/rnccl.top")
r_paths=$(grep -o '"transport": *"[A-Za-z0-9]*"' "$out/rnccl.status.json" | sort | uniq -c | tr -s ' ' | paste -sd';')
r_toppaths=$(grep -oE 'P2P/IPC|SHM/host|SHM|NET/Socket|NET/IB|P2P/direct' "$out/rnccl.top" | sort | uniq -c | tr -s ' ' | paste -sd';')
r_self=$(python3 - "$out/rnccl.status.json" <<'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"unreadable ({e})"); sys.exit()
self_links = 0
for comm in doc:
    for rank, l in comm.get("slowest_links", []):
        self_links += l.get("peer") == rank
print(self_links)
PY
)

# 2. NVIDIA NCCL with the profiler plugin (and its topology dump).
wait $build || { echo "nccl-tests did not build:"; tail -15 "$out/build.log"; }
LD_LIBRARY_PATH="$nh/lib:$LD_LIBRARY_PATH" NCCL_PROFILER_PLUGIN="$PWD/.devbin/libnccl-profiler-rnccl.so" \
  NCCL_TOPO_DUMP_FILE="$out/nccl_topo.xml" timeout 300 /tmp/nt/all_reduce_perf -g "$gpus" \
  -b "$bytes" -e "$bytes" -w 20 -n "$iters" -c 0 >"$out/nccl.log" 2>&1 &
job=$!
sample $job nccl 1
wait $job; rc_n=$?
n_bench=$(awk -F: '/Avg bus bandwidth/ {print $2}' "$out/nccl.log" | awk '{print $1}')
n_top=$(busbw_of_top "$out/nccl.top")
NCCL_HOSTID=rnccl-hash-vector LD_LIBRARY_PATH="$nh/lib:$LD_LIBRARY_PATH" NCCL_TOPO_DUMP_FILE="$out/nccl_topo_hostid.xml" \
  timeout 60 /tmp/nt/all_reduce_perf -g 1 -b 8 -e 8 -n 1 -w 0 >"$out/nccl_hostid.log" 2>&1

# 3. host_hash.
.devbin/rnccl topo --format xml >"$out/rnccl_topo.xml" 2>&1
NCCL_HOSTID=rnccl-hash-vector .devbin/rnccl topo --format xml >"$out/rnccl_topo_hostid.xml" 2>&1
hh() { grep -o 'host_hash="[^"]*"' "$1" 2>/dev/null | head -1 | cut -d'"' -f2; }
same_xml=$(diff <(sed 's/host_hash="[^"]*"//' "$out/nccl_topo.xml") <(sed 's/host_hash="[^"]*"//' "$out/rnccl_topo.xml") >/dev/null && echo same || echo differs)

echo "--- rnccl top, rnccl GPU job:"; grep -v '^│ *│$' "$out/rnccl.top" | head -30
echo "--- rnccl top, NCCL job:"; grep -v '^│ *│$' "$out/nccl.top" | head -30
echo "--- status (rnccl job) stderr:"; head -3 "$out/rnccl.status.err"
echo
echo "gpus $gpus, $bytes all_reduce, -n $iters"
printf "%-28s %10s %10s %8s\n" job "own busbw" "top busbw" "top/own"
ratio() { python3 -c "import sys; a,b=sys.argv[1:]; print(f'{float(b)/float(a):.3f}' if a and b else '-')" "$1" "$2" 2>/dev/null || echo -; }
printf "%-28s %10s %10s %8s\n" "rnccl bench (rc $rc_r)" "${r_bench:--}" "${r_top:--}" "$(ratio "$r_bench" "$r_top")"
printf "%-28s %10s %10s %8s\n" "nccl-tests+plugin (rc $rc_n)" "${n_bench:--}" "${n_top:--}" "$(ratio "$n_bench" "$n_top")"
echo "rnccl job's links by path: top ${r_toppaths:-none}; status json ${r_paths:-none}; self links in status: $r_self"
echo "host_hash: NCCL $(hh "$out/nccl_topo.xml"), rnccl $(hh "$out/rnccl_topo.xml"); rest of the XML: $same_xml"
echo "host_hash with NCCL_HOSTID=rnccl-hash-vector: NCCL $(hh "$out/nccl_topo_hostid.xml"), rnccl $(hh "$out/rnccl_topo_hostid.xml")"
