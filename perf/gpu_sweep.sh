#!/usr/bin/env bash
# Channel count and FIFO size against bandwidth on the GPUs of one host: `rnccl bench` (one
# process driving every GPU, as nccl-tests -g) for each collective under each setting of
# NCCL_MIN_NCHANNELS / NCCL_BUFFSIZE, printing busbw per size. Used to choose rnccl's GPU
# defaults; compare with perf/gpu_vs_nccl.sh's NCCL columns on the same machine.
#
#   there: perf/gpu_sweep.sh      (carry .devbin; knobs: COLLS, SETTINGS, MINBYTES, MAXBYTES)
#
# A setting is `default` or NCCL knobs without the prefix, comma-joined (MIN_NCHANNELS=64,BUFFSIZE=8388608).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE=${RNCCL_KERNEL_CACHE:-/tmp/rnccl-kernel-cache}
gpus=$(nvidia-smi -L | wc -l)
colls=${COLLS:-"all_reduce all_gather broadcast"}
settings=${SETTINGS:-"default MIN_NCHANNELS=32 MIN_NCHANNELS=48 BUFFSIZE=8388608 BUFFSIZE=2097152"}
range="-b ${MINBYTES:-64M} -e ${MAXBYTES:-4G} -f 4"
printf '%-16s %-24s %s\n' collective setting "busbw GB/s per size ($range)"
for c in $colls; do
  for s in $settings; do
    env=()
    [ "$s" != default ] && IFS=, read -r -a env <<<"$s" && env=("${env[@]/#/NCCL_}")
    row=$(env "${env[@]}" timeout 120 .devbin/rnccl bench "$c" -g "$gpus" --ranks "$gpus" -n 10 -w 3 -c 0 $range 2>&1 \
      | awk '!/^#/ && NF >= 13 { printf "%s:%s ", $1, $8 }')
    printf '%-16s %-24s %s\n' "$c" "$s" "${row:-failed}"
  done
done
