// simt.cpp: the SIMT emulation's scheduler, and the kernel source compiled
// for it. A launch hands blocks to a few OS threads; each runs one block at a
// time, its threads as fibers (ucontext) switched at barriers:
//
// - __syncthreads: a fiber waits until every thread of the block arrives;
// - a warp shuffle: each lane publishes its value, waits for the 32 lanes of
//   its warp, then reads its partner's (values are double-buffered, so one
//   barrier per shuffle suffices);
// - a barrier that cannot complete (some threads returned, or wait elsewhere)
//   is reported as an error naming the kernel and block, never a hang: on a
//   GPU it would be undefined behaviour.
//
// Nothing here throws across a fiber switch; errors are strings.

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// The kernel program: vsdk_gpu::KERNEL_FILES, in that order (a test checks).
#include "common.cu"
#include "elementwise.cu"
#include "movement.cu"
#include "linear.cu"
#include "normalization.cu"
#include "reduction.cu"
#include "attention.cu"
#include "resize.cu"
#include "sparse.cu"
#include "raster.cu"
#include "selftest.cu"

thread_local vips_simt_dim3 threadIdx;
thread_local vips_simt_dim3 blockIdx;
thread_local vips_simt_dim3 blockDim;
thread_local vips_simt_dim3 gridDim;

namespace vips_simt {

std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> kernels;
  return kernels;
}

namespace {

// ---- fiber contexts ----
// On x86-64 a switch saves the callee-saved registers on the old stack and
// swaps stack pointers: a few nanoseconds, where swapcontext makes a signal
// mask system call every time (it was a third of a suite's run time). The
// kernels never change MXCSR or the x87 control word, so they are not saved.
// Elsewhere, ucontext.
#if defined(__x86_64__)
extern "C" void vips_simt_switch(void** save_sp, void* load_sp);
asm(R"(
.pushsection .text
.globl vips_simt_switch
.hidden vips_simt_switch
.type vips_simt_switch, @function
vips_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size vips_simt_switch, .-vips_simt_switch
.popsection
)");

struct Context {
  void* sp = nullptr;
};

// Prepares `c` to start `entry` (which never returns) on the given stack.
void start_context(Context& c, char* stack, std::size_t size, void (*entry)()) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + size) & ~static_cast<std::uintptr_t>(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                               // entry's return address: never used
  *--sp = reinterpret_cast<void*>(entry);        // where the first switch "returns"
  for (int r = 0; r < 6; ++r) *--sp = nullptr;   // rbp rbx r12 r13 r14 r15
  c.sp = sp;
}

void switch_context(Context& from, Context& to) { vips_simt_switch(&from.sp, to.sp); }
#else
struct Context {
  ucontext_t uc;
};

void start_context(Context& c, char* stack, std::size_t size, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}

void switch_context(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

constexpr std::size_t kStackBytes = 64 * 1024;
constexpr unsigned kMaxThreads = 1024;
constexpr unsigned kWarp = 32;

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
  Context context;
  vips_simt_dim3 index;
  State state;
  // Shuffle values, double-buffered by the fiber's shuffle count.
  float published[2];
  unsigned shuffles;
};

// Fiber stacks in one allocation (one memory mapping: a guard page per
// stack would be two mappings each, and a process may have only 65,530).
// The lowest bytes of each stack hold a canary, checked after every block:
// a kernel overflowing its 64 KiB is an error naming the kernel.
constexpr std::size_t kCanaryBytes = 256;
constexpr unsigned char kCanary = 0xa5;

// One OS thread's worth of block execution, reused across launches.
struct Worker {
  std::unique_ptr<char[]> stacks{new char[kStackBytes * kMaxThreads]};
  Fiber fibers[kMaxThreads];
  Context scheduler;
  std::vector<unsigned char> dynamic_shared;
  unsigned threads = 0;
  unsigned current = 0;
  const Entry* entry = nullptr;
  void** params = nullptr;
  // Set by a fiber that misuses a primitive; ends the launch with this error.
  const char* misuse = nullptr;
};

thread_local Worker* worker = nullptr;

std::mutex pool_lock;
std::vector<std::unique_ptr<Worker>> pool;

std::unique_ptr<Worker> take_worker() {
  std::lock_guard<std::mutex> guard(pool_lock);
  if (pool.empty()) return std::unique_ptr<Worker>(new Worker());
  std::unique_ptr<Worker> w = std::move(pool.back());
  pool.pop_back();
  return w;
}

void give_worker(std::unique_ptr<Worker> w) {
  std::lock_guard<std::mutex> guard(pool_lock);
  pool.push_back(std::move(w));
}

void fiber_main() {
  Worker* w = worker;
  w->entry->invoke(w->entry->kernel, w->params);
  Fiber& f = w->fibers[w->current];
  f.state = State::Done;
  // The scheduler never resumes a Done fiber: this switch is its last.
  switch_context(f.context, w->scheduler);
}

