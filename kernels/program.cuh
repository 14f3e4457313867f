// The device program: one collective (or a group's fused point-to-point operations) as the
// host's plan (src/coll/) lays it out — per lane, the ordered steps — with every buffer already
// resolved to a device address and every connection to its FIFO. Mirrored by
// src/device/cuda/abi.rs, whose test checks every size, offset and code; change both together.
//
// Memory layout, all in one region the kernel reads (device memory, copied from pinned host
// staging): [Program][Lane × nlanes][Conn × nconns][Step × nsteps]. The lanes always start at
// RNCCL_LANES_AT, right after the header, so a block reads its lane and the header at once.
#pragma once

namespace rnccl {

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

// Slots per connection FIFO (NCCL_STEPS; src/conn.rs NSLOTS).
#define RNCCL_NSLOTS 8
// No connection.
#define RNCCL_NO_CONN 0xffff

// What a step does (src/coll/step.rs `Op`, same order).
enum StepOp {
  OP_COPY = 0,
  OP_SEND = 1,
  OP_COPY_SEND = 2,
  OP_RECV = 3,
  OP_RECV_COPY_SEND = 4,
  OP_RECV_REDUCE_SEND = 5,
  OP_RECV_REDUCE_COPY = 6,
  OP_RECV_REDUCE_COPY_SEND = 7,
  OP_EXCHANGE = 8,
};

// Step flags.
#define RNCCL_STEP_PRE 1
#define RNCCL_STEP_POST 2

// One step: `bytes` bytes from `src` and/or into `dst` (device addresses; 0 where the op has
// none), sending on connection `send` and receiving on `recv` (indices into the conns, or
// RNCCL_NO_CONN).
struct Step {
  u64 src;
  u64 dst;
  u64 bytes;
  u16 send;
  u16 recv;
  u8 op;
  u8 flags;
  u16 pad;
};
static_assert(sizeof(Step) == 32, "Step layout");

// One end of a connection as this rank sees it. FIFO memory (`fifo`, `sizes`, `tail`) lives
// with the receiver; `head` lives with the sender. A sender writes slot `s % NSLOTS`, stores its
// byte count in `sizes`, then `tail = s + 1`; a receiver reads it once `tail > s`, then stores
// `head = s + 1` so the sender may reuse the slot. `step` is this end's persistent count of
// slots moved (NCCL's conn->step), in this rank's device memory, so back-to-back kernels and
// CUDA-graph replays continue where the last one stopped.
struct Conn {
  u64 fifo;   // RNCCL_NSLOTS slots of `slot_bytes` bytes (receiver's memory)
  u64 sizes;  // u64[RNCCL_NSLOTS]: bytes in each slot (receiver's memory)
  u64 tail;   // u64*: slots posted (receiver's memory, written by the sender)
  u64 head;   // u64*: slots freed (sender's memory, written by the receiver)
  u64 step;   // u64[2]: this end's slot count and bytes moved (this rank's device memory)
  u64 bytes;  // u64[3]: a copy of `step` for live counters, and 1 while a wait on this end
              // outlasts its first round of polls (host-mapped, write-only)
  u32 peer;   // communicator rank of the other end
  u16 channel;
  u16 pad;
};
static_assert(sizeof(Conn) == 56, "Conn layout");

// A lane: `nsteps` steps from `first`, run by one thread block.
struct Lane {
  u32 first;
  u32 nsteps;
  u32 channel;  // for error reports
  u32 pad;
};
static_assert(sizeof(Lane) == 16, "Lane layout");

// What the kernel reports when it stops early (host-mapped, read by the communicator's
// async-error query). `code` 0 means no error; the first block to fail wins.
enum Status { ST_OK = 0, ST_TIMEOUT = 1, ST_ABORTED = 2, ST_BAD_SIZE = 3 };
struct Report {
  u32 code;
  u32 lane;
  u32 peer;
  u32 channel;
  u64 step;     // the slot count waited for
  u64 waiting;  // 1: for a peer's data (recv), 2: for a free slot (send)
};
static_assert(sizeof(Report) == 32, "Report layout");

// Operation tracking (what `rnccl status` and hang reports show of a GPU rank): a kernel
// launched for operation `seq` (the communicator's operation number) stores it in `ops[0]` as
// its block 0 starts, and the last of its blocks to finish (counted in `finished`, which that
// block resets) stores it in `ops[1]` and in the device-memory word after the count, unless
// that word holds a later number: a kernel captured into a CUDA graph replays with the number
// it was captured with, and must not take `ops[1]` back. A communicator's kernels run in stream
// order; with no fence between the stores the host may see `ops[1]` first, and takes `ops[0]`
// as at least `ops[1]`.
//
// The program header.
struct Program {
  u64 lanes;       // byte offset of Lane[nlanes] from the program's start
  u64 conns;       // byte offset of Conn[nconns]
  u64 steps;       // byte offset of Step[nsteps]
  u64 slot_bytes;  // bytes per FIFO slot
  u64 report;      // Report* (host-mapped)
  u64 abort;       // u32* (host-mapped): nonzero stops every wait
  u64 claim;       // u32* (device memory): the first failing block takes it, then reports
  u64 timeout_ns;  // longest wait for a peer, in ns of %globaltimer
  u64 ops;         // u64[2] (host-mapped): the last operation started, the last finished
  u64 finished;    // u32* (device memory): blocks of the running kernel that finished; at
                   // finished + 4, u64: the last operation reported finished
  double pre_f;    // Scalars (reduce.cuh)
  long long pre_i;
  u64 post_div;
  u64 pre_at;      // const T* (device memory): the pre-multiplier, read as the kernel starts
                   // (ncclScalarDevice); 0 when pre_f/pre_i hold it
  u32 nlanes;
  u32 nconns;
  u32 nsteps;
  u32 rank;
};
static_assert(sizeof(Program) == 128, "Program layout");
// Byte offset of the lanes in every program (Program::lanes holds it too).
#define RNCCL_LANES_AT 128

}  // namespace rnccl
