// rnccl's one-shot LL all-reduce kernel alone, 8 bytes (LL_BYTES) between two ranks, against
// the bare exchange with the same arguments, and with named patches of its source that switch
// one part off each: where a small operation's time goes inside the kernel, apart from rnccl's
// host path (perf/ll_floor.sh times the whole `rnccl bench` against perf/ll_floor.cu).
//
// Every variant is kernels/ as it stands, patched in memory and built with NVRTC as rnccl
// builds its modules (src/device/cuda/compile/nvrtc.rs options, RNCCL_DTYPE=7 float and
// RNCCL_COMBINE=0 sum), so a patch whose text is no longer in kernels/ stops the run naming it.
// The kernel gets the arguments rnccl gives it (kernels/ll.cuh LlArgs): its LL areas, state and
// connection counters in device memory, the report, abort flag, operation words and live
// counters host-mapped. Per variant and round: `iterations` operations launched back to back
// on both ranks' streams, then captured into one CUDA graph per stream and timed on the graph's
// first launch (as nccl-tests and `rnccl bench -G 1` time it) and on the best of two replays.
// Prints the medians over rounds, µs per operation, and each replay against the real kernel's
// and the bare exchange's. Checks every sum and that no kernel reported a failure.
//
// On one H200 with both ranks on it (2026-12-02): replays 1.95 µs bare (1.72 with 40 bytes of
// arguments), 3.52 rnccl (3.82 before ll_start's loads moved to warp 1 and ll_finish's stores
// to the connection ends' lanes); every part off at once saved 0.36 µs, each alone under 0.16.
// 2026-12-04: the bare exchange inside rnccl's kernel replays as the floor (2.21 against 2.14:
// its module, arguments and shared memory cost nothing), 2.36 behind a first barrier; every
// part off 3.17, and 2.77 without the connection ends' lanes in ll_start as well. Prefetching
// the argument lines, launching 64 threads, and 8-byte loads and stores of the units changed
// nothing; the lanes keeping their loads in registers until the end (stored to shared memory
// before the last barrier instead of the first) read 3.73 against 3.52, worse. Thread 0 alone
// with every duty (ll_allreduce_line): 2.91 against the block path's 3.53, first graph launch
// 4.03 against 4.53. Warp 0 alone, lane i with line i, for up to 256 bytes (ll_allreduce_warp,
// which replaced it; LL_SHORT, 10 000 operations, 3 rounds, floor 1.69): 256 bytes 2.47 against
// the block's 3.02, 64 bytes 2.52 against 3.08, 8 bytes 2.51 against thread 0's 2.44. Its parts
// (LL_WARP=1, 5 rounds, floor 1.67; 8 / 256 bytes, real 2.49 / 2.44): off, the count loads save
// 0.12 / 0.10, the counter stores 0.24 / 0.22, the warp vote nothing, the polls nothing, all at
// once 0.50 / 0.43; without op_started or the finished report it is 0.13-0.18 slower. The send
// ends' counters stored right after the lines (under the waits) instead of at the end read 0.16
// slower in four runs out of four (2.61-2.66 against 2.45-2.50): not kept.
//
//   nvcc -O2 -o /tmp/ll_kernel perf/ll_kernel.cu -lcuda -lnvrtc
//   /tmp/ll_kernel [iterations [rounds [gpu0 gpu1]]]     (default 20000 5 0 1; one GPU: 0 0)
//
// LL_SHORT=1 times the real kernel (and LL_BASE's) beside the floors alone, no patched variant;
// LL_WARP=1 adds ll_allreduce_warp with one part off each, then all of them.
// LL_BYTES (a multiple of 8, 8 to 8192; default 8) sets the bytes per rank of rnccl's kernels;
// the floors stay at 8, and the bare variants take their exchange at 8 only (the kernel else).
//
// Run from the repository root (it reads kernels/). CUDA's headers: /usr/local/cuda/include, or
// CUDA_INC (the nvidia-cuda-runtime wheel's include folder).
#include <cuda.h>
#include <dirent.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                             \
  do {                                                                    \
    CUresult r_ = (x);                                                    \
    if (r_ != CUDA_SUCCESS) {                                             \
      const char* s_ = "?";                                               \
      cuGetErrorString(r_, &s_);                                          \
      fprintf(stderr, "ll_kernel: %s (line %d): %s\n", #x, __LINE__, s_); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

typedef unsigned long long u64;
typedef unsigned u32;

// kernels/program.cuh Program and kernels/ll.cuh LlArgs, field for field.
struct Program {
  u64 lanes, conns, steps, slot_bytes, report, abort, claim, timeout_ns, ops, finished;
  double pre_f;
  long long pre_i;
  u64 post_div, pre_at;
  u32 nlanes, nconns, nsteps, rank;
};
static_assert(sizeof(Program) == 128, "Program layout");
struct LlArgs {
  Program ctl;
  u64 src, dst, bytes, state, seq, unit;
  u32 nranks, mode, root, reg_blocks;
  u64 reg_unit;
  u32 direct_blocks, pad;
  u64 out[8], in[8], out_step[8], out_live[8], in_step[8], in_live[8];
  u64 peer_src[8], peer_dst[8], send_bytes[8], recv_bytes[8];
};
static_assert(sizeof(LlArgs) == 848, "LlArgs layout");

// The bare exchange (perf/ll_floor.cu's kernel): thread 0 stores its 8 bytes with the epoch as
// flags into the peer's area, polls its own, adds, stores the sum and the epoch. Once on
// LlArgs (848 bytes of arguments, as rnccl's kernel) and once on the 40 bytes it reads, to see
// what the arguments' size costs, above all on a graph's first launch, which uploads them.
static const char* FLOOR = R"(
template <typename A>
__device__ __forceinline__ void floor_exchange(const A& a, rnccl::u64 out, rnccl::u64 in) {
  using namespace rnccl;
  if (threadIdx.x != 0) return;
  const u32 e = ld_volatile32((const u32*)a.state) + 1;
  const u64 v = *(const u64*)a.src;
  const u64 half = (e & 1) * (u64)RNCCL_LL_HALF;
  st_line(out + half, v, e);
  u32 x, f0, y, f1;
  do {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(x), "=r"(f0), "=r"(y), "=r"(f1) : "l"(in + half) : "memory");
  } while (f0 != e || f1 != e);
  float* d = (float*)a.dst;
  d[0] = __uint_as_float((u32)v) + __uint_as_float(x);
  d[1] = __uint_as_float((u32)(v >> 32)) + __uint_as_float(y);
  st_volatile32((u32*)a.state, e);
}
extern "C" __global__ void __launch_bounds__(512) ll_kernel_floor(const __grid_constant__ rnccl::LlArgs a) {
  const unsigned peer = 1 - a.ctl.rank;
  floor_exchange(a, a.out[peer], a.in[peer]);
}
struct SmallArgs {
  rnccl::u64 src, dst, state, out, in;
};
extern "C" __global__ void __launch_bounds__(512) ll_kernel_floor_small(const __grid_constant__ SmallArgs a) {
  floor_exchange(a, a.out, a.in);
}
)";
// FLOOR's SmallArgs.
struct SmallArgs {
  u64 src, dst, state, out, in;
};

struct Patch {
  const char* file;
  const char* from;
  const char* to;
};
struct Variant {
  const char* name;
  std::vector<Patch> patches;
  bool from_base = false;  // built from LL_BASE's kernels/ rather than this one's
};

// The parts of kernels/ll.cuh a variant switches off (text as of 2026-12-02, second version).
static const Patch NO_OP_STARTED = {"ll.cuh", "  ll_start(a, begun);\n  op_started(P, a.seq);\n",
                                    "  ll_start(a, begun);\n"};
static const Patch NO_COUNT_LOADS = {"ll.cuh", "      const u64 c = ((const u64*)step)[1];",
                                     "      const u64 c = 0;"};
static const Patch LANES_IN_WARP_0 = {"ll.cuh", "  return blockDim.x >= 32 + 2 * RNCCL_LL_MAX_RANKS ? 32 : 1;",
                                      "  return 1;"};
static const Patch FINISH_ON_THREAD_0 = {
    "ll.cuh", "  ll_finish(a, begun, &epoch, 0, failed, [&](u32, int) { return a.bytes; }, true);",
    "  if (tid == 0) ll_finish(a, begun, &epoch, 0, failed, [&](u32, int) { return a.bytes; });"};
static const Patch NO_COUNTERS = {"ll.cuh",
                                  "  const u64 b = s.count[i] + moved;\n  ((u64*)s.step_at[i])[1] = b;\n"
                                  "  st_volatile((u64*)s.live_at[i] + 1, b);\n"
                                  "  if (i % 2) st_volatile((u64*)s.live_at[i] + 2, 0);\n",
                                  "  (void)s;\n  (void)i;\n  (void)moved;\n"};
static const Patch NO_REPORT = {"ll.cuh", "  if (a.seq > s.guard && ok) {", "  if (a.seq > s.guard && ok && false) {"};
static const Patch NO_SYNC_OR = {"ll.cuh", "  const int failed = __syncthreads_or(status != ST_OK);",
                                 "  const int failed = status != ST_OK;"};
static const Patch BARE_POLL = {"ll.cuh", "    if (++spins < 1024) continue;", "    continue;"};
// The bare exchange inside rnccl's kernel (same module, arguments, shared memory declared),
// taken at an early return; with `SYNC`, after thread 0 loads the epoch into shared memory and
// the block meets at a barrier, as rnccl's kernel does before its exchange.
#define BARE_AT "  __shared__ LlStart begun;\n  const Program* P = &a.ctl;\n"
#define BARE_BODY(SYNC)                                                                          \
  BARE_AT                                                                                        \
  "  if (a.bytes == 8) {\n"                                                                      \
  "    u32 e;\n"                                                                                 \
  "    if (" SYNC ") {\n"                                                                        \
  "      if (threadIdx.x == 0) begun.epoch = ld_volatile32((const u32*)a.state);\n"              \
  "      __syncthreads();\n"                                                                     \
  "      e = begun.epoch + 1;\n"                                                                 \
  "    }\n"                                                                                      \
  "    if (threadIdx.x != 0) return;\n"                                                          \
  "    if (!(" SYNC ")) e = ld_volatile32((const u32*)a.state) + 1;\n"                           \
  "    const u64 v = *(const u64*)a.src;\n"                                                      \
  "    const u64 half = (e & 1) * (u64)RNCCL_LL_HALF;\n"                                         \
  "    const u32 peer = 1 - a.ctl.rank;\n"                                                       \
  "    st_line(a.out[peer] + half, v, e);\n"                                                     \
  "    u32 x, f0, y, f1;\n"                                                                      \
  "    do {\n"                                                                                   \
  "      asm volatile(\"ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];\"\n"                   \
  "                   : \"=r\"(x), \"=r\"(f0), \"=r\"(y), \"=r\"(f1) : \"l\"(a.in[peer] + half) : \"memory\");\n" \
  "    } while (f0 != e || f1 != e);\n"                                                          \
  "    float* d = (float*)a.dst;\n"                                                              \
  "    d[0] = __uint_as_float((u32)v) + __uint_as_float(x);\n"                                   \
  "    d[1] = __uint_as_float((u32)(v >> 32)) + __uint_as_float(y);\n"                           \
  "    st_volatile32((u32*)a.state, e);\n"                                                       \
  "    return;\n"                                                                                \
  "  }\n"
static const Patch BARE_INSIDE = {"ll.cuh", BARE_AT, BARE_BODY("false")};
static const Patch BARE_INSIDE_SYNC = {"ll.cuh", BARE_AT, BARE_BODY("true")};

// The block path for up to 256 bytes too: what they took before ll_allreduce_warp.
static const Patch NO_WARP_PATH = {"ll.cuh", "  if (gridDim.x == 1 && a.bytes > 0 && a.bytes <= RNCCL_LL_WARP_BYTES) {",
                                   "  if (false) {"};

// Bisecting what "all of these" leaves above the bare exchange (2026-12-04): the finish
// reduced to thread 0's epoch store, and no connection-end lanes in ll_start.
static const Patch MIN_FINISH = {
    "ll.cuh", "  ll_finish(a, begun, &epoch, 0, failed, [&](u32, int) { return a.bytes; }, true);",
    "  if (tid == 0) st_volatile32((u32*)a.state, epoch);\n  (void)failed;"};
static const Patch NO_START_LANES = {"ll.cuh", "  } else if (t >= lane && t < lane + 2 * a.nranks) {",
                                     "  } else if (false) {"};
// The parts of ll_allreduce_warp a variant of LL_WARP=1 switches off (text as of 2026-12-04).
static const Patch W_NO_OP_STARTED = {"ll.cuh", "  }\n  op_started(P, a.seq);\n  const bool mine",
                                      "  }\n  const bool mine"};
static const Patch W_NO_COUNT_LOAD = {"ll.cuh", "    count = ((const u64*)step_at)[1];", "    count = 0;"};
static const Patch W_NO_COUNTERS = {"ll.cuh", "  if (end) {\n    const u64 b = count + a.bytes;",
                                    "  if (false) {\n    const u64 b = count + a.bytes;"};
static const Patch W_NO_REPORT = {"ll.cuh", "  if (a.seq > guard && !failed) {", "  if (false) {"};
static const Patch W_NO_SYNC = {"ll.cuh", "  const bool failed = __any_sync(~0u, status != ST_OK);\n  __syncwarp();",
                                "  const bool failed = status != ST_OK;"};

// The real kernel first (up to 256 bytes take ll_allreduce_warp), then the block path that
// they took before it, with one part off each, then all of them off, and the bare
// exchange inside the kernel. LL_BASE (a folder holding another kernels/, e.g. `git archive
// <commit> kernels | tar x -C <folder>`) adds that kernel unpatched after the real one.
static std::vector<Variant> all_variants() {
  std::vector<Variant> v = {{"rnccl (kernels/ as built)", {}}};
  if (getenv("LL_BASE")) v.push_back({"base (LL_BASE)", {}, true});
  if (getenv("LL_SHORT")) return v;
  if (getenv("LL_WARP")) {
    std::vector<Variant> w = {
        {"- op_started", {W_NO_OP_STARTED}},
        {"- count loads", {W_NO_COUNT_LOAD}},
        {"- counter stores", {W_NO_COUNTERS}},
        {"- finished report", {W_NO_REPORT}},
        {"- __any_sync, __syncwarp", {W_NO_SYNC}},
        {"- abort/timeout polls", {BARE_POLL}},
        {"- all of these", {W_NO_OP_STARTED, W_NO_COUNT_LOAD, W_NO_COUNTERS, W_NO_REPORT, W_NO_SYNC, BARE_POLL}},
    };
    v.insert(v.end(), w.begin(), w.end());
    return v;
  }
  std::vector<Variant> block = {
      {"block path", {}},
      {"- op_started", {NO_OP_STARTED}},
      {"- count loads in ll_start", {NO_COUNT_LOADS}},
      {"- ends' lanes in warp 1", {LANES_IN_WARP_0}},
      {"- finish on the lanes", {FINISH_ON_THREAD_0}},
      {"- ll_finish counters", {NO_COUNTERS}},
      {"- ll_finish report", {NO_REPORT}},
      {"- __syncthreads_or", {NO_SYNC_OR}},
      {"- abort/timeout polls", {BARE_POLL}},
      {"- all of these", {NO_OP_STARTED, NO_COUNT_LOADS, NO_COUNTERS, NO_REPORT, NO_SYNC_OR, BARE_POLL}},
      {"all off, finish: epoch only", {NO_OP_STARTED, NO_COUNT_LOADS, NO_REPORT, NO_SYNC_OR, BARE_POLL, MIN_FINISH}},
      {"- counters and ends' lanes", {NO_COUNTERS, NO_START_LANES}},
  };
  for (Variant& b : block) b.patches.push_back(NO_WARP_PATH);
  v.insert(v.end(), block.begin(), block.end());
  v.push_back({"bare inside rnccl's kernel", {BARE_INSIDE}});
  v.push_back({"  + barrier first", {BARE_INSIDE_SYNC}});
  return v;
}

static std::string slurp(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    fprintf(stderr, "ll_kernel: cannot read %s (run from the repository root)\n", path.c_str());
    exit(2);
  }
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// `dir`'s interp.cu and every header in it, by file name.
static std::map<std::string, std::string> kernel_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  DIR* d = opendir(dir.c_str());
  if (!d) {
    fprintf(stderr, "ll_kernel: no %s/ here (run from the repository root)\n", dir.c_str());
    exit(2);
  }
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "interp.cu" || (n.size() > 4 && n.compare(n.size() - 4, 4, ".cuh") == 0))
      files[n] = slurp(dir + "/" + n);
  }
  closedir(d);
  return files;
}

