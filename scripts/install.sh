#!/usr/bin/env bash
# Installs rnccl into a prefix: the `rnccl` command, the nccl.h drop-in (libnccl.so.2 with its
# libnccl.so link, and nccl.h), the NCCL profiler plugin, man pages and shell completions.
#
#   scripts/install.sh                      # into /usr/local (run as root)
#   scripts/install.sh --prefix ~/.local    # into your home
#
# Layout under PREFIX:
#   bin/rnccl
#   lib/libnccl.so.2, lib/libnccl.so -> libnccl.so.2, include/nccl.h
#   lib/libnccl-profiler-rnccl.so            (NCCL_PROFILER_PLUGIN=rnccl finds it on the library path)
#   share/man/man1/rnccl*.1
#   share/bash-completion/completions/rnccl, share/zsh/site-functions/_rnccl,
#   share/fish/vendor_completions.d/rnccl.fish
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a folder}; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (try --prefix DIR)" >&2; exit 2 ;;
  esac
done
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

cargo build --release --locked -p rnccl-cli -p rnccl-capi -p rnccl-profiler
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release

install -Dm755 "$target/rnccl" "$prefix/bin/rnccl"
install -Dm755 "$target/libnccl.so" "$prefix/lib/libnccl.so.2"
ln -sfn libnccl.so.2 "$prefix/lib/libnccl.so"
install -Dm644 capi/include/nccl.h "$prefix/include/nccl.h"
install -Dm755 "$target/libnccl_profiler_rnccl.so" "$prefix/lib/libnccl-profiler-rnccl.so"
mkdir -p "$prefix/share/man/man1"
"$prefix/bin/rnccl" man "$prefix/share/man/man1" >/dev/null
install -d "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
  "$prefix/share/fish/vendor_completions.d"
"$prefix/bin/rnccl" completions bash >"$prefix/share/bash-completion/completions/rnccl"
"$prefix/bin/rnccl" completions zsh >"$prefix/share/zsh/site-functions/_rnccl"
"$prefix/bin/rnccl" completions fish >"$prefix/share/fish/vendor_completions.d/rnccl.fish"

echo "installed rnccl $("$prefix/bin/rnccl" --version | cut -d' ' -f2) into $prefix"
case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "  add $prefix/bin to PATH" ;; esac
echo "  programs built against NCCL: cc ... -I$prefix/include -L$prefix/lib -lnccl, and run them with"
echo "  LD_LIBRARY_PATH=$prefix/lib (or ldconfig when $prefix/lib is a system library folder)"