// Suspends the current fiber in `state` until the scheduler releases it.
void wait_in(State state) {
  Worker* w = worker;
  Fiber& f = w->fibers[w->current];
  f.state = state;
  switch_context(f.context, w->scheduler);
}

std::string block_name(const char* kernel) {
  char text[160];
  std::snprintf(text, sizeof text, "%s, block (%u, %u, %u)", kernel, blockIdx.x, blockIdx.y,
                blockIdx.z);
  return text;
}

// Runs one block to completion. Returns "" or what went wrong.
std::string run_block(Worker& w, const char* kernel) {
  for (unsigned t = 0; t < w.threads; ++t) {
    Fiber& f = w.fibers[t];
    char* stack = w.stacks.get() + t * kStackBytes;
    std::memset(stack, kCanary, kCanaryBytes);
    start_context(f.context, stack, kStackBytes, fiber_main);
    f.index.x = t % blockDim.x;
    f.index.y = (t / blockDim.x) % blockDim.y;
    f.index.z = t / (blockDim.x * blockDim.y);
    f.state = State::Runnable;
    f.shuffles = 0;
  }
  w.misuse = nullptr;
  for (;;) {
    for (unsigned t = 0; t < w.threads; ++t) {
      if (w.fibers[t].state != State::Runnable) continue;
      w.current = t;
      threadIdx = w.fibers[t].index;
      switch_context(w.scheduler, w.fibers[t].context);
    }
    // Every fiber has now run until it returned or reached a barrier.
    unsigned done = 0, at_block = 0;
    for (unsigned t = 0; t < w.threads; ++t) {
      done += w.fibers[t].state == State::Done;
      at_block += w.fibers[t].state == State::AtBlockBarrier;
    }
    if (w.misuse != nullptr) return block_name(kernel) + ": " + w.misuse;
    if (done == w.threads) {
      // memcmp, not a loop over bytes: checked for every thread of every
      // block, a byte loop was 15 % of a SIMT run.
      static const std::vector<unsigned char> intact(kCanaryBytes, kCanary);
      for (unsigned t = 0; t < w.threads; ++t) {
        const char* bottom = w.stacks.get() + t * kStackBytes;
        if (std::memcmp(bottom, intact.data(), kCanaryBytes) != 0)
          return block_name(kernel) + ": a thread overflowed its 64 KiB fiber stack";
      }
      return "";
    }
    if (at_block == w.threads) {
      for (unsigned t = 0; t < w.threads; ++t) w.fibers[t].state = State::Runnable;
      continue;
    }
    bool released = false;
    for (unsigned base = 0; base < w.threads; base += kWarp) {
      const unsigned end = std::min(base + kWarp, w.threads);
      bool all = true;
      for (unsigned t = base; t < end; ++t) all = all && w.fibers[t].state == State::AtWarpBarrier;
      if (!all) continue;
      for (unsigned t = base; t < end; ++t) w.fibers[t].state = State::Runnable;
      released = true;
    }
    // No fiber is runnable after a sweep: unless a barrier was just
    // released, the waiting fibers wait forever.
    if (released) continue;
    char text[200];
    std::snprintf(text, sizeof text,
                  "a barrier can never complete: of %u threads, %u returned, %u wait at "
                  "__syncthreads, the others at a warp shuffle",
                  w.threads, done, at_block);
    return block_name(kernel) + ": " + text;
  }
}

}  // namespace
}  // namespace vips_simt

void __syncthreads() { vips_simt::wait_in(vips_simt::State::AtBlockBarrier); }

float vips_simt_shfl_xor(float v, int lane_mask) {
  using namespace vips_simt;
  Worker* w = worker;
  const unsigned me = w->current;
  Fiber& f = w->fibers[me];
  const unsigned slot = f.shuffles++ & 1u;
  f.published[slot] = v;
  wait_in(State::AtWarpBarrier);
  const unsigned base = me - me % kWarp;
  const unsigned partner = base + ((me - base) ^ static_cast<unsigned>(lane_mask & 31));
  if (partner >= w->threads) {
    w->misuse = "a warp shuffle reads a lane past the block's last thread (partial warp)";
    return v;
  }
  return w->fibers[partner].published[slot];
}

void* vips_simt_dynamic_shared() { return vips_simt::worker->dynamic_shared.data(); }

namespace {

void write_error(char* error, std::size_t error_len, const std::string& text) {
  if (error == nullptr || error_len == 0) return;
  const std::size_t n = std::min(error_len - 1, text.size());
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}

}  // namespace

namespace vips_simt {
int launch(const char* name, const unsigned* grid, const unsigned* block, unsigned shared_bytes,
           void** params, const std::size_t* param_sizes, std::size_t n_params, unsigned max_threads, char* error,
           std::size_t error_len);
}

