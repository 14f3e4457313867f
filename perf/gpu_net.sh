#!/usr/bin/env bash
# GPU ranks on two "hosts" over TCP, on one GPU machine: two network namespaces joined by a veth
# pair, one `rnccl bench` process in each with its own NCCL_HOSTID, rank 0 on GPU 0 and rank 1
# on GPU 1 (GPU 0 again on a one-GPU machine). The ranks see different hosts, so their GPU
# connections go through pinned host FIFOs and the proxy thread's sockets over the veth
# (src/transport/gpu_net.rs) instead of P2P or shared memory. Needs root (namespaces) and the
# binaries of perf/gpu_build.sh in .devbin/. Extra arguments go to `rnccl bench`; SIZES
# replaces the size flags.
#
#   perf/gpu_net.sh                       # all_reduce -b 8 -e 1G -f 32; logs under $OUT
#   NSOCKS=4 perf/gpu_net.sh -n 10        # NCCL_NSOCKS_PERTHREAD for the data sockets
#   SIZES="-b 1M -e 1M" perf/gpu_net.sh -c 1
#
# The namespaces are deleted on exit, whatever happens. NVLink multicast stays off.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
out=${OUT:-gpu-net-out}
mkdir -p "$out"
if [ "$(id -u)" != 0 ]; then
  echo "gpu_net.sh: needs root to create network namespaces" >&2
  exit 2
fi
if [ ! -x .devbin/rnccl ]; then
  echo "gpu_net.sh: .devbin/rnccl is missing: run perf/gpu_build.sh on the build machine" >&2
  exit 2
fi
# Without iproute2 (some device machines lack it) the two "hosts" share the loopback
# interface instead of a veth pair: NCCL_HOSTID still makes them different hosts, so the GPU
# connections take the same proxy-and-socket path; only the namespaces are missing.
netns=1
command -v ip >/dev/null || { echo "# gpu_net.sh: no iproute2 (ip): both ranks on loopback, own NCCL_HOSTID each"; netns=0; }
# NVRTC: the toolkit's, else the pip wheel beside PyTorch.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set

id=$$
ns=("rnccl-gnet-$id-a" "rnccl-gnet-$id-b")
net=$((10 + id % 200))
addr=("10.231.$net.1" "10.231.$net.2")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ $netns = 0 ]; then
  ns=()
  addr=(127.0.0.1 127.0.0.1)
  ifname==lo
else
  ifname==rnv0
  for n in "${ns[@]}"; do
    ip netns add "$n" && ip -n "$n" link set lo up || exit 1
  done
  ip link add rnv0 netns "${ns[0]}" type veth peer name rnv0 netns "${ns[1]}" || exit 1
  for i in 0 1; do
    ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev rnv0 &&
      ip -n "${ns[$i]}" link set rnv0 up || exit 1
  done
fi
if [ $netns = 1 ] && command -v ping >/dev/null; then
  ip netns exec "${ns[0]}" ping -c 1 -W 2 "${addr[1]}" >/dev/null ||
    { echo "gpu_net.sh: the veth pair does not pass traffic" >&2; exit 1; }
fi

nvidia-smi -L 2>&1 | tee "$out/gpus.txt"
port=$((29500 + id % 1000))
read -r -a sizes <<<"${SIZES:--b 8 -e 1G -f 32}"
args=(bench all_reduce "${sizes[@]}" -T 120 "$@")
echo "# rnccl ${args[*]} : rank 0 in ${ns[0]:-the root namespace} (${addr[0]}), rank 1 in ${ns[1]:-the root namespace} (${addr[1]})"
t0=$SECONDS
for r in 0 1; do
  # What a launcher (torchrun) would set: rank, size, local rank (= the GPU), rendezvous.
  inns=()
  [ $netns = 1 ] && inns=(ip netns exec "${ns[$r]}")
  "${inns[@]}" env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
    MASTER_ADDR="${addr[0]}" MASTER_PORT=$port NCCL_HOSTID="gpu-net-host-$r" \
    NCCL_SOCKET_IFNAME=$ifname ${NSOCKS:+NCCL_NSOCKS_PERTHREAD=$NSOCKS} \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
    timeout 900 .devbin/rnccl "${args[@]}" >"$out/rank$r.out" 2>"$out/rank$r.err" &
  pids+=($!)
done
fail=0
for r in 0 1; do
  wait "${pids[$r]}"; rc=$?
  [ "$rc" = 0 ] || { echo "rank $r FAILED (exit $rc); last lines of its stderr:"; tail -20 "$out/rank$r.err"; fail=1; }
done
pids=()
cat "$out/rank0.out"
echo "# wall time $((SECONDS - t0)) s"
# The connections must have gone over the network, not through memory.
grep -h "NET/Socket/GPU" "$out"/rank*.err | head -4
if ! grep -q "NET/Socket/GPU" "$out/rank0.err"; then
  echo "gpu_net.sh: rank 0 logged no GPU connection over NET/Socket: did the ranks run on GPUs and see two hosts?" >&2
  fail=1
fi
if ! grep -q "# Out of bounds values : 0 OK" "$out/rank0.out"; then
  echo "gpu_net.sh: wrong values or no table (see $out/rank0.out)" >&2
  fail=1
fi
exit $fail
