// All-reduce, reduce-scatter and all-gather on buffers registered with ncclCommRegister, when
// every rank runs in its own process or thread (PyTorch, nccl-tests with MPI): the symmetric
// kernels (symmetric.cuh) load and store the peers' buffers in place where every rank's
// buffers are registered and mapped by its peers, and the direct kernel (direct.cuh) runs
// where not.
//
// No rank knows beforehand whether its peers' buffers of this operation are registered (each
// registers its own memory, when it likes), so the kernel finds out. Every direct kernel
// numbers itself on the communicator (RNCCL_KEY_WORD: every rank runs the same direct
// kernels in the same order, so the k-th is the same operation everywhere) and block 0 writes
// a record into every peer's direct area (RNCCL_REG_REC_OFF): a plain direct kernel the word
// 2k + 1 (not registered), this kernel its input and output as that peer maps them, then 2k.
// Block 0 here waits for every peer's record of kernel k: when every one carries addresses,
// every rank here got the same, and every block runs the symmetric kernel on the peers'
// buffers; when one says 2k + 1, that rank runs the direct kernel, and so does every block of
// every rank here. Block 0 hands the verdict and the peers' addresses to the other blocks
// through the state (RNCCL_VERDICT_WORD: 4k + 1 direct, 4k + 2 symmetric, 4k + 3 failed; the
// addresses from RNCCL_REG_PEERS_WORD).
//
// A record is overwritten by the peer's next direct kernel only after this one's block 0 read
// it: the peer's kernel k cannot end before block 0 here took part (its rounds, or its
// barrier), and kernel k + 1 starts after k on the peer's stream. The records also say that
// every peer reached the operation, which the symmetric kernels' entry barrier is for.
//
// Mirrored by src/device/cuda/abi.rs (the constants); change both together.
#pragma once

namespace rnccl {

// Word of LlArgs::state where block 0 posts the verdict of the running kernel.
#define RNCCL_VERDICT_WORD 3
// Word of LlArgs::state where block 0 leaves every rank's input (RNCCL_LL_MAX_RANKS words),
// then every rank's output, as mapped here, for the other blocks.
#define RNCCL_REG_PEERS_WORD (RNCCL_SYM_COUNT_WORD + RNCCL_SYM_BLOCKS)

#ifndef RNCCL_ABI_ONLY

// Verdicts (RNCCL_VERDICT_WORD minus 4k).
#define RNCCL_REG_DIRECT 1
#define RNCCL_REG_SYMMETRIC 2
#define RNCCL_REG_FAILED 3

// Thread 0 of block 0: writes this rank's records into every peer's area, collects the peers'
// records of kernel `key`, and posts the verdict and the peers' addresses into the state.
__device__ void reg_exchange(const LlArgs& a, u64 key) {
  const Program* P = &a.ctl;
  const u32 n = a.nranks, me = P->rank;
  u64* words = (u64*)a.state;
  for (u32 j = 1; j < n; j++) {
    const u32 r = (me + j) % n;
    u64* rec = reg_record(a.out[r]);
    st_volatile(rec, a.peer_src[r]);
    st_volatile(rec + 1, a.peer_dst[r]);
  }
  fence_release_sys();
  for (u32 j = 1; j < n; j++) st_volatile(reg_record(a.out[(me + j) % n]) + 2, 2 * key);
  u64 verdict = RNCCL_REG_SYMMETRIC;
  for (u32 j = 1; j < n; j++) {
    const u32 r = (me + j) % n;
    const u64* rec = reg_record(a.in[r]);
    const int st = wait_at_least(rec + 2, 2 * key, P, (u64*)a.in_live[r] + 2);
    if (st != ST_OK) {
      Conn c = {};
      c.peer = r;
      report(P, st, 0, c, 2 * key, 1);
      verdict = RNCCL_REG_FAILED;
      break;
    }
    if (ld_volatile(rec + 2) & 1) {
      verdict = RNCCL_REG_DIRECT;
    } else {
      st_volatile(words + RNCCL_REG_PEERS_WORD + r, ld_volatile(rec));
      st_volatile(words + RNCCL_REG_PEERS_WORD + RNCCL_LL_MAX_RANKS + r, ld_volatile(rec + 1));
    }
  }
  __threadfence();
  st_volatile(words + RNCCL_VERDICT_WORD, 4 * key + verdict);
}

// A kernel whose buffers this rank registered with every peer: LlArgs::peer_src / peer_dst
// say where each peer maps them, reg_blocks and reg_unit are the symmetric plan,
// direct_blocks and unit the direct plan (the launch runs the larger count of blocks).
template <typename T, int OP>
__device__ void reg_run(const LlArgs& a, u64 key) {
  __shared__ u64 srcs[RNCCL_LL_MAX_RANKS], dsts[RNCCL_LL_MAX_RANKS];
  __shared__ u64 verdict;
  const u32 tid = threadIdx.x, b = blockIdx.x, me = a.ctl.rank;
  const u64* words = (const u64*)a.state;
  if (tid == 0) {
    if (b == 0) reg_exchange(a, key);
    // Block 0 is resident (the launch keeps every block resident), so this ends.
    const int st = wait_at_least(words + RNCCL_VERDICT_WORD, 4 * key + 1, &a.ctl, (u64*)0);
    verdict = st == ST_OK ? ld_volatile(words + RNCCL_VERDICT_WORD) - 4 * key : RNCCL_REG_FAILED;
    for (u32 r = 0; r < a.nranks; r++) {
      srcs[r] = r == me ? a.src : ld_volatile(words + RNCCL_REG_PEERS_WORD + r);
      const u64* out = words + RNCCL_REG_PEERS_WORD + RNCCL_LL_MAX_RANKS;
      dsts[r] = r == me ? a.dst : ld_volatile(out + r);
    }
  }
  __syncthreads();
  if (verdict == RNCCL_REG_DIRECT) {
    direct_run<T, OP>(a, key, true);
  } else {
    // A failed exchange (reported, the abort raised) runs no block's work. The symmetric
    // modes follow the direct ones in the same order (DirectMode).
    const bool ok = verdict == RNCCL_REG_SYMMETRIC;
    sym_run<T, OP>(a, a.mode + DIRECT_SYM_ALL_REDUCE, srcs, dsts, a.reg_unit,
                   ok && b < a.reg_blocks, false, key);
  }
}

#endif  // RNCCL_ABI_ONLY

}  // namespace rnccl
