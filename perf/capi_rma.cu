// One-sided operations through nccl.h (ncclPutSignal, ncclSignal, ncclWaitSignal) on two GPUs,
// checked and timed against ncclSend/ncclRecv of the same size. Run by perf/capi_rma.sh, which
// builds it against rnccl's nccl.h and runs it on rnccl's libnccl.so.2 and on NCCL's (NCCL 2.28
// lacks the one-sided calls: they are looked up with dlsym, and without them only Send/Recv is
// timed).
//
//   capi_rma procs    two processes (fork), one GPU each: windows exchanged through CUDA IPC
//   capi_rma thread   one thread drives both GPUs (ncclCommInitAll): windows registered in a group
//   capi_rma timeout  rank 1 waits for a signal rank 0 never sends: the wait must fail through
//                     ncclCommGetAsyncError naming rank 0 (run with a short RNCCL_TIMEOUT)
//
// Checks, each printed as "check <name>: ok" or "FAILED": puts of 1 B to 64 MB (odd sizes and
// offsets included) in both directions at once, bytes around the target untouched; a signal
// alone; four puts then one wait for all four; a put and a wait captured into a CUDA graph and
// replayed with new data each time. Timings: a ping-pong (rank 0 puts or sends, rank 1 answers),
// one way = half a round trip, best of 5 runs of 20 round trips, printed as
// "time <size> put <us> sendrecv <us>".

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "capi_check.h"

typedef ncclResult_t (*put_fn)(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t,
                               int, int, unsigned int, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*signal_fn)(int, int, int, unsigned int, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*wait_fn)(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t);
static put_fn put_signal;
static signal_fn signal_only;
static wait_fn wait_signal;

static const size_t WIN = (64u << 20) + 4096;  // window bytes per rank

struct Rank {
  int rank, gpu;
  ncclComm_t comm;
  cudaStream_t stream;
  char *src, *win;
  ncclWindow_t w;
};

static std::vector<Rank> R;  // this process's ranks
static int failures = 0;

static void each(void (*f)(Rank&, void*), void* arg) {
  if (R.size() > 1) NK(ncclGroupStart());
  for (auto& r : R) {
    CK(cudaSetDevice(r.gpu));
    f(r, arg);
  }
  if (R.size() > 1) NK(ncclGroupEnd());
}

static void sync_all() {
  for (auto& r : R) {
    CK(cudaSetDevice(r.gpu));
    CK(cudaStreamSynchronize(r.stream));
  }
}

// Every rank of both processes reaches this point before any goes on.
static void barrier() {
  static int* one[2];
  each(
      [](Rank& r, void*) {
        if (!one[r.rank]) CK(cudaMalloc(&one[r.rank], 4));
        NK(ncclAllReduce(one[r.rank], one[r.rank], 1, ncclInt32, ncclSum, r.comm, r.stream));
      },
      nullptr);
  sync_all();
}

static unsigned char pattern(size_t i, int rank, size_t salt) {
  return (unsigned char)(i * 131 + rank * 7 + salt * 13 + 1);
}