// The CUBIN of `files` patched by `v`, or exits naming the patch that no longer applies or
// NVRTC's log.
static std::vector<char> build(std::map<std::string, std::string> files, const Variant& v, int arch,
                               const std::vector<std::string>& includes) {
  for (const Patch& p : v.patches) {
    std::string& text = files[p.file];
    const size_t at = text.find(p.from);
    if (at == std::string::npos || text.find(p.from, at + 1) != std::string::npos) {
      fprintf(stderr, "ll_kernel: variant '%s': the text to patch in kernels/%s is not there once:\n%s\n",
              v.name, p.file, p.from);
      exit(2);
    }
    text.replace(at, strlen(p.from), p.to);
  }
  std::vector<const char*> names, texts;
  for (auto& f : files) {
    names.push_back(f.first.c_str());
    texts.push_back(f.second.c_str());
  }
  const std::string src = std::string("#include \"interp.cu\"\n") + FLOOR;
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), "ll_kernel.cu", (int)names.size(), texts.data(), names.data()) !=
      NVRTC_SUCCESS) {
    fprintf(stderr, "ll_kernel: NVRTC refused variant '%s'\n", v.name);
    exit(2);
  }
  std::vector<std::string> opts = {"--gpu-architecture=sm_" + std::to_string(arch), "-std=c++17",
                                   "-default-device", "-lineinfo", "--fmad=false", "-DRNCCL_DTYPE=7",
                                   "-DRNCCL_COMBINE=0"};
  for (const std::string& inc : includes) opts.push_back("--include-path=" + inc);
  std::vector<const char*> o;
  for (auto& s : opts) o.push_back(s.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, (int)o.size(), o.data());
  if (r != NVRTC_SUCCESS) {
    size_t n;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, 0);
    nvrtcGetProgramLog(prog, &log[0]);
    fprintf(stderr, "ll_kernel: variant '%s' does not compile (%s):\n%s\n", v.name, nvrtcGetErrorString(r),
            log.c_str());
    exit(2);
  }
  size_t n;
  nvrtcGetCUBINSize(prog, &n);
  std::vector<char> cubin(n);
  nvrtcGetCUBIN(prog, cubin.data());
  nvrtcDestroyProgram(&prog);
  return cubin;
}

