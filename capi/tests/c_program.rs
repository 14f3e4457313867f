//! A C program built with `cc` against `include/nccl.h`, linked to the built `libnccl.so`:
//! the CPU-side calls work, and creating a communicator on a host without CUDA fails with
//! `ncclSystemError` and a message saying why.

mod common;

use std::process::Command;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <string.h>
#include "nccl.h"

#define EXPECT(cond) do { if (!(cond)) { printf("FAILED line %d: %s\n", __LINE__, #cond); return 1; } } while (0)

int main(void) {
  int version = 0;
  EXPECT(ncclGetVersion(&version) == ncclSuccess);
  EXPECT(version == NCCL_VERSION_CODE);
  version = 0;
  EXPECT(pncclGetVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE);
  printf("version %d\n", version);
  EXPECT(strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)") == 0);

  ncclUniqueId a, b;
  EXPECT(ncclGetUniqueId(&a) == ncclSuccess);
  EXPECT(ncclGetUniqueId(&b) == ncclSuccess);
  EXPECT(memcmp(&a, &b, sizeof a) != 0);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, a, 0, &config);
  printf("init %d\n", (int)r);
  printf("last error: %s\n", ncclGetLastError(NULL));
  if (r == ncclSuccess) {
    EXPECT(ncclCommDestroy(comm) == ncclSuccess);
    return 0;
  }
  EXPECT(r == ncclSystemError);
  EXPECT(comm == NULL);

  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT(ncclCommInitRankConfig(&comm, 1, a, 0, &bad) == ncclInvalidArgument);
  EXPECT(ncclCommCount(NULL, &version) == ncclInvalidArgument);
  EXPECT(ncclAllReduce(NULL, NULL, 1, ncclFloat, ncclSum, NULL, NULL) == ncclInvalidArgument);
  EXPECT(ncclGroupEnd() == ncclInvalidUsage);
  printf("ok\n");
  return 0;
}
"#;

#[test]
fn c_program_links_and_gets_the_no_cuda_error() {
    let Some(cc) = common::cc() else {
        // CI installs a C compiler (.ci/run): there a missing one is a failure, not a pass.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no C compiler (cc) under CI"
        );
        eprintln!("SKIPPED: no C compiler (cc) on this host; the C program was not built");
        return;
    };
    let lib = common::library();
    let libdir = lib.parent().unwrap();
    let dir = libdir.join(format!("capi-c-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Link against this build's library only (the deps directory holds other libraries too).
    let so = dir.join("libnccl.so");
    let _ = std::fs::remove_file(&so);
    std::os::unix::fs::symlink(&lib, &so).unwrap();
    let src = dir.join("main.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("main");
    common::run_ok(
        Command::new(&cc)
            .args(["-std=c11", "-Wall", "-Werror", "-I"])
            .arg(common::include_dir())
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", dir.display()))
            .arg("-lnccl")
            .arg(format!("-Wl,-rpath,{}", dir.display())),
    );
    // The program needs the soname, libnccl.so.2, as programs built against NCCL do.
    let so2 = dir.join("libnccl.so.2");
    let _ = std::fs::remove_file(&so2);
    std::os::unix::fs::symlink(&lib, &so2).unwrap();
    let out = common::run_ok(Command::new(&exe).env_remove("NCCL_COMM_ID"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.contains("version 22809"), "{out}");
    if rnccl::gpus().is_ok() {
        eprintln!("this host has a GPU: the no-CUDA error was not checked\n{out}");
        return;
    }
    assert!(out.contains("init 2\n"), "{out}");
    assert!(
        out.contains("last error: ncclCommInitRankConfig: no usable GPU on this host"),
        "{out}"
    );
    assert!(out.contains("ok\n"), "{out}");
}
