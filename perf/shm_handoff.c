/*
 * shm_handoff.c -- the ceiling of a one-way slot FIFO between two processes on this host.
 *
 * A producer pinned to CPU 0 copies 64 KiB slices of a private 1 MiB buffer into one of 8 slots
 * of a shared mapping and publishes a counter (release); a consumer pinned to CPU 1 waits for it
 * (acquire), copies the slot out and publishes its own counter. This is the data path of
 * rnccl's shared-memory transport (and NCCL's Simple protocol) with nothing else around it, so
 * it shows what the machine's cross-core copy path gives at the moment it runs.
 * Prints the bytes handed over per second, in GB/s (1e9 B/s).
 * Build: cc -O2 -o shm_handoff shm_handoff.c
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOT (64 << 10)
#define NSLOTS 8
#define BUF (1 << 20)
#define ROUNDS 2000

struct counters {
  _Alignas(128) atomic_ulong tail; /* slots posted by the producer */
  _Alignas(128) atomic_ulong head; /* slots consumed */
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

int main(void) {
  char *m = mmap(0, 4096 + NSLOTS * SLOT, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) { perror("mmap"); return 1; }
  struct counters *c = (struct counters *)m;
  char *slots = m + 4096;
  unsigned long n = (unsigned long)ROUNDS * (BUF / SLOT);
  pid_t child = fork();
  char *buf = aligned_alloc(4096, BUF);
  memset(buf, 1, BUF);
  if (child == 0) {
    pin(1);
    for (unsigned long i = 0; i < n; i++) {
      while (atomic_load_explicit(&c->tail, memory_order_acquire) <= i) {}
      memcpy(buf + (i * SLOT) % BUF, slots + (i % NSLOTS) * SLOT, SLOT);
      atomic_store_explicit(&c->head, i + 1, memory_order_release);
    }
    _exit(0);
  }
  pin(0);
  double t0 = now();
  for (unsigned long i = 0; i < n; i++) {
    while (i - atomic_load_explicit(&c->head, memory_order_acquire) >= NSLOTS) {}
    memcpy(slots + (i % NSLOTS) * SLOT, buf + (i * SLOT) % BUF, SLOT);
    atomic_store_explicit(&c->tail, i + 1, memory_order_release);
  }
  while (atomic_load(&c->head) < n) {}
  double t = now() - t0;
  waitpid(child, 0, 0);
  printf("%.2f\n", (double)n * SLOT / t / 1e9);
  return 0;
}
