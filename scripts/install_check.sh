#!/usr/bin/env bash
# Checks an install made by scripts/install.sh: every file in place, the command runs from the
# prefix, and a C program built against the prefix (-I PREFIX/include -L PREFIX/lib -lnccl) links
# and runs with the installed libnccl.so.2. `.ci/run` runs it on a fresh temporary prefix.
#
#   scripts/install_check.sh PREFIX
set -euo pipefail
prefix=${1:?usage: install_check.sh PREFIX}
fail() { echo "install_check: $*" >&2; exit 1; }
for f in bin/rnccl lib/libnccl.so.2 lib/libnccl.so include/nccl.h lib/libnccl-profiler-rnccl.so \
         share/man/man1/rnccl.1 share/man/man1/rnccl-bench.1 \
         share/bash-completion/completions/rnccl share/zsh/site-functions/_rnccl \
         share/fish/vendor_completions.d/rnccl.fish; do
  [ -e "$prefix/$f" ] || fail "$prefix/$f is missing"
done
[ "$(readlink "$prefix/lib/libnccl.so")" = libnccl.so.2 ] || fail "lib/libnccl.so does not link to libnccl.so.2"
soname=$(objdump -p "$prefix/lib/libnccl.so.2" | awk '/SONAME/ {print $2}')
[ "$soname" = libnccl.so.2 ] || fail "libnccl.so.2 has soname '$soname'"
env -i PATH="$prefix/bin:/usr/bin:/bin" rnccl --version >/dev/null || fail "rnccl does not run from $prefix/bin"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/prog.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <nccl.h>

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) {
    printf("ncclGetVersion gave %d, nccl.h says %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    printf("ncclGetUniqueId failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  if (ncclAllReduce(NULL, NULL, 1, ncclFloat, ncclSum, NULL, NULL) != ncclInvalidArgument) {
    printf("a null communicator was not refused\n");
    return 1;
  }
  printf("NCCL %d.%d.%d API from %s\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, "the installed libnccl.so.2");
  return 0;
}
C
cc -o "$work/prog" "$work/prog.c" -I"$prefix/include" -L"$prefix/lib" -lnccl
out=$(LD_LIBRARY_PATH="$prefix/lib" "$work/prog") || fail "the C program failed: $out"
# The program must have loaded the installed library, not another libnccl.so.2. ldd's output is
# kept before it is searched: `ldd | grep -q` under pipefail fails whenever grep stops reading
# before ldd has written its last line (ldd then dies of SIGPIPE, status 141).
libs=$(LD_LIBRARY_PATH="$prefix/lib" ldd "$work/prog") || fail "ldd cannot read $work/prog"
grep -qF "$prefix/lib/libnccl.so.2" <<<"$libs" \
  || fail "the C program does not load $prefix/lib/libnccl.so.2; ldd says:
$libs"
echo "install_check: $prefix is complete; $out"