static u64 device_zeroed(size_t n) {
  CUdeviceptr p;
  CK(cuMemAlloc(&p, n));
  CK(cuMemsetD8(p, 0, n));
  return p;
}

// Host-mapped, zeroed: `*host` is the host's view, the return value the device's.
static u64 mapped_zeroed(size_t n, void** host) {
  CK(cuMemHostAlloc(host, n, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  memset(*host, 0, n);
  CUdeviceptr d;
  CK(cuMemHostGetDevicePointer(&d, *host, 0));
  return d;
}

static double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 20000, rounds = argc > 2 ? atoi(argv[2]) : 5;
  const int gpu[2] = {argc > 4 ? atoi(argv[3]) : 0, argc > 4 ? atoi(argv[4]) : 1};
  const size_t bytes = getenv("LL_BYTES") ? strtoull(getenv("LL_BYTES"), nullptr, 10) : 8;
  if (bytes < 8 || bytes % 8 || bytes > 8192) {
    fprintf(stderr, "ll_kernel: LL_BYTES=%zu: give a multiple of 8 from 8 to 8192 (one block of 512 threads)\n", bytes);
    return 2;
  }
  const std::vector<Variant> variants = all_variants();
  CK(cuInit(0));
  CUdevice dev[2];
  CUcontext ctx[2];
  for (int r = 0; r < 2; r++) {
    CK(cuDeviceGet(&dev[r], gpu[r]));
    CK(cuDevicePrimaryCtxRetain(&ctx[r], dev[r]));
  }
  if (gpu[0] != gpu[1]) {
    for (int r = 0; r < 2; r++) {
      CK(cuCtxSetCurrent(ctx[r]));
      const CUresult e = cuCtxEnablePeerAccess(ctx[1 - r], 0);
      if (e != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) CK(e);
    }
  }
  int major, minor;
  CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev[0]));
  CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev[0]));
  std::vector<std::string> includes = {"/usr/local/cuda/include"};
  if (getenv("CUDA_INC")) includes.push_back(getenv("CUDA_INC"));
  const auto files = kernel_files("kernels");
  const auto base = getenv("LL_BASE") ? kernel_files(std::string(getenv("LL_BASE")) + "/kernels") : files;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<char>> cubins(variants.size());
  std::vector<std::thread> builders;
  for (size_t v = 0; v < variants.size(); v++)
    builders.emplace_back([&, v] {
      cubins[v] = build(variants[v].from_base ? base : files, variants[v], major * 10 + minor, includes);
    });
  for (auto& b : builders) b.join();
  printf("built %zu variants in %.1f s\n", variants.size(),
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  // Per rank: its kernels (the two floors, then the variants), stream and arguments.
  const size_t nk = variants.size() + 2;
  std::vector<CUfunction> fn[2];
  CUstream stream[2];
  LlArgs args[2] = {};
  u64 dst[2];
  void* report[2];
  u64 area[2];
  for (int r = 0; r < 2; r++) {
    CK(cuCtxSetCurrent(ctx[r]));
    for (size_t v = 0; v < variants.size(); v++) {
      CUmodule m;
      CK(cuModuleLoadData(&m, cubins[v].data()));
      CUfunction f;
      if (v == 0) {
        CK(cuModuleGetFunction(&f, m, "ll_kernel_floor"));
        fn[r].push_back(f);
        CK(cuModuleGetFunction(&f, m, "ll_kernel_floor_small"));
        fn[r].push_back(f);
      }
      CK(cuModuleGetFunction(&f, m, "rnccl_ll_allreduce_f32_sum"));
      fn[r].push_back(f);
    }
    CK(cuStreamCreate(&stream[r], CU_STREAM_NON_BLOCKING));
    area[r] = device_zeroed(2u << 20);  // RNCCL_LL_AREA
  }
  for (int r = 0; r < 2; r++) {
    CK(cuCtxSetCurrent(ctx[r]));
    const int p = 1 - r;
    LlArgs& a = args[r];
    void *abort_word, *ops, *live;
    a.ctl.report = mapped_zeroed(64, &report[r]);
    a.ctl.abort = mapped_zeroed(64, &abort_word);
    a.ctl.ops = mapped_zeroed(64, &ops);
    a.ctl.claim = device_zeroed(64);
    a.ctl.finished = device_zeroed(64);
    a.ctl.timeout_ns = 10000000000ull;
    a.ctl.pre_f = 1.0;
    a.ctl.pre_i = 1;
    a.ctl.post_div = 1;
    a.ctl.rank = r;
    a.ctl.slot_bytes = 1 << 20;
    // Element j: (1 + r) (j / 2 + 1), times 10 when j is odd (the floors' first two: 1 + r,
    // 10 (1 + r)).
    std::vector<float> in(bytes / 4);
    for (size_t j = 0; j < in.size(); j++) in[j] = (1.0f + r) * (j % 2 ? 10.0f : 1.0f) * (float)(j / 2 + 1);
    a.src = device_zeroed(bytes);
    CK(cuMemcpyHtoD(a.src, in.data(), bytes));
    a.dst = dst[r] = device_zeroed(bytes);
    a.bytes = bytes;
    a.state = device_zeroed(8192);  // more than LL_STATE_BYTES
    a.nranks = 2;
    a.out[p] = area[p];
    a.in[p] = area[r];
    a.out_step[p] = device_zeroed(16);
    a.in_step[p] = device_zeroed(16);
    const u64 l = mapped_zeroed(128, &live);
    a.out_live[p] = l;
    a.in_live[p] = l + 64;
  }
  u64 seq = 0;  // every operation of every kernel continues the same state, as rnccl's do
  // The floors (k < 2) sum the first 8 bytes only.
  auto check = [&](const char* what, size_t k) {
    for (int r = 0; r < 2; r++) {
      CK(cuCtxSetCurrent(ctx[r]));
      std::vector<float> out(k < 2 ? 2 : bytes / 4);
      CK(cuMemcpyDtoH(out.data(), dst[r], out.size() * 4));
      CK(cuMemsetD8(dst[r], 0, bytes));
      const u32 code = *(volatile u32*)report[r];
      for (size_t j = 0; j < out.size(); j++) {
        const float want = 3.0f * (j % 2 ? 10.0f : 1.0f) * (float)(j / 2 + 1);
        if (out[j] != want || code != 0) {
          fprintf(stderr, "ll_kernel: %s: rank %d element %zu is %g (want %g), report code %u\n", what, r, j,
                  out[j], want, code);
          exit(1);
        }
      }
    }
  };
  auto launch = [&](size_t k, int n) {
    for (int i = 0; i < n; i++) {
      seq++;
      for (int r = 0; r < 2; r++) {
        CK(cuCtxSetCurrent(ctx[r]));
        LlArgs a = args[r];
        a.seq = seq;
        SmallArgs small = {a.src, a.dst, a.state, a.out[1 - r], a.in[1 - r]};
        void* params[] = {k == 1 ? (void*)&small : (void*)&a};
        CK(cuLaunchKernel(fn[r][k], 1, 1, 1, 512, 1, 1, 0, stream[r], params, nullptr));
      }
    }
  };
  auto sync = [&] {
    for (int r = 0; r < 2; r++) {
      CK(cuCtxSetCurrent(ctx[r]));
      CK(cuStreamSynchronize(stream[r]));
    }
  };
  auto us_since = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count() / iters;
  };
  std::vector<std::vector<double>> launched(nk), first(nk), replay(nk);
  auto name = [&](size_t k) {
    return k == 0 ? "bare exchange (floor)" : k == 1 ? "floor, 40-byte arguments" : variants[k - 2].name;
  };
  for (int round = 0; round < rounds; round++) {
    for (size_t k = 0; k < nk; k++) {
      launch(k, 200);
      sync();
      auto t = std::chrono::steady_clock::now();
      launch(k, iters);
      sync();
      launched[k].push_back(us_since(t));
      check(name(k), k);
      CUgraph g[2];
      CUgraphExec ex[2];
      for (int r = 0; r < 2; r++) {
        CK(cuCtxSetCurrent(ctx[r]));
        CK(cuStreamBeginCapture(stream[r], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      }
      launch(k, iters);
      // Every capture ends before any graph is instantiated, as in perf/ll_floor.cu.
      for (int r = 0; r < 2; r++) {
        CK(cuCtxSetCurrent(ctx[r]));
        CK(cuStreamEndCapture(stream[r], &g[r]));
      }
      for (int r = 0; r < 2; r++) {
        CK(cuCtxSetCurrent(ctx[r]));
        CK(cuGraphInstantiate(&ex[r], g[r], 0));
      }
      sync();
      double best = 1e30;
      for (int l = 0; l < 3; l++) {
        t = std::chrono::steady_clock::now();
        for (int r = 0; r < 2; r++) {
          CK(cuCtxSetCurrent(ctx[r]));
          CK(cuGraphLaunch(ex[r], stream[r]));
        }
        sync();
        const double us = us_since(t);
        if (l == 0) {
          first[k].push_back(us);
        } else {
          best = std::min(best, us);
        }
      }
      replay[k].push_back(best);
      check(name(k), k);
      for (int r = 0; r < 2; r++) {
        CK(cuCtxSetCurrent(ctx[r]));
        CK(cuGraphExecDestroy(ex[r]));
        CK(cuGraphDestroy(g[r]));
      }
    }
  }
  printf("%zu-byte LL all-reduce kernel (floors: 8), 2 ranks on GPUs %d %d, %d operations, median of %d rounds, "
         "us/op\n", bytes, gpu[0], gpu[1], iters, rounds);
  printf("%-28s %9s %10s %8s %14s %13s\n", "kernel", "launched", "1st graph", "replay", "replay-rnccl",
         "replay/floor");
  const double floor = median(replay[0]), real = median(replay[2]);
  for (size_t k = 0; k < nk; k++) {
    const double x = median(replay[k]);
    printf("%-28s %9.2f %10.2f %8.2f %+14.2f %13.2f\n", name(k), median(launched[k]), median(first[k]), x,
           x - real, x / floor);
  }
  return 0;
}
