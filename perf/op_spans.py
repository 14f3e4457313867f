"""Instruments kernels/direct.cuh and kernels/symmetric.cuh (the direct and symmetric kernels) in
place for perf/op_spans.sh: block 0 of every operation stamps its start (%globaltimer) into a
module global, every block's thread 0 its end (the latest wins), and at every 256th operation
block 0 prints operations 100..254 of the 256 as `OP r<rank> s<seq % 256> S<bytes> start <ns>
end <ns>`. perf/op_spans.sh restores the files after the build; this never lands in main.

Exits non-zero, naming the text, when the kernels no longer hold what it patches.
"""

import sys


def rep(text, old, new, path):
    if text.count(old) != 1:
        sys.exit(f"perf/op_spans.py: {path} no longer holds (once):\n{old}")
    return text.replace(old, new)


DBG = """#ifndef RNCCL_ABI_ONLY

// perf/op_spans.py: [rank & 1][seq & 255] = {block 0's start, the last block's end, bytes}.
__device__ unsigned long long rnccl_op_spans[2][256][3];
__device__ __forceinline__ u64 op_span_now() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ void op_span_start(u32 me, u64 seq, u64 bytes) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    rnccl_op_spans[me & 1][seq & 255][1] = 0;
    rnccl_op_spans[me & 1][seq & 255][2] = bytes;
    rnccl_op_spans[me & 1][seq & 255][0] = op_span_now();
  }
}
__device__ __forceinline__ void op_span_end(u32 me, u64 seq) {
  if (threadIdx.x != 0) return;
  atomicMax(&rnccl_op_spans[me & 1][seq & 255][1], (unsigned long long)op_span_now());
  if (blockIdx.x == 0 && (seq & 255) == 255)
    for (int i = 100; i < 255; i++)
      printf("OP r%u s%d S%llu start %llu end %llu\\n", me, i, rnccl_op_spans[me & 1][i][2],
             rnccl_op_spans[me & 1][i][0], rnccl_op_spans[me & 1][i][1]);
}

// The slot of block"""

path = "kernels/direct.cuh"
s = open(path).read()
s = rep(s, "#ifndef RNCCL_ABI_ONLY\n\n// The slot of block", DBG, path)
s = rep(s, "  const bool active = b < B;\n  u64* rounds_done",
        "  const bool active = b < B;\n  op_span_start(me, a.seq, a.bytes);\n  u64* rounds_done", path)
s = rep(s, """shard : mine;
    });
  }
}""", """shard : mine;
    });
  }
  op_span_end(me, a.seq);
}""", path)
open(path, "w").write(s)

path = "kernels/symmetric.cuh"
s = open(path).read()
s = rep(s, "  u64* counted = (u64*)a.state + RNCCL_SYM_COUNT_WORD + (active ? b : 0);",
        "  op_span_start(me, a.seq, a.bytes);\n"
        "  u64* counted = (u64*)a.state + RNCCL_SYM_COUNT_WORD + (active ? b : 0);", path)
s = rep(s, """ag ? mine : theirs;
    });
  }
}""", """ag ? mine : theirs;
    });
  }
  op_span_end(me, a.seq);
}""", path)
open(path, "w").write(s)
