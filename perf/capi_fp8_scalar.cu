/* FP8 reductions and device-memory PreMulSum scalars through nccl.h on two GPUs, one thread
 * driving both (issue 30's C test on the device machine; perf/capi_fp8_scalar.sh builds it and
 * runs it on NCCL and on rnccl's libnccl.so.2):
 *   1. ncclFloat8e4m3 and ncclFloat8e5m2 all-reduce with sum, prod, max, min and avg of every
 *      finite FP8 code against every other (65,536 pairs per type and operation), compared bit
 *      for bit with NCCL's rule computed on the host by CUDA's own conversions: the exact result
 *      of two inputs rounded to half, then to FP8 with saturation (avg: each input times
 *      FP8(1/2) rounded the same way first); all-gather of FP8 moves the codes intact;
 *   2. float all-reduce with ncclRedOpCreatePreMulSum(ncclScalarDevice): each rank's scalar
 *      (1 and 2) lives in its GPU's memory; the result is 1·x0 + 2·x1; the scalars are changed on
 *      the stream (3 and 4) and the same operation is run again; then the all-reduce is captured
 *      into a CUDA graph per GPU, the scalars changed to 5 and 6 and the graphs replayed.
 * Prints "capi_fp8_scalar ok" and exits 0 when every check passed. */
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

#define CHECK(cmd) do { ncclResult_t r_ = (cmd); if (r_ != ncclSuccess) { \
  printf("FAILED %s:%d %s -> %d (%s)\n", __FILE__, __LINE__, #cmd, (int)r_, ncclGetLastError(NULL)); exit(1); } } while (0)
#define CUDA(cmd) do { cudaError_t e_ = (cmd); if (e_ != cudaSuccess) { \
  printf("FAILED %s:%d %s -> %s\n", __FILE__, __LINE__, #cmd, cudaGetErrorString(e_)); exit(1); } } while (0)

static ncclComm_t comms[2];
static cudaStream_t streams[2];

static __nv_fp8_interpretation_t interp(ncclDataType_t t) { return t == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2; }

static float value(unsigned char code, ncclDataType_t t) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(code, interp(t));
  return __half2float(__half(h));
}

/* One reduction step as NCCL's kernels round it: to half, then to FP8, saturating. */
static unsigned char step(float exact, ncclDataType_t t) {
  __half h = __float2half_rn(exact);
  return __nv_cvt_halfraw_to_fp8(__half_raw(h), __NV_SATFINITE, interp(t));
}

static int isNan(unsigned char code, ncclDataType_t t) {
  unsigned char m = code & 0x7f;
  return t == ncclFloat8e4m3 ? m == 0x7f : m > 0x7c;
}

static int fp8(ncclDataType_t t) {
  const char* tn = t == ncclFloat8e4m3 ? "e4m3" : "e5m2";
  /* The finite codes (and, for E5M2, the infinities' neighbours excluded): x[r][i]. */
  unsigned char codes[256];
  int nc = 0;
  for (int c = 0; c < 256; c++)
    if (!isNan((unsigned char)c, t) && !(t == ncclFloat8e5m2 && (c & 0x7f) == 0x7c)) codes[nc++] = (unsigned char)c;
  size_t n = (size_t)nc * nc;
  unsigned char* in[2];
  for (int r = 0; r < 2; r++) in[r] = (unsigned char*)malloc(n);
  for (int a = 0; a < nc; a++)
    for (int b = 0; b < nc; b++) {
      in[0][(size_t)a * nc + b] = codes[a];
      in[1][(size_t)a * nc + b] = codes[b];
    }
  unsigned char *dev[2], *out = (unsigned char*)malloc(2 * n);
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaMalloc((void**)&dev[r], 2 * n));
  }
  ncclRedOp_t ops[5] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const char* names[5] = {"sum", "prod", "max", "min", "avg"};
  int bad = 0;
  for (int o = 0; o < 5; o++) {
    for (int r = 0; r < 2; r++) {
      CUDA(cudaSetDevice(r));
      CUDA(cudaMemcpy(dev[r], in[r], n, cudaMemcpyHostToDevice));
    }
    CHECK(ncclGroupStart());
    for (int r = 0; r < 2; r++) CHECK(ncclAllReduce(dev[r], dev[r] + n, n, t, ops[o], comms[r], streams[r]));
    CHECK(ncclGroupEnd());
    float half_scalar = value(step(0.5f, t), t);
    for (int r = 0; r < 2; r++) {
      CUDA(cudaSetDevice(r));
      CUDA(cudaStreamSynchronize(streams[r]));
      CUDA(cudaMemcpy(out, dev[r] + n, n, cudaMemcpyDeviceToHost));
      int wrong = 0;
      for (size_t i = 0; i < n; i++) {
        float x = value(in[0][i], t), y = value(in[1][i], t), e;
        switch (o) {
          case 0: e = x + y; break;
          case 1: e = x * y; break;
          case 2: e = x > y ? x : y; break;
          case 3: e = x < y ? x : y; break;
          default: e = value(step(x * half_scalar, t), t) + value(step(y * half_scalar, t), t);
        }
        unsigned char want = step(e, t);
        /* +0 and -0 compare equal (a sum of +x and -x may carry either sign). */
        int same = out[i] == want || (value(out[i], t) == 0.0f && value(want, t) == 0.0f);
        if (!same && wrong++ < 3)
          printf("  %s %s rank %d: %g op %g = code %#04x, want %#04x\n", tn, names[o], r, x, y, out[i], want);
      }
      if (wrong) printf("%s %s rank %d: %d of %zu wrong\n", tn, names[o], r, wrong, n);
      bad += wrong;
    }
  }
  /* All-gather (in place): the codes arrive intact. */
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaMemcpy(dev[r] + r * n, in[r], n, cudaMemcpyHostToDevice));
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < 2; r++) CHECK(ncclAllGather(dev[r] + r * n, dev[r], n, t, comms[r], streams[r]));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaStreamSynchronize(streams[r]));
    CUDA(cudaMemcpy(out, dev[r], 2 * n, cudaMemcpyDeviceToHost));
    if (memcmp(out, in[0], n) || memcmp(out + n, in[1], n)) {
      printf("%s all_gather rank %d: codes changed\n", tn, r);
      bad++;
    }
    cudaFree(dev[r]);
  }
  printf("fp8 %s: %zu pairs x 5 operations, %d wrong\n", tn, n, bad);
  free(in[0]);
  free(in[1]);
  free(out);
  return bad;
}

