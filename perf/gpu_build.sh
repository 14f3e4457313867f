#!/usr/bin/env bash
# Builds what perf/gpu_suite.sh and perf/capi_acceptance.sh run on a device machine: the release
# `rnccl` binary, rnccl's libnccl.so (capi/), the NCCL profiler plugin (profiler/) and the GPU test
# binaries, stripped, into .devbin/
# (ignored by git; carried with the device tool's `carry`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p rnccl-cli -p rnccl-capi -p rnccl-profiler
bins=$(cargo test --release --no-run --test gpu_collectives --test gpu_faults --message-format=json 2>/dev/null \
  | python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"].startswith("gpu_"):
        print(m["executable"])')
rm -rf .devbin && mkdir -p .devbin
cp target/release/rnccl .devbin/rnccl
cp target/release/libnccl.so .devbin/libnccl.so
# NCCL_PROFILER_PLUGIN=rnccl finds it under this name on the library path.
cp target/release/libnccl_profiler_rnccl.so .devbin/libnccl-profiler-rnccl.so
for b in $bins; do cp "$b" ".devbin/$(basename "$b")"; done
strip .devbin/*
excl="$(git rev-parse --git-common-dir)/info/exclude"; mkdir -p "$(dirname "$excl")"; grep -qx "/.devbin/" "$excl" 2>/dev/null || echo "/.devbin/" >>"$excl"
ls -la .devbin
