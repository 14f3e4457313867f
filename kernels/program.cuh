// STAND-IN for the lead's program.cuh (branch nvrtc, for testing the NVRTC pipeline only): the
// shape of one step the interpreter runs. The real header replaces this one when merged.
#pragma once

namespace rnccl {

struct Step {
  const void* a;
  const void* b;
  void* dst;
  unsigned long long count;  // elements
};

}  // namespace rnccl
