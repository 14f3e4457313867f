//! A C program built with `cc` against `include/nccl.h`, linked to the built `libnccl.so`:
//! the CPU-side calls work (`ncclResetDebugInit` turns the log on and off as the environment
//! changes), and creating a communicator on a host without CUDA fails with `ncclSystemError`
//! and a message saying why.

mod common;

use std::process::Command;

const PROGRAM: &str = r#"
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
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

  /* Parameters: the test runs this with NCCL_BUFFSIZE=1048576 and NCCL_ALGO=Ring. */
  ncclParamHandle_t buff = NULL, algo = NULL, unset = NULL;
  EXPECT(ncclParamBind(&buff, "NCCL_BUFFSIZE") == ncclSuccess && buff != NULL);
  int64_t i64 = 0;
  EXPECT(ncclParamGetI64(buff, &i64) == ncclSuccess && i64 == 1048576);
  uint32_t u32 = 0;
  EXPECT(pncclParamGetU32(buff, &u32) == ncclSuccess && u32 == 1048576);
  int8_t i8 = 7;
  EXPECT(ncclParamGetI8(buff, &i8) == ncclInvalidArgument && i8 == 7);
  const char* s = NULL;
  EXPECT(ncclParamGetStr(buff, &s) == ncclSuccess && strcmp(s, "1048576") == 0);
  unsigned char raw[32];
  int len = -1;
  EXPECT(ncclParamGet(buff, raw, sizeof raw, &len) == ncclSuccess && len == 8);
  memcpy(&i64, raw, sizeof i64);
  EXPECT(i64 == 1048576);
  EXPECT(ncclParamGet(buff, raw, 4, &len) == ncclInvalidArgument && len == 0);
  EXPECT(ncclParamBind(&algo, "NCCL_ALGO") == ncclSuccess);
  EXPECT(ncclParamGetStr(algo, &s) == ncclSuccess && strcmp(s, "Ring") == 0);
  EXPECT(ncclParamGetI64(algo, &i64) == ncclInvalidArgument);
  EXPECT(ncclParamGet(algo, raw, sizeof raw, &len) == ncclSuccess && len == 5 && strcmp((char*)raw, "Ring") == 0);
  EXPECT(ncclParamBind(&unset, "NCCL_IB_TIMEOUT") == ncclSuccess);
  EXPECT(ncclParamGetI32(unset, &version) == ncclSuccess && version == 20);
  int n = -1;
  EXPECT(ncclParamGetParameter("NCCL_BUFFSIZE", &s, &n) == ncclSuccess && strcmp(s, "1048576") == 0 && n == 7);
  EXPECT(ncclParamGetParameter("NCCL_BUFSIZE", &s, &n) == ncclInvalidArgument && s == NULL && n == 0);
  EXPECT(strstr(ncclGetLastError(NULL), "did you mean NCCL_BUFFSIZE") != NULL);
  EXPECT(ncclParamBind(&algo, "NCCL_NOT_A_KNOB") == ncclInvalidArgument);
  EXPECT(ncclParamBind(NULL, "NCCL_ALGO") == ncclInvalidArgument);
  EXPECT(ncclParamGetI64((ncclParamHandle_t)raw, &i64) == ncclInvalidArgument);
  const char** keys = NULL;
  int nkeys = 0, found = 0;
  EXPECT(ncclParamGetAllParameterKeys(&keys, &nkeys) == ncclSuccess && nkeys > 100);
  for (int k = 0; k < nkeys; k++) found += strcmp(keys[k], "NCCL_BUFFSIZE") == 0;
  EXPECT(found == 1);
  printf("param keys %d\n", nkeys);
  fflush(stdout);
  ncclParamDumpAll();
  fflush(stdout);

  /* ncclResetDebugInit reads the log's knobs again: NCCL_DEBUG is unset at the start (the
     failures above logged nothing), WARN into a file now, then VERSION (no warnings). */
  const char* logpath = getenv("RESET_LOG");
  EXPECT(logpath != NULL);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logpath, 1);
  ncclResetDebugInit();
  EXPECT(ncclCommCount(NULL, &version) == ncclInvalidArgument);
  setenv("NCCL_DEBUG", "VERSION", 1);
  pncclResetDebugInit();
  EXPECT(ncclCommUserRank(NULL, &version) == ncclInvalidArgument);
  FILE* log = fopen(logpath, "r");
  EXPECT(log != NULL);
  char text[8192];
  size_t got = fread(text, 1, sizeof text - 1, log);
  text[got] = 0;
  fclose(log);
  EXPECT(strstr(text, "ncclCommCount") != NULL);
  EXPECT(strstr(text, "ncclCommUserRank") == NULL);
  EXPECT(strstr(text, "ncclParamGetI8") == NULL);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_FILE");

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
    let out = common::run_ok(
        Command::new(&exe)
            .env_remove("NCCL_COMM_ID")
            .env_remove("NCCL_IB_TIMEOUT")
            .env_remove("NCCL_DEBUG")
            .env_remove("NCCL_DEBUG_FILE")
            .env("RESET_LOG", dir.join("reset.log"))
            .env("NCCL_BUFFSIZE", "1048576")
            .env("NCCL_ALGO", "Ring"),
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.contains("version 23007"), "{out}");
    assert!(out.contains("param keys "), "{out}");
    assert!(
        out.contains("\nNCCL_BUFFSIZE = 1048576 (set; default \"-2\")\n"),
        "{out}"
    );
    assert!(
        out.contains("\nNCCL_IB_TIMEOUT = 20 (default; default \"20\")\n"),
        "{out}"
    );
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
