#!/usr/bin/env bash
# Side-by-side CPU benchmark: rnccl vs Open MPI, 2 ranks, float32 all-reduce.
#
#   perf/cpu_vs_mpi.sh [shm] [tcp]        (both when no argument; tcp needs root)
#
# shm: one process per rank on this host; Open MPI with its shared-memory transport
#      (--mca pml ob1 --mca btl self,vader), rnccl with its shared-memory transport.
# tcp: one rank in each of two network namespaces joined by a veth pair (rnA 10.77.0.1,
#      rnB 10.77.0.2, as in ../shared/anchors/cpu/netns.sh); Open MPI over TCP, rnccl over
#      TCP, and iperf3 --bidir for the link's per-direction ceiling.
#
# The host is shared and noisy (memory bandwidth drifts by 2x between minutes), so the two
# sides are interleaved size by size for ROUNDS rounds (default 3) and every round prints the
# ratio measured in that round; the summary gives the best of each side and the median ratio.
# Needs: openmpi-bin libopenmpi-dev (mpicc.openmpi, mpirun.openmpi), iperf3, iproute2.
#
# BASELINE=/path/to/an/older/rnccl adds that build to every round, interleaved with the others,
# and a summary of this build against it (to show a change moved nothing, in one run).
# mpi_coll_bench.c is the project's MPI anchor benchmark (../shared/anchors/cpu); shm_handoff.c
# measures the host's own cross-process copy path in each round, as iperf3 does for TCP.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${ROUNDS:-3}
modes=${*:-shm tcp}
work=$(mktemp -d)
trap 'rm -rf "$work"; [ -n "${netns_up:-}" ] && netns_down' EXIT

mpicc.openmpi -O2 -o "$work/bench_ompi" "$here/mpi_coll_bench.c" -lm
cc -O2 -o "$work/shm_handoff" "$here/shm_handoff.c"
(cd "$root" && cargo build --release -q)
rnccl="$root/target/release/rnccl"
baseline=${BASELINE:-}
mpirun=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none)

# rnccl iterations per size so each point runs for a fraction of a second.
iters() { case $1 in 8) echo "20000 2000";; 1048576) echo "400 40";; 16777216) echo "40 5";; *) echo "5 2";; esac; }

# Prints "busbw time_us" of rnccl's out-of-place column.
rnccl_point() { # size [bench flags...] -- runs 2 local processes of $bin (default: this build)
  local s=$1; shift; read -r n w < <(iters "$s")
  "${bin:-$rnccl}" bench -b "$s" -e "$s" -n "$n" -w "$w" -c 0 --ranks 2 "$@" | awk '!/^#/ {print $8, $6}'
}

ompi_point() { # size mca...
  local s=$1; shift
  "${mpirun[@]}" -np 2 "$@" "$work/bench_ompi" -o allreduce -S "$s" -t 0.5 | awk '!/^#/ {print $6, $3}'
}

summary() { # file [name of the other side]
  python3 - "$1" "${2:-MPI}" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
other = sys.argv[2]
for line in open(sys.argv[1]):
    size, ours, theirs = line.split()
    rows[int(size)].append((float(ours), float(theirs)))
print(f"{'size':>10} {'rnccl best':>11} {other + ' best':>9} {'best/best':>9} {'median ratio':>12}  (busbw GB/s; 8 B row: time us, ratio {other}/rnccl)")
for size in sorted(rows):
    r = rows[size]
    if size == 8:
        ours, theirs = min(o for o, _ in r), min(t for _, t in r)
        print(f"{size:>10} {ours:>11.2f} {theirs:>9.2f} {'-':>9} {statistics.median(t / o for o, t in r):>12.2f}")
    else:
        ours, theirs = max(o for o, _ in r), max(t for _, t in r)
        print(f"{size:>10} {ours:>11.2f} {theirs:>9.2f} {ours / theirs:>9.2f} {statistics.median(o / t for o, t in r):>12.2f}")
PY
}