static void fill_src(size_t bytes, size_t salt) {
  std::vector<unsigned char> h(bytes);
  for (auto& r : R) {
    for (size_t i = 0; i < bytes; i++) h[i] = pattern(i, r.rank, salt);
    CK(cudaSetDevice(r.gpu));
    CK(cudaMemcpy(r.src, h.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(r.win, 0xEE, WIN));
  }
  CK(cudaDeviceSynchronize());
}

// The window of each local rank holds the peer's pattern at [off, off+bytes), 0xEE around it.
static bool check_window(size_t off, size_t bytes, size_t salt, const char* what) {
  bool ok = true;
  size_t lo = off >= 64 ? off - 64 : 0, hi = off + bytes + 64 < WIN ? off + bytes + 64 : WIN;
  std::vector<unsigned char> h(hi - lo);
  for (auto& r : R) {
    CK(cudaSetDevice(r.gpu));
    CK(cudaMemcpy(h.data(), r.win + lo, hi - lo, cudaMemcpyDeviceToHost));
    for (size_t i = lo; i < hi && ok; i++) {
      unsigned char want = (i >= off && i < off + bytes) ? pattern(i - off, 1 - r.rank, salt) : 0xEE;
      if (h[i - lo] != want) {
        printf("  %s: rank %d window byte %zu is %u, expected %u\n", what, r.rank, i, h[i - lo], want);
        ok = false;
      }
    }
  }
  return ok;
}

static void report(const char* name, bool ok) {
  printf("check %s: %s\n", name, ok ? "ok" : "FAILED");
  if (!ok) failures++;
  fflush(stdout);
}

struct PutArg {
  size_t bytes, off, n;
};

static void put_to_peer(Rank& r, void* a) {
  PutArg* p = (PutArg*)a;
  for (size_t k = 0; k < p->n; k++) {
    size_t part = p->bytes / p->n, at = k * part, len = k + 1 == p->n ? p->bytes - at : part;
    if (len == 0 && p->bytes != 0) continue;
    NK(put_signal(r.src + at, len, ncclInt8, 1 - r.rank, r.w, p->off + at, 0, 0, 0, r.comm, r.stream));
  }
}

static void wait_peer(Rank& r, void* a) {
  ncclWaitSignalDesc_t d = {(int)*(size_t*)a, 1 - r.rank, 0, 0};
  NK(wait_signal(1, &d, r.comm, r.stream));
}

static void checks() {
  size_t sizes[] = {1, 8, 4096, 1000003, 4u << 20, 64u << 20};
  size_t offs[] = {0, 3, 4096};
  int salt = 0;
  for (size_t s : sizes)
    for (size_t off : offs) {
      if (off + s > WIN) continue;
      fill_src(s, ++salt);
      barrier();
      PutArg p = {s, off, 1};
      each(put_to_peer, &p);
      size_t one = 1;
      each(wait_peer, &one);
      sync_all();
      char name[96];
      snprintf(name, sizeof name, "put %zu B at offset %zu, both ways", s, off);
      report(name, check_window(off, s, salt, name));
      barrier();
    }
  // A signal alone, then four puts and one wait for the four.
  each([](Rank& r, void*) { NK(signal_only(1 - r.rank, 0, 0, 0, r.comm, r.stream)); }, nullptr);
  size_t one = 1;
  each(wait_peer, &one);
  sync_all();
  report("signal alone", true);
  fill_src(1 << 20, ++salt);
  barrier();
  PutArg p = {1 << 20, 128, 4};
  each(put_to_peer, &p);
  size_t four = 4;
  each(wait_peer, &four);
  sync_all();
  report("four puts, one wait for four", check_window(128, 1 << 20, salt, "four puts"));
  barrier();
  // A put and a wait captured into a graph, replayed with new bytes each time.
  std::vector<cudaGraphExec_t> exec(R.size());
  for (size_t i = 0; i < R.size(); i++) {
    Rank& r = R[i];
    CK(cudaSetDevice(r.gpu));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeRelaxed));
    PutArg q = {65536, 512, 1};
    put_to_peer(r, &q);
    wait_peer(r, &one);
    CK(cudaStreamEndCapture(r.stream, &g));
    CK(cudaGraphInstantiate(&exec[i], g, 0));
  }
  bool ok = true;
  for (int rep = 0; rep < 5; rep++) {
    fill_src(65536, ++salt);
    barrier();
    for (size_t i = 0; i < R.size(); i++) {
      CK(cudaSetDevice(R[i].gpu));
      CK(cudaGraphLaunch(exec[i], R[i].stream));
    }
    sync_all();
    ok &= check_window(512, 65536, salt, "graph replay");
    barrier();
  }
  report("put + wait in a CUDA graph, 5 replays", ok);
}

static double now_us() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

struct Ping {
  size_t bytes;
  bool put;
};

// One round trip: rank 0 moves `bytes` to rank 1, which answers with as many.
static void round_trip(Ping* p) {
  for (int leg = 0; leg < 2; leg++) {
    if (R.size() > 1) NK(ncclGroupStart());
    for (auto& r : R) {
      CK(cudaSetDevice(r.gpu));
      bool sender = r.rank == leg;
      if (p->put) {
        if (sender) {
          NK(put_signal(r.src, p->bytes, ncclInt8, 1 - r.rank, r.w, 0, 0, 0, 0, r.comm, r.stream));
        } else {
          ncclWaitSignalDesc_t d = {1, 1 - r.rank, 0, 0};
          NK(wait_signal(1, &d, r.comm, r.stream));
        }
      } else if (sender) {
        NK(ncclSend(r.src, p->bytes, ncclInt8, 1 - r.rank, r.comm, r.stream));
      } else {
        NK(ncclRecv(r.win, p->bytes, ncclInt8, 1 - r.rank, r.comm, r.stream));
      }
    }
    if (R.size() > 1) NK(ncclGroupEnd());
  }
}

