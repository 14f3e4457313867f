#!/usr/bin/env bash
# Programs built against NCCL, run on rnccl's libnccl.so.2 beside NCCL on the GPUs of one host
# (issue 12's acceptance), in one run, with no recompilation:
#   1. nccl-tests built once from .nccl-tests/ against NCCL 2.28.9 (PyTorch's nvidia-nccl-cu13
#      wheel: its nccl.h and nccl_device.h; nccl-tests 2.19 compiles NCCL's header-only device
#      API when the header says 2.28, which rnccl's nccl.h does not provide), then run on NCCL
#      and on rnccl by LD_LIBRARY_PATH alone; each test with `-g 2` (`-g 1` on a one-GPU host) `-b 8 -e 1G -f 4 -c 1`, plain,
#      `-G 1` (graphs), `-R 1` and `-R 2` (registration), NCCL then rnccl, printing #wrong and
#      the busbw ratio per size; the library each run loaded is checked by its version banner;
#   2. PyTorch under torch.distributed.run with 2 processes (1 on a one-GPU host) (perf/torch_check.py): collectives,
#      200 DDP steps and an FSDP2 step on NCCL, then with rnccl preloaded, comparing results,
#      per-step losses and the DDP wall time.
#
#   here:  perf/gpu_build.sh && perf/gpu_vs_nccl.sh --prepare <nccl-tests checkout>
#   there: perf/capi_acceptance.sh   (carry .devbin and .nccl-tests; knobs TESTS (empty: none),
#          MODES (plain G1 R1 R2, Dall: every data type, `-d all`, and DallG1 / DallR2: every
#          data type with graphs / registration), MAXBYTES, ITERS (nccl-tests' -n), GPUS,
#          LIBS ("nccl rnccl"; "rnccl" alone checks results without the ratio), RUN_LIMIT
#          seconds per program run, TORCH=0 skips PyTorch, NONBLOCKING=0 skips the rnccl run
#          with TORCH_NCCL_USE_COMM_NONBLOCKING=1)
#
# NVLink multicast stays off everywhere (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-capi-out}
mkdir -p "$out"
limit=${RUN_LIMIT:-120}
# Two GPUs (one rank each) where the host has them; on a one-GPU host, one rank: the ABI, graphs
# and registration are still exercised, the speed comparison is not.
gpus=${GPUS:-$(( $(nvidia-smi -L | wc -l) >= 2 ? 2 : 1 ))}
[ -f .devbin/libnccl.so ] || { echo "capi_acceptance.sh: .devbin/libnccl.so is missing: run perf/gpu_build.sh" >&2; exit 2; }
[ -d .nccl-tests/src ] || { echo "capi_acceptance.sh: .nccl-tests is missing: perf/gpu_vs_nccl.sh --prepare <checkout>" >&2; exit 2; }
for d in /usr/local/cuda/lib64 "$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null)"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export RNCCL_KERNEL_CACHE="${RNCCL_KERNEL_CACHE:-$out/kernel-cache}"  # a shared one when set
base_ld=$LD_LIBRARY_PATH
# NCCL's home (the wheel), and rnccl's library under NCCL's soname.
wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
nh=/tmp/nccl-home rh=/tmp/rnccl-home
rm -rf $nh $rh && mkdir -p $nh/lib $rh/lib
ln -s "$wheel/include" $nh/include
for f in "$wheel"/lib/libnccl.so*; do ln -s "$f" $nh/lib/; done
[ -e $nh/lib/libnccl.so ] || ln -s "$wheel/lib/libnccl.so.2" $nh/lib/libnccl.so
cp .devbin/libnccl.so $rh/lib/libnccl.so.2
# Only this machine's GPU architecture: nccl-tests builds six by default, which took two of a
# device call's ten minutes on a fresh H200 machine.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
[ -n "$cc" ] && export NVCC_GENCODE="-gencode=arch=compute_$cc,code=sm_$cc"
tests=${TESTS-"all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter hypercube"}
modes=${MODES:-"plain G1 R1 R2"}
if [ -n "$tests" ] && ! make -C .nccl-tests/src -j"$(nproc)" BUILDDIR=/tmp/nt NCCL_HOME=$nh CUDA_HOME=/usr/local/cuda >"$out/build.log" 2>&1; then
  echo "nccl-tests did not build against NCCL:"; tail -15 "$out/build.log"; exit 1
fi
for t in $tests; do
  for m in $modes; do
    flags=""; case $m in G1) flags="-G 1";; R1) flags="-R 1";; R2) flags="-R 2";; Dall) flags="-d all";;
      DallG1) flags="-d all -G 1";; DallR2) flags="-d all -R 2";; esac
    [ -n "${ITERS:-}" ] && flags="$flags -n $ITERS"
    for who in ${LIBS:-nccl rnccl}; do
      home=$nh; [ $who = rnccl ] && home=$rh
      LD_LIBRARY_PATH="$home/lib:$base_ld" NCCL_DEBUG=VERSION timeout "$limit" /tmp/nt/${t}_perf -g "$gpus" -b 8 -e "${MAXBYTES:-1G}" -f 4 -c 1 $flags \
        >"$out/$who.$t.$m.log" 2>&1
      echo "$?" >"$out/$who.$t.$m.rc"
    done
  done