if [[ " $modes " == *" shm "* ]]; then
  echo "== shared memory, 2 processes, float32 all_reduce (busbw GB/s; time us)"
  : > "$work/shm"; : > "$work/shm_win"
  for round in $(seq "$rounds"); do
    # The machine's cross-core copy path drifts between modes minutes apart (a plain C slot
    # FIFO between two pinned processes has given 2 to 20 GB/s here): print it every round.
    printf 'round %d  shm_handoff probe (plain C slot FIFO, one way) %s GB/s\n' "$round" "$("$work/shm_handoff")"
    for s in 8 1048576 16777216 268435456; do
      read -r rb rt < <(rnccl_point "$s")
      read -r mb mt < <(ompi_point "$s" --mca pml ob1 --mca btl self,vader)
      # -R 2: the same benchmark on buffers from mem_alloc registered as windows.
      read -r wb wt < <(rnccl_point "$s" -R 2)
      if [ "$s" = 8 ]; then
        echo "$s $rt $mt" >> "$work/shm"; echo "$s $wt $mt" >> "$work/shm_win"
      else
        echo "$s $rb $mb" >> "$work/shm"; echo "$s $wb $mb" >> "$work/shm_win"
      fi
      printf 'round %d %10s  rnccl %8s GB/s %10s us | Open MPI %8s GB/s %10s us | rnccl -R 2 %8s GB/s %10s us\n' \
        "$round" "$s" "$rb" "$rt" "$mb" "$mt" "$wb" "$wt"
      if [ -n "$baseline" ]; then
        read -r bb bt < <(bin=$baseline rnccl_point "$s")
        read -r bwb bwt < <(bin=$baseline rnccl_point "$s" -R 2)
        if [ "$s" = 8 ]; then
          echo "$s $rt $bt" >> "$work/shm_base"; echo "$s $wt $bwt" >> "$work/shm_win_base"
          echo "$s $bt $mt" >> "$work/shm_base_mpi"
        else
          echo "$s $rb $bb" >> "$work/shm_base"; echo "$s $wb $bwb" >> "$work/shm_win_base"
          echo "$s $bb $mb" >> "$work/shm_base_mpi"
        fi
        printf 'round %d %10s  baseline %8s GB/s %10s us | baseline -R 2 %8s GB/s %10s us\n' \
          "$round" "$s" "$bb" "$bt" "$bwb" "$bwt"
      fi
    done
  done
  echo "-- rnccl on heap buffers (as the MPI benchmark's malloc) against Open MPI"
  summary "$work/shm"
  echo "-- rnccl -R 2 (mem_alloc buffers registered as windows) against Open MPI"
  summary "$work/shm_win"
  if [ -n "$baseline" ]; then
    echo "-- the baseline build on heap buffers against Open MPI"
    summary "$work/shm_base_mpi"
    echo "-- this build against the baseline, heap buffers"
    summary "$work/shm_base" base
    echo "-- this build against the baseline, -R 2"
    summary "$work/shm_win_base" base
  fi
fi

netns_up() {
  ip netns add rnA; ip netns add rnB; netns_up=1
  ip link add vethA type veth peer name vethB
  ip link set vethA netns rnA; ip link set vethB netns rnB
  ip -n rnA addr add 10.77.0.1/24 dev vethA; ip -n rnB addr add 10.77.0.2/24 dev vethB
  for ns in rnA rnB; do ip -n $ns link set lo up; done
  ip -n rnA link set vethA up; ip -n rnB link set vethB up
}
netns_down() { ip netns del rnA 2>/dev/null || true; ip netns del rnB 2>/dev/null || true; }