// Launches `name` over `grid` blocks of `block` threads and waits for it.
// Returns 0, or 1 with a message in `error`.
extern "C" int vips_simt_launch(const char* name, const unsigned* grid, const unsigned* block,
                                unsigned shared_bytes, void** params, const std::size_t* param_sizes, std::size_t n_params,
                                unsigned max_threads, char* error, std::size_t error_len) {
  // Nothing may unwind into Rust: thread creation and allocation can throw.
  try {
    return vips_simt::launch(name, grid, block, shared_bytes, params, param_sizes, n_params, max_threads,
                             error, error_len);
  } catch (const std::exception& e) {
    write_error(error, error_len, std::string(name) + ": the emulator failed: " + e.what());
  } catch (...) {
    write_error(error, error_len, std::string(name) + ": the emulator failed");
  }
  return 1;
}

int vips_simt::launch(const char* name, const unsigned* grid, const unsigned* block,
                      unsigned shared_bytes, void** params, const std::size_t* param_sizes, std::size_t n_params,
                      unsigned max_threads, char* error, std::size_t error_len) {
  using namespace vips_simt;
  const auto found = registry().find(name);
  if (found == registry().end()) {
    write_error(error, error_len, std::string("no kernel named `") + name + "` in the kernel source");
    return 1;
  }
  const Entry* entry = &found->second;
  if (entry->arity != n_params) {
    write_error(error, error_len,
                std::string(name) + ": takes " + std::to_string(entry->arity) + " parameters, got " +
                    std::to_string(n_params));
    return 1;
  }
  for (std::size_t i = 0; i < n_params; ++i) {
    if (param_sizes[i] != entry->sizes[i]) {
      write_error(error, error_len,
                  std::string(name) + ": parameter " + std::to_string(i) + " is " +
                      std::to_string(entry->sizes[i]) + " bytes in the kernel source, the launch passes " +
                      std::to_string(param_sizes[i]));
      return 1;
    }
  }
  const unsigned long long threads =
      static_cast<unsigned long long>(block[0]) * block[1] * block[2];
  if (threads == 0 || threads > kMaxThreads) {
    write_error(error, error_len,
                std::string(name) + ": " + std::to_string(threads) + " threads per block (1 to 1024)");
    return 1;
  }
  const unsigned long long blocks = static_cast<unsigned long long>(grid[0]) * grid[1] * grid[2];
  if (blocks == 0) return 0;
  std::atomic<unsigned long long> next{0};
  std::mutex failure_lock;
  std::string failure;
  auto record = [&](const std::string& e) {
    std::lock_guard<std::mutex> guard(failure_lock);
    if (failure.empty()) failure = e;
  };
  auto run_blocks = [&]() {
    std::unique_ptr<Worker> w = take_worker();
    worker = w.get();
    w->threads = static_cast<unsigned>(threads);
    w->entry = entry;
    w->params = params;
    w->dynamic_shared.assign(shared_bytes, 0);
    blockDim = vips_simt_dim3{block[0], block[1], block[2]};
    gridDim = vips_simt_dim3{grid[0], grid[1], grid[2]};
    for (;;) {
      {
        std::lock_guard<std::mutex> guard(failure_lock);
        if (!failure.empty()) break;
      }
      const unsigned long long b = next.fetch_add(1);
      if (b >= blocks) break;
      blockIdx = vips_simt_dim3{static_cast<unsigned>(b % grid[0]),
                                static_cast<unsigned>((b / grid[0]) % grid[1]),
                                static_cast<unsigned>(b / (static_cast<unsigned long long>(grid[0]) * grid[1]))};
      std::string e = run_block(*w, name);
      if (!e.empty()) record(e);
    }
    worker = nullptr;
    give_worker(std::move(w));
  };
  // Runs blocks until none is left or one failed. Nothing escapes it: an
  // exception on a helper thread would terminate the host process.
  auto work = [&]() noexcept {
    try {
      run_blocks();
    } catch (const std::exception& e) {
      record(std::string(name) + ": the emulator failed: " + e.what());
    } catch (...) {
      record(std::string(name) + ": the emulator failed");
    }
  };
  const unsigned os_threads =
      static_cast<unsigned>(std::min<unsigned long long>(std::max(1u, max_threads), blocks));
  std::vector<std::thread> helpers;
  try {
    for (unsigned i = 1; i < os_threads; ++i) helpers.emplace_back(work);
  } catch (...) {
    // No more threads: the ones started and this one share the blocks.
  }
  work();
  for (auto& h : helpers) h.join();
  if (!failure.empty()) {
    write_error(error, error_len, failure);
    return 1;
  }
  return 0;
}

// The registered kernels' names, for the provider's consistency test.
extern "C" std::size_t vips_simt_kernel_count() { return vips_simt::registry().size(); }

extern "C" const char* vips_simt_kernel_name(std::size_t i) {
  if (i >= vips_simt::registry().size()) return nullptr;
  auto it = vips_simt::registry().begin();
  std::advance(it, static_cast<long>(i));
  return it->first.c_str();
}
