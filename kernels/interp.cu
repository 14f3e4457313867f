// The step interpreter: runs a device program (program.cuh) — the host plan's lanes, one thread
// block per lane — over FIFOs in GPU memory with NCCL's Simple protocol: a sender waits for a
// free slot (`head`), writes it, fences, and bumps the receiver's `tail`; a receiver waits for
// `tail`, consumes the slot and bumps the sender's `head` (NCCL src/device/prims_simple.h,
// internals §5.3). Every wait polls the communicator's abort flag and gives up after the
// program's timeout, reporting which lane, peer and slot it waited for.
//
// One kernel per (data type, reduction): rnccl_interp_<type>_<op>, and beside it the one-shot
// LL all-reduce of ll.cuh, rnccl_ll_allreduce_<type>_<op>, and the two-shot direct all-reduce
// of direct.cuh with its reduce-scatter and all-gather, rnccl_direct_<type>_<op>. The byte
// module (u8) also carries the one-sided kernel of rma.cuh, rnccl_rma.

#include "reduce.cuh"
#include "program.cuh"

namespace rnccl {

// The transforms' scalars of program `P` for elements of type T: the header's, or with
// `pre_at` set (ncclScalarDevice) the element there, read now, when the kernel runs, so a value
// written earlier on the stream, or between replays of a graph, is the one used. Used by the
// interpreter, the LL and the direct kernels.
template <typename T>
__device__ __forceinline__ Scalars scalars(const Program* P) {
  Scalars s = {P->pre_f, P->pre_i, P->post_div};
  if (P->pre_at != 0) {
    const typename Arith<T>::Acc v = Arith<T>::load(*(const T*)P->pre_at);
    s.pre_f = (double)v;
    s.pre_i = (i64)v;
  }
  return s;
}

__device__ __forceinline__ u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ u64 ld_acquire(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ u64 ld_volatile(const u64* p) {
  u64 v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ u32 ld_volatile32(const u32* p) {
  u32 v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Release fence at system scope: this thread's earlier stores, and those it observed (its
// block's, through the barrier before it), become visible before its next store to any GPU
// or the host does (PTX ISA, memory consistency model). Lighter than __threadfence_system's
// sequentially consistent fence, which also orders later loads; NCCL's fence_acq_rel_sys
// (src/device/op128.h) publishes a Simple slot the same way.
__device__ __forceinline__ void fence_release_sys() {
#if __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __threadfence_system();
#endif
}

__device__ __forceinline__ void st_volatile(u64* p, u64 v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void st_volatile32(u32* p, u32 v) {
  asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Spins until `*p >= want`. Returns ST_OK, or ST_ABORTED / ST_TIMEOUT. A wait that outlasts
// its first round of polls sets `mark` (the waiting end's host-mapped Conn::bytes[2]; may be
// null) to 1 until it ends, so the host can tell which link a rank waits on.
__device__ int wait_at_least(const u64* p, u64 want, const Program* P, u64* mark) {
  u64 start = 0;
  u32 spins = 0;
  int st = ST_OK;
  while (ld_acquire(p) < want) {
    if (++spins < 1024) continue;
    spins = 0;
    if (ld_volatile32((const u32*)P->abort)) {
      st = ST_ABORTED;
      break;
    }
    u64 now = globaltimer();
    if (start == 0) {
      start = now;
      if (mark) st_volatile(mark, 1);
    } else if (now - start > P->timeout_ns) {
      st = ST_TIMEOUT;
      break;
    }
  }
  if (start && mark) st_volatile(mark, 0);
  return st;
}

// The first failing block of any kernel of the communicator reports; every block stops at its
// next wait because the abort flag is raised.
__device__ void report(const Program* P, int code, u32 lane, const Conn& c, u64 step, u64 waiting) {
  if (atomicCAS((u32*)P->claim, 0u, 1u) == 0u) {
    Report* r = (Report*)P->report;
    r->lane = lane;
    r->peer = c.peer;
    r->channel = c.channel;
    r->step = step;
    r->waiting = waiting;
    __threadfence_system();
    st_volatile32(&r->code, (u32)code);
  }
  __threadfence_system();
  st_volatile32((u32*)P->abort, 1u);
}

// Block 0 says operation `seq` started (program.cuh, operation tracking).
__device__ __forceinline__ void op_started(const Program* P, u64 seq) {
  if (blockIdx.x == 0 && threadIdx.x == 0) st_volatile((u64*)P->ops, seq);
}

// Thread 0 of every block, as the block starts: the last operation reported finished (read
// early, so the block's end does not wait for it; only the last block of this kernel writes it).
__device__ __forceinline__ u64 op_guard(const Program* P) {
  return ld_volatile((const u64*)(P->finished + 4));
}

// Thread 0 of every block, after the block's last step: the last block to finish resets the
// count for the next kernel and, unless a later operation was reported already (this is a
// CUDA-graph replay), says operation `seq` finished. No fence: the host reads the words only to
// follow progress (the data is the stream's business), and a fence to host memory would add its
// round trip to every kernel.
__device__ __forceinline__ void op_finished(const Program* P, u64 seq, u64 guard) {
  u32* n = (u32*)P->finished;
  if (atomicAdd(n, 1u) == gridDim.x - 1) {
    st_volatile32(n, 0u);
    if (seq > guard) {
      st_volatile((u64*)(P->finished + 4), seq);
      st_volatile((u64*)P->ops + 1, seq);
    }
  }
}

// 16-byte packs per thread per round: enough loads in flight to cover NVLink latency.
#define UNROLL 4

// d0[i] (and d1[i]) = post(pre(b[i])) over `count` elements; d1 may be null.
template <typename T, int OP>
__device__ __forceinline__ void map1(T* d0, T* d1, const T* b, u64 count, bool pre, bool post,
                                     const Scalars& s) {
  typedef Reduce<T, OP> R;
  const u32 tid = threadIdx.x, nt = blockDim.x;
  const u64 EPP = 16 / sizeof(T);
  u64 done = 0;
  u64 any = (u64)d0 | (u64)b | (d1 ? (u64)d1 : 0);
  if ((any & 15) == 0) {
    const u64 npacks = count / EPP;
    const uint4* pb = (const uint4*)b;
    for (u64 base = 0; base < npacks; base += (u64)nt * UNROLL) {
      uint4 v[UNROLL];
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        u64 p = base + tid + (u64)k * nt;
        if (p < npacks) v[k] = __ldcg(pb + p);
      }
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        u64 p = base + tid + (u64)k * nt;
        if (p >= npacks) break;
        if (pre || post) {
          T* e = (T*)&v[k];
#pragma unroll
          for (int j = 0; j < (int)EPP; j++) e[j] = R::transform(e[j], pre, post, s);
        }
        ((uint4*)d0)[p] = v[k];
        if (d1) ((uint4*)d1)[p] = v[k];
      }
    }
    done = npacks * EPP;
  }
  for (u64 i = done + tid; i < count; i += nt) {
    T r = R::transform(__ldcg(b + i), pre, post, s);
    d0[i] = r;
    if (d1) d1[i] = r;
  }
}

// d0[i] (and d1[i]) = post(a[i] ⊕ pre(b[i])) over `count` elements; d1 may be null; a
// destination may equal `a` or `b`.
template <typename T, int OP>
__device__ __forceinline__ void map2(T* d0, T* d1, const T* a, const T* b, u64 count, bool pre,
                                     bool post, const Scalars& s) {
  typedef Reduce<T, OP> R;
  const u32 tid = threadIdx.x, nt = blockDim.x;
  const u64 EPP = 16 / sizeof(T);
  u64 done = 0;
  u64 any = (u64)d0 | (u64)a | (u64)b | (d1 ? (u64)d1 : 0);
  if ((any & 15) == 0) {
    const u64 npacks = count / EPP;
    const uint4* pa = (const uint4*)a;
    const uint4* pb = (const uint4*)b;
    for (u64 base = 0; base < npacks; base += (u64)nt * UNROLL) {
      uint4 va[UNROLL], vb[UNROLL];
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        u64 p = base + tid + (u64)k * nt;
        if (p < npacks) {
          va[k] = __ldcg(pa + p);
          vb[k] = __ldcg(pb + p);
        }
      }
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        u64 p = base + tid + (u64)k * nt;
        if (p >= npacks) break;
        T* ea = (T*)&va[k];
        const T* eb = (const T*)&vb[k];
#pragma unroll
        for (int j = 0; j < (int)EPP; j++) ea[j] = R::combine(ea[j], eb[j], pre, post, s);
        ((uint4*)d0)[p] = va[k];
        if (d1) ((uint4*)d1)[p] = va[k];
      }
    }
    done = npacks * EPP;
  }
  for (u64 i = done + tid; i < count; i += nt) {
    T r = R::combine(__ldcg(a + i), __ldcg(b + i), pre, post, s);
    d0[i] = r;
    if (d1) d1[i] = r;
  }
}

// Per-block state shared by its threads.
struct BlockState {
  Step st;
  u64 sstep;  // slots this block has posted on the step's send connection
  u64 rstep;  // slots this block has consumed on the step's receive connection
  u64 sbytes; // bytes moved on the send connection, ever
  u64 rbytes; // bytes moved on the receive connection, ever
  int status;
};

// Thread 0: waits for what the next slot needs — the peer's data on `recv`, a free slot on
// `send` — and checks the received slot's size. Sets bs.status.
__device__ void wait_slot(const Program* P, const Conn* conns, BlockState& bs, u32 lane, bool need_recv,
                          bool need_send, u64 n) {
  int st = ST_OK;
  if (need_recv) {
    const Conn& c = conns[bs.st.recv];
    st = wait_at_least((const u64*)c.tail, bs.rstep + 1, P, (u64*)c.bytes + 2);
    if (st != ST_OK) {
      report(P, st, lane, c, bs.rstep + 1, 1);
    } else if (ld_volatile((const u64*)c.sizes + bs.rstep % RNCCL_NSLOTS) != n) {
      st = ST_BAD_SIZE;
      report(P, st, lane, c, bs.rstep + 1, 1);
    }
  }
  if (st == ST_OK && need_send) {
    const Conn& c = conns[bs.st.send];
    if (bs.sstep + 1 > RNCCL_NSLOTS) {
      st = wait_at_least((const u64*)c.head, bs.sstep + 1 - RNCCL_NSLOTS, P, (u64*)c.bytes + 2);
      if (st != ST_OK) report(P, st, lane, c, bs.sstep + 1, 2);
    }
  }
  bs.status = st;
}

// Thread 0: publishes the slot just written on `send` (size, fence, tail).
__device__ __forceinline__ void post_send(const Conn& c, BlockState& bs, u64 n) {
  st_volatile((u64*)c.sizes + bs.sstep % RNCCL_NSLOTS, n);
  fence_release_sys();
  st_volatile((u64*)c.tail, bs.sstep + 1);
  bs.sstep++;
  bs.sbytes += n;
  st_volatile((u64*)c.bytes, bs.sstep);
  st_volatile((u64*)c.bytes + 1, bs.sbytes);
}

// Thread 0: frees the slot just consumed on `recv`.
__device__ __forceinline__ void free_recv(const Conn& c, BlockState& bs, u64 n) {
  st_volatile((u64*)c.head, bs.rstep + 1);
  bs.rstep++;
  bs.rbytes += n;
  st_volatile((u64*)c.bytes, bs.rstep);
  st_volatile((u64*)c.bytes + 1, bs.rbytes);
}

__device__ __forceinline__ char* slot_of(const Conn& c, u64 step, u64 slot_bytes) {
  return (char*)c.fifo + (step % RNCCL_NSLOTS) * slot_bytes;
}

// Shared-memory bytes a block caches its connections and steps in (see `load`).
#define RNCCL_CACHE_BYTES 12288

// Copies `bytes` (a multiple of 8) from `src` to `dst` with every thread of the block.
__device__ __forceinline__ void copy_words(void* dst, const void* src, u64 bytes) {
  const u64* s = (const u64*)src;
  u64* d = (u64*)dst;
  for (u64 i = threadIdx.x; i < bytes / 8; i += blockDim.x) d[i] = s[i];
}

// The program lives in device memory (copied there from pinned staging once per program,
// src/exec/gpu/arena.rs), and the loops below read a connection's addresses for every slot:
// each block first copies the header and its lane (which follows the header at a fixed place)
// in one round, then every connection and its own lane's steps, into shared memory with all
// its threads at once (a few reads in flight per thread instead of one dependent read at a
// time), and reads from there. What does not fit stays where it is.
struct Cached {
  const Program* P;
  const Conn* conns;
  const Step* steps;  // this lane's first step
  Lane lane;
};

__device__ Cached load(const Program* G, Program* hdr, Lane* lane_s, char* cache) {
  const char* base = (const char*)G;
  // Lanes start right after the header (RNCCL_LANES_AT): the last thread reads this block's
  // while the first ones copy the header.
  if (threadIdx.x == blockDim.x - 1) *lane_s = ((const Lane*)(base + RNCCL_LANES_AT))[blockIdx.x];
  copy_words(hdr, G, sizeof(Program));
  __syncthreads();
  const Lane lane = *lane_s;
  const u64 cb = (u64)hdr->nconns * sizeof(Conn), sb = (u64)lane.nsteps * sizeof(Step);
  const Conn* conns = (const Conn*)(base + hdr->conns);
  const Step* steps = (const Step*)(base + hdr->steps) + lane.first;
  u64 used = 0;
  if (cb <= RNCCL_CACHE_BYTES) {
    copy_words(cache, conns, cb);
    conns = (const Conn*)cache;
    used = cb;
  }
  if (used + sb <= RNCCL_CACHE_BYTES) {
    copy_words(cache + used, steps, sb);
    steps = (const Step*)(cache + used);
  }
  __syncthreads();
  return Cached{hdr, conns, steps, lane};
}

template <typename T, int OP>
__device__ void run(const Program* G, u64 seq) {
  __shared__ BlockState bs;
  __shared__ Program hdr;
  __shared__ Lane lane_s;
  __shared__ __align__(16) char cache[RNCCL_CACHE_BYTES];
  const u32 tid = threadIdx.x;
  const u32 lane_ix = blockIdx.x;
  const Cached cached = load(G, &hdr, &lane_s, cache);
  const Program* P = cached.P;
  const Lane lane = cached.lane;
  const Conn* conns = cached.conns;
  const Step* steps = cached.steps;
  const Scalars sc = scalars<T>(P);
  const u64 slot = P->slot_bytes;
  op_started(P, seq);
  const u64 guard = tid == 0 ? op_guard(P) : 0;

  for (u32 i = 0; i < lane.nsteps; i++) {
    if (tid == 0) {
      bs.st = steps[i];
      bs.status = ST_OK;
      if (bs.st.send != RNCCL_NO_CONN) {
        const u64* c = (const u64*)conns[bs.st.send].step;
        bs.sstep = c[0];
        bs.sbytes = c[1];
      }
      if (bs.st.recv != RNCCL_NO_CONN) {
        const u64* c = (const u64*)conns[bs.st.recv].step;
        bs.rstep = c[0];
        bs.rbytes = c[1];
      }
    }
    __syncthreads();
    const Step st = bs.st;
    const bool pre = st.flags & RNCCL_STEP_PRE, post = st.flags & RNCCL_STEP_POST;
    const u64 es = sizeof(T);
    if (st.op == OP_COPY) {
      if (st.src != st.dst || pre || post)
        map1<T, OP>((T*)st.dst, 0, (const T*)st.src, st.bytes / es, pre, post, sc);
      __syncthreads();
      continue;
    }
    const bool has_s = st.send != RNCCL_NO_CONN, has_r = st.recv != RNCCL_NO_CONN;
    for (u64 done = 0; done < st.bytes;) {
      const u64 n = min(slot, st.bytes - done);
      const u64 cnt = n / es;
      char* src = (char*)st.src + done;
      char* dst = (char*)st.dst + done;
      if (st.op == OP_EXCHANGE) {
        // Send this piece of the buffer, then combine the peer's piece into it.
        if (tid == 0) wait_slot(P, conns, bs, lane_ix, false, true, n);
        __syncthreads();
        if (bs.status != ST_OK) return;
        const Conn& cs = conns[st.send];
        map1<T, OP>((T*)slot_of(cs, bs.sstep, slot), 0, (const T*)dst, cnt, false, false, sc);
        __syncthreads();
        if (tid == 0) {
          post_send(cs, bs, n);
          wait_slot(P, conns, bs, lane_ix, true, false, n);
        }
        __syncthreads();
        if (bs.status != ST_OK) return;
        // Both partners compute (lower rank's piece) ⊕ (higher rank's piece), so they end with
        // the same bits even where ⊕ is not symmetric (max/min meeting ±0 or NaN).
        const Conn& cr = conns[st.recv];
        const T* peer = (const T*)slot_of(cr, bs.rstep, slot);
        if (P->rank < cr.peer)
          map2<T, OP>((T*)dst, 0, (const T*)dst, peer, cnt, false, false, sc);
        else
          map2<T, OP>((T*)dst, 0, peer, (const T*)dst, cnt, false, false, sc);
        __syncthreads();
        if (tid == 0) free_recv(cr, bs, n);
        done += n;
        continue;
      }
      if (tid == 0) wait_slot(P, conns, bs, lane_ix, has_r, has_s, n);
      __syncthreads();
      if (bs.status != ST_OK) return;
      T* ss = has_s ? (T*)slot_of(conns[st.send], bs.sstep, slot) : 0;
      const T* rs = has_r ? (const T*)slot_of(conns[st.recv], bs.rstep, slot) : 0;
      switch (st.op) {
        case OP_SEND:
          map1<T, OP>(ss, 0, (const T*)src, cnt, pre, post, sc);
          break;
        case OP_COPY_SEND:
          map1<T, OP>(ss, dst != src ? (T*)dst : 0, (const T*)src, cnt, pre, post, sc);
          break;
        case OP_RECV:
          map1<T, OP>((T*)dst, 0, rs, cnt, pre, post, sc);
          break;
        case OP_RECV_COPY_SEND:
          map1<T, OP>((T*)dst, ss, rs, cnt, pre, post, sc);
          break;
        case OP_RECV_REDUCE_SEND:
          map2<T, OP>(ss, 0, rs, (const T*)src, cnt, pre, post, sc);
          break;
        case OP_RECV_REDUCE_COPY:
          map2<T, OP>((T*)dst, 0, rs, (const T*)src, cnt, pre, post, sc);
          break;
        case OP_RECV_REDUCE_COPY_SEND:
          map2<T, OP>((T*)dst, ss, rs, (const T*)src, cnt, pre, post, sc);
          break;
      }
      __syncthreads();
      if (tid == 0) {
        if (has_s) post_send(conns[st.send], bs, n);
        if (has_r) free_recv(conns[st.recv], bs, n);
      }
      done += n;
    }
    if (tid == 0) {
      if (bs.st.send != RNCCL_NO_CONN) {
        u64* c = (u64*)conns[bs.st.send].step;
        c[0] = bs.sstep;
        c[1] = bs.sbytes;
      }
      if (bs.st.recv != RNCCL_NO_CONN) {
        u64* c = (u64*)conns[bs.st.recv].step;
        c[0] = bs.rstep;
        c[1] = bs.rbytes;
      }
    }
    __syncthreads();
  }
  if (tid == 0) op_finished(P, seq, guard);
}

}  // namespace rnccl

#include "ll.cuh"
#include "direct.cuh"
#include "symmetric.cuh"
#include "registered.cuh"
#include "rma.cuh"

#define RNCCL_INTERP(NAME, T, OP)                                                \
  extern "C" __global__ void __launch_bounds__(512) rnccl_interp_##NAME(        \
      const rnccl::Program* p, unsigned long long seq) {                        \
    rnccl::run<T, OP>(p, seq);                                                  \
  }                                                                             \
  RNCCL_LL(NAME, T, OP)                                                         \
  RNCCL_DIRECT(NAME, T, OP)