if [[ " $modes " == *" tcp "* ]]; then
  if [ "$(id -u)" != 0 ]; then echo "tcp: skipped (needs root for network namespaces)"; exit 0; fi
  netns_down; netns_up
  # mpirun runs in rnA and starts the remote daemon in rnB through this rsh agent.
  printf '#!/bin/sh\nshift\nexec ip netns exec rnB sh -c "$*"\n' > "$work/nsrsh"; chmod +x "$work/nsrsh"
  ompi_tcp() {
    ip netns exec rnA "${mpirun[@]}" -np 2 -H 10.77.0.1,10.77.0.2 --mca plm_rsh_agent "$work/nsrsh" \
      --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
      "$work/bench_ompi" -o allreduce -S "$1" -t 1 | awk '!/^#/ {print $6, $3}'
  }
  rnccl_tcp() { # size -- 2 ranks of $bin (default: this build), one per namespace
    local s=$1 port=$((29500 + RANDOM % 1000)); read -r n w < <(iters "$s")
    ip netns exec rnB env NCCL_HOSTID=B RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=$port \
      "${bin:-$rnccl}" bench -b "$s" -e "$s" -n "$n" -w "$w" -c 0 >/dev/null &
    ip netns exec rnA env NCCL_HOSTID=A RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=$port \
      "${bin:-$rnccl}" bench -b "$s" -e "$s" -n "$n" -w "$w" -c 0 | awk '!/^#/ {print $8, $6}'
    wait
  }
  iperf_bidir() { # [congestion control] -- per-direction GB/s (mean of the two directions)
    ip netns exec rnB iperf3 -s -1 -D >/dev/null; sleep 0.3
    ip netns exec rnA iperf3 -c 10.77.0.2 --bidir -t 5 ${1:+-C "$1"} -J | python3 -c '
import json,sys; d=json.load(sys.stdin)["end"]
print(round((d["sum_sent"]["bits_per_second"] + d["sum_sent_bidir_reverse"]["bits_per_second"]) / 2 / 8e9, 3))'
  }
  # rnccl's data sockets leave BBR for CUBIC (RNCCL_SOCKET_CC auto, src/transport/tcp/congestion.rs);
  # Open MPI's and iperf3's keep the kernel's default. So the wire is read both ways: with the
  # kernel's default (the bar's ceiling) and, where the default is a BBR, with CUBIC as well.
  default_cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
  echo "== TCP between two network namespaces (veth), 2 ranks, float32 all_reduce (busbw GB/s); kernel default congestion control $default_cc"
  : > "$work/tcp"; : > "$work/iperf"; : > "$work/iperf_cubic"
  for round in $(seq "$rounds"); do
    ib=$(iperf_bidir); echo "$ib" >> "$work/iperf"
    if [[ $default_cc == bbr* ]]; then
      ic=$(iperf_bidir cubic); echo "$ic" >> "$work/iperf_cubic"
      printf 'round %d  iperf3 --bidir -C cubic %s GB/s per direction (the wire with the congestion control rnccl picks)\n' "$round" "$ic"
    fi
    for s in 8 33554432 268435456; do
      read -r rb rt < <(rnccl_tcp "$s")
      read -r mb mt < <(ompi_tcp "$s")
      if [ "$s" = 8 ]; then echo "$s $rt $mt" >> "$work/tcp"; else echo "$s $rb $mb" >> "$work/tcp"; fi
      printf 'round %d %10s  rnccl %8s GB/s %10s us | Open MPI %8s GB/s %10s us | iperf3 bidir %s GB/s per direction\n' \
        "$round" "$s" "$rb" "$rt" "$mb" "$mt" "$ib"
      if [ -n "$baseline" ]; then
        read -r bb bt < <(bin=$baseline rnccl_tcp "$s")
        if [ "$s" = 8 ]; then echo "$s $rt $bt" >> "$work/tcp_base"; echo "$s $bt $mt" >> "$work/tcp_base_mpi"
        else echo "$s $rb $bb" >> "$work/tcp_base"; echo "$s $bb $mb" >> "$work/tcp_base_mpi"; fi
        printf 'round %d %10s  baseline %8s GB/s %10s us\n' "$round" "$s" "$bb" "$bt"
      fi
    done
  done
  summary "$work/tcp"
  if [ -n "$baseline" ]; then
    echo "-- the baseline build against Open MPI"
    summary "$work/tcp_base_mpi"
    echo "-- this build against the baseline"
    summary "$work/tcp_base" base
  fi
  python3 - "$work/tcp" "$work/iperf" "$work/iperf_cubic" <<'PY'
import sys, statistics
ours = [float(l.split()[1]) for l in open(sys.argv[1]) if int(l.split()[0]) >= 33554432]
for path, label in ((sys.argv[2], "iperf3 --bidir"), (sys.argv[3], "iperf3 --bidir -C cubic")):
    iperf = [float(x) for x in open(path)]
    if iperf:
        print(f"{label} per direction: best {max(iperf):.3f} GB/s, median {statistics.median(iperf):.3f}; "
              f"rnccl best busbw at >= 32 MiB = {max(ours) / max(iperf):.2f} of its best")
PY
fi