/* Runs the captured or direct all-reduce and checks 1 + r-th scalar weighting. */
static int checkScaled(float* dev[2], const float k[2], size_t n, const char* what) {
  int bad = 0;
  float got[4];
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaStreamSynchronize(streams[r]));
    CUDA(cudaMemcpy(got, dev[r] + n, sizeof got, cudaMemcpyDeviceToHost));
    /* x_r[i] = r + 1 + i. */
    for (int i = 0; i < 4; i++) {
      float want = k[0] * (1 + i) + k[1] * (2 + i);
      if (got[i] != want) {
        printf("%s rank %d element %d: %g, want %g\n", what, r, i, got[i], want);
        bad++;
      }
    }
  }
  if (!bad) printf("%s: ok (scalars %g, %g)\n", what, k[0], k[1]);
  return bad;
}

static int deviceScalar(void) {
  const size_t n = 1 << 20;
  float* dev[2];
  float* scalar[2];
  ncclRedOp_t op[2];
  float* host = (float*)malloc(n * sizeof(float));
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaMalloc((void**)&dev[r], 2 * n * sizeof(float)));
    CUDA(cudaMalloc((void**)&scalar[r], sizeof(float)));
    for (size_t i = 0; i < n; i++) host[i] = (float)(r + 1 + (i % 1024));
    CUDA(cudaMemcpy(dev[r], host, n * sizeof(float), cudaMemcpyHostToDevice));
    float k = (float)(r + 1);
    CUDA(cudaMemcpy(scalar[r], &k, sizeof k, cudaMemcpyHostToDevice));
    CHECK(ncclRedOpCreatePreMulSum(&op[r], scalar[r], ncclFloat, ncclScalarDevice, comms[r]));
  }
  int bad = 0;
  float k[2] = {1, 2};
  CHECK(ncclGroupStart());
  for (int r = 0; r < 2; r++) CHECK(ncclAllReduce(dev[r], dev[r] + n, n, ncclFloat, op[r], comms[r], streams[r]));
  CHECK(ncclGroupEnd());
  bad += checkScaled(dev, k, n, "device scalar");
  /* New values written on the stream, read by the next run. */
  for (int r = 0; r < 2; r++) {
    k[r] = (float)(r + 3);
    CUDA(cudaSetDevice(r));
    CUDA(cudaMemcpyAsync(scalar[r], &k[r], sizeof(float), cudaMemcpyHostToDevice, streams[r]));
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < 2; r++) CHECK(ncclAllReduce(dev[r], dev[r] + n, n, ncclFloat, op[r], comms[r], streams[r]));
  CHECK(ncclGroupEnd());
  bad += checkScaled(dev, k, n, "device scalar changed on the stream");
  /* Captured once, replayed after the scalars changed. */
  cudaGraph_t graph[2];
  cudaGraphExec_t exec[2];
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeGlobal));
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < 2; r++) CHECK(ncclAllReduce(dev[r], dev[r] + n, n, ncclFloat, op[r], comms[r], streams[r]));
  CHECK(ncclGroupEnd());
  /* Both captures end before either graph is instantiated (not allowed while a capture in the
   * global mode runs). */
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaStreamEndCapture(streams[r], &graph[r]));
  }
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaGraphInstantiate(&exec[r], graph[r], 0));
  }
  for (int r = 0; r < 2; r++) {
    k[r] = (float)(r + 5);
    CUDA(cudaSetDevice(r));
    CUDA(cudaMemset(dev[r] + n, 0, n * sizeof(float)));
    CUDA(cudaMemcpy(scalar[r], &k[r], sizeof(float), cudaMemcpyHostToDevice));
  }
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaGraphLaunch(exec[r], streams[r]));
  }
  bad += checkScaled(dev, k, n, "device scalar in a replayed graph");
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    cudaGraphExecDestroy(exec[r]);
    cudaGraphDestroy(graph[r]);
    CHECK(ncclRedOpDestroy(op[r], comms[r]));
    cudaFree(dev[r]);
    cudaFree(scalar[r]);
  }
  free(host);
  return bad;
}

int main(void) {
  int devs[2] = {0, 1};
  CHECK(ncclCommInitAll(comms, 2, devs));
  for (int r = 0; r < 2; r++) {
    CUDA(cudaSetDevice(r));
    CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
  }
  int bad = fp8(ncclFloat8e4m3) + fp8(ncclFloat8e5m2) + deviceScalar();
  for (int r = 0; r < 2; r++) CHECK(ncclCommDestroy(comms[r]));
  if (bad) {
    printf("capi_fp8_scalar FAILED (%d)\n", bad);
    return 1;
  }
  printf("capi_fp8_scalar ok\n");
  return 0;
}