// One reduction per compiled module too (the host defines RNCCL_COMBINE as its place in
// entry.rs COMBINES: sum 0, prod 1, max 2, min 3): a module of one type and one reduction
// builds in about a quarter of the time of all four, and most processes only ever sum.
#if !defined(RNCCL_COMBINE) || RNCCL_COMBINE == 0
#define RNCCL_IF_SUM(x) x
#else
#define RNCCL_IF_SUM(x)
#endif
#if !defined(RNCCL_COMBINE) || RNCCL_COMBINE == 1
#define RNCCL_IF_PROD(x) x
#else
#define RNCCL_IF_PROD(x)
#endif
#if !defined(RNCCL_COMBINE) || RNCCL_COMBINE == 2
#define RNCCL_IF_MAX(x) x
#else
#define RNCCL_IF_MAX(x)
#endif
#if !defined(RNCCL_COMBINE) || RNCCL_COMBINE == 3
#define RNCCL_IF_MIN(x) x
#else
#define RNCCL_IF_MIN(x)
#endif

#define RNCCL_INTERP_TYPE(TN, T)                           \
  RNCCL_IF_SUM(RNCCL_INTERP(TN##_sum, T, rnccl::SUM))      \
  RNCCL_IF_PROD(RNCCL_INTERP(TN##_prod, T, rnccl::PROD))   \
  RNCCL_IF_MAX(RNCCL_INTERP(TN##_max, T, rnccl::MAX))      \
  RNCCL_IF_MIN(RNCCL_INTERP(TN##_min, T, rnccl::MIN))

// One data type per compiled module (the host defines RNCCL_DTYPE as nccl.h's ncclDataType_t
// value), so a process compiles only the types it uses; without it every type is built.
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 0
RNCCL_INTERP_TYPE(i8, signed char)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 1
RNCCL_INTERP_TYPE(u8, unsigned char)
// The one-sided kernel only moves bytes: the byte module for sums carries it.
RNCCL_IF_SUM(RNCCL_RMA)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 2
RNCCL_INTERP_TYPE(i32, int)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 3
RNCCL_INTERP_TYPE(u32, unsigned int)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 4
RNCCL_INTERP_TYPE(i64, long long)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 5
RNCCL_INTERP_TYPE(u64, unsigned long long)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 6
RNCCL_INTERP_TYPE(f16, __half)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 7
RNCCL_INTERP_TYPE(f32, float)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 8
RNCCL_INTERP_TYPE(f64, double)
#endif
#if !defined(RNCCL_DTYPE) || RNCCL_DTYPE == 9
RNCCL_INTERP_TYPE(bf16, __nv_bfloat16)
#endif
// FP8 from sm_90 on (entry.rs FP8_MIN_ARCH), as NCCL's FP8 reductions; earlier GPUs emulate its
// conversions, which multiplied this module's build time.
#if (!defined(RNCCL_DTYPE) || RNCCL_DTYPE == 10) && __CUDA_ARCH__ >= 900
RNCCL_INTERP_TYPE(f8e4m3, __nv_fp8_e4m3)
#endif
#if (!defined(RNCCL_DTYPE) || RNCCL_DTYPE == 11) && __CUDA_ARCH__ >= 900
RNCCL_INTERP_TYPE(f8e5m2, __nv_fp8_e5m2)
#endif