static double one_way_us(size_t bytes, bool put) {
  Ping p = {bytes, put};
  double best = 1e30;
  for (int run = 0; run < 5; run++) {
    barrier();
    round_trip(&p);  // warm-up
    sync_all();
    barrier();
    double t0 = now_us();
    for (int i = 0; i < 20; i++) round_trip(&p);
    sync_all();
    double t = (now_us() - t0) / 20 / 2;
    if (t < best) best = t;
  }
  return best;
}

static void timings() {
  for (size_t s = 8; s <= (64u << 20); s *= 8) {
    double sr = one_way_us(s, false);
    double pu = put_signal ? one_way_us(s, true) : -1;
    if (R[0].rank == 0) printf("time %zu put %.2f sendrecv %.2f\n", s, pu, sr);
    fflush(stdout);
  }
}

static void setup(int nranks, ncclComm_t* comms) {
  for (size_t i = 0; i < R.size(); i++) {
    Rank& r = R[i];
    r.comm = comms[i];
    CK(cudaSetDevice(r.gpu));
    CK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    NK(ncclMemAlloc((void**)&r.src, WIN));
    NK(ncclMemAlloc((void**)&r.win, WIN));
  }
  (void)nranks;
  if (put_signal) {
    each([](Rank& r, void*) { NK(ncclCommWindowRegister(r.comm, r.win, WIN, &r.w, NCCL_WIN_COLL_SYMMETRIC)); },
         nullptr);
  }
}

static void teardown() {
  sync_all();
  for (auto& r : R) {
    CK(cudaSetDevice(r.gpu));
    if (put_signal) NK(ncclCommWindowDeregister(r.comm, r.w));
    NK(ncclCommDestroy(r.comm));
  }
}

static int run_rank(int rank, ncclUniqueId id, const char* mode) {
  R.push_back(Rank{rank, rank});
  CK(cudaSetDevice(rank));
  ncclComm_t c;
  NK(ncclCommInitRank(&c, 2, id, rank));
  if (strcmp(mode, "timeout") == 0) {
    R[0].comm = c;
    CK(cudaStreamCreateWithFlags(&R[0].stream, cudaStreamNonBlocking));
    if (rank == 1) {
      ncclWaitSignalDesc_t d = {1, 0, 0, 0};
      NK(wait_signal(1, &d, c, R[0].stream));
      double t0 = now_us();
      ncclResult_t st = ncclSuccess;
      while (st == ncclSuccess && now_us() - t0 < 60e6) {
        NK(ncclCommGetAsyncError(c, &st));
        usleep(10000);
      }
      const char* msg = ncclGetLastError(c);
      printf("rank 1 async error after %.1f s: %s: %s\n", (now_us() - t0) / 1e6, ncclGetErrorString(st), msg);
      report("a wait nobody signals fails, naming rank 0", st != ncclSuccess && strstr(msg, "rank 0"));
      ncclCommAbort(c);
    } else {
      sleep(20);
      ncclCommAbort(c);
    }
    return failures;
  }
  setup(2, &c);
  if (put_signal) checks();
  timings();
  teardown();
  return failures;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "procs";
  put_signal = (put_fn)dlsym(RTLD_DEFAULT, "ncclPutSignal");
  signal_only = (signal_fn)dlsym(RTLD_DEFAULT, "ncclSignal");
  wait_signal = (wait_fn)dlsym(RTLD_DEFAULT, "ncclWaitSignal");
  int v;
  ncclGetVersion(&v);
  printf("# %s mode, library version %d, one-sided calls %s\n", mode, v,
         put_signal ? "present" : "absent (Send/Recv timings only)");
  if (strcmp(mode, "thread") == 0) {
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    NK(ncclCommInitAll(comms, 2, devs));
    R.push_back(Rank{0, 0});
    R.push_back(Rank{1, 1});
    setup(2, comms);
    if (put_signal) checks();
    timings();
    teardown();
    printf("# %d failures\n", failures);
    return failures != 0;
  }
  ncclUniqueId id;
  NK(ncclGetUniqueId(&id));
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    fclose(stdout);  // rank 1 reports through its exit status (and stderr)
    stdout = fopen("/dev/null", "w");
    if (strcmp(mode, "timeout") == 0) stdout = fdopen(dup(2), "w");
    exit(run_rank(1, id, mode) != 0);
  }
  int fails = run_rank(0, id, mode);
  int st = 0;
  waitpid(child, &st, 0);
  bool child_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  printf("# rank 0: %d failures; rank 1 %s\n", fails, child_ok ? "ok" : "FAILED");
  return fails != 0 || !child_ok;
}