done
# PyTorch: NCCL first, then rnccl preloaded (the wheel's RPATH would find NCCL otherwise).
torch_run() { # tag, extra env...
  local tag=$1; shift
  env "$@" timeout 600 python3 -m torch.distributed.run --nproc_per_node "$gpus" perf/torch_check.py "$out/torch.$tag.json" \
    >"$out/torch.$tag.log" 2>&1
  echo "$?" >"$out/torch.$tag.rc"
}
if [ "${TORCH:-1}" != 0 ]; then
  torch_run nccl
  torch_run rnccl LD_PRELOAD="$rh/lib/libnccl.so.2"
  # PyTorch's non-blocking communicators (ncclCommInitRankConfig with blocking = 0, then
  # ncclCommGetAsyncError polling), compared with the blocking rnccl run above.
  [ "${NONBLOCKING:-1}" != 0 ] && torch_run rnccl-nonblocking LD_PRELOAD="$rh/lib/libnccl.so.2" TORCH_NCCL_USE_COMM_NONBLOCKING=1
fi
python3 - "$out" "$tests" "$modes" "$gpus" "${LIBS:-nccl rnccl}" <<'PY'
import json, math, os, sys
out, tests, modes, world, libs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5].split()
sys.path.insert(0, "perf")
from bench_rows import result_rows
def table(path):
    rows, wrong, lines = {}, 0, 0
    for f in result_rows(path):
        # busbw, or algbw where busbw is 0 (a one-rank communicator moves nothing between
        # ranks, so only the local copy's speed compares).
        rows[int(f[0])] = float(f[7]) if float(f[7]) > 0 else float(f[6])
        for w in (f[8], f[12]):
            wrong += int(w) if w.isdigit() else 0
        lines += 1
    return rows, wrong, lines
print(f"{'test':<16}{'mode':<7}{'rc nccl/rnccl':>14}{'#wrong':>8}{'rows':>6}  busbw (algbw on one rank) rnccl/NCCL by size")
for t in tests:
    for m in modes:
        p = lambda who, ext: os.path.join(out, f"{who}.{t}.{m}.{ext}")
        rc = "/".join(open(p(w, "rc")).read().strip() if w in libs else "-" for w in ("nccl", "rnccl"))
        (a, wa, la) = table(p("rnccl", "log"))
        (b, wb, lb) = table(p("nccl", "log")) if "nccl" in libs else ({}, 0, 0)
        if "rnccl version" not in open(p("rnccl", "log"), errors="replace").read():
            rc += " (NOT rnccl: no rnccl version banner)"
        ratios = " ".join(f"{s}:{a[s] / b[s]:.2f}" for s in sorted(set(a) & set(b)) if b[s] > 0 and s >= 1 << 20)
        print(f"{t:<16}{m:<7}{rc:>14}{wa:>8}{la:>6}  {ratios or '(no table)'}")
def load(tag):
    try:
        return [json.load(open(os.path.join(out, f"torch.{tag}.rank{r}.json"))) for r in range(world)]
    except OSError as e:
        return str(e)
if not os.path.exists(os.path.join(out, "torch.nccl.rc")):
    sys.exit(0)  # TORCH=0: no PyTorch runs this time
n, r = load("nccl"), load("rnccl")
if isinstance(n, str) or isinstance(r, str):
    print(f"PyTorch: missing results (nccl: {'ok' if not isinstance(n, str) else n}; rnccl: {'ok' if not isinstance(r, str) else r})")
    sys.exit(0)
bad = []
for k in range(world):
    for name, v in n[k]["collectives"].items():
        w = r[k]["collectives"].get(name)
        tol = 1e-2 if "bfloat16" in name else 1e-5
        if w is None or len(w) != len(v) or any(abs(x - y) > tol * max(1.0, abs(x)) for x, y in zip(v, w)):
            bad.append(f"rank {k} {name}")
dl = max(abs(x - y) / max(1e-6, abs(x)) for x, y in zip(n[0]["ddp_losses"], r[0]["ddp_losses"]))
print(f"PyTorch collectives: {'all equal' if not bad else 'DIFFER: ' + ', '.join(bad)}")
print(f"DDP 200 steps: largest relative loss difference {dl:.2e}; wall time NCCL {n[0]['ddp_seconds']:.3f} s, rnccl {r[0]['ddp_seconds']:.3f} s ({r[0]['ddp_seconds'] / n[0]['ddp_seconds']:.3f}x)")
print(f"FSDP2 step loss: NCCL {n[0]['fsdp2_loss']:.6f}, rnccl {r[0]['fsdp2_loss']:.6f}")
nb = load("rnccl-nonblocking")
if os.path.exists(os.path.join(out, "torch.rnccl-nonblocking.rc")):
    if isinstance(nb, str):
        print(f"PyTorch with TORCH_NCCL_USE_COMM_NONBLOCKING=1 on rnccl: missing results ({nb})")
    else:
        same = all(nb[k]["collectives"] == r[k]["collectives"] for k in range(world))
        losses = nb[0]["ddp_losses"] == r[0]["ddp_losses"]
        print(f"PyTorch with TORCH_NCCL_USE_COMM_NONBLOCKING=1 on rnccl: collectives "
              f"{'equal to the blocking run' if same else 'DIFFER from the blocking run'}, DDP losses "
              f"{'identical' if losses else 'DIFFER'}")
PY
