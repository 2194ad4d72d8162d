// alloc_crossings: a preload that counts the heap allocations a program makes per operation, and which of them
// are freed on another thread than the one that made them (with glibc's malloc, such frees go back to the
// maker's arena under its lock, so a submitting thread and the workers that finish its requests contend for
// it). Run by hand on the CPU machine:
//
//   MCOUNT=1 LD_PRELOAD=build/lab/libferry_alloc_crossings.so build/lab/ferry_submit_profile 20000 64 16
//
// The program calls alloc_crossings_start() on its main thread when the measured part begins (allocations
// before it are not tracked) and alloc_crossings_report(operations) at the end: per operation, the main thread's
// and the other threads' allocations and frees, the crossings each way, and the call sites (return addresses,
// as FILE+OFFSET for addr2line -f -C -i -e FILE OFFSET) of the crossings and of all allocations that happen at
// least once in 20 operations.
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using MallocFn = void* (*)(std::size_t);
using FreeFn = void (*)(void*);
using CallocFn = void* (*)(std::size_t, std::size_t);
using ReallocFn = void* (*)(void*, std::size_t);
using MemalignFn = int (*)(void**, std::size_t, std::size_t);
MallocFn real_malloc;
FreeFn real_free;
CallocFn real_calloc;
ReallocFn real_realloc;
MemalignFn real_memalign;

thread_local bool t_inside = false;  // this thread is in the tracker (backtrace allocates on first use)
int g_main_tid = 0;

constexpr std::size_t kSlots = 1u << 22;  // open addressing, linear probing
constexpr int kFrames = 6;
struct Live {
  std::uintptr_t ptr;
  int tid;
  unsigned size;
  void* frames[kFrames];
};
Live* g_live = nullptr;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

struct Site {
  void* frames[kFrames];
  unsigned size;
  bool made_on_main;
  long count;
};
constexpr int kSites = 4096;
struct Sites {
  Site sites[kSites];
  int count = 0;
  void add(void* const* frames, unsigned size, bool made_on_main) {
    int s = 0;
    while (s < count && !(sites[s].made_on_main == made_on_main && sites[s].size == size &&
                          std::memcmp(sites[s].frames, frames, sizeof sites[s].frames) == 0)) {
      ++s;
    }
    if (s == count && s < kSites) {
      std::memcpy(sites[s].frames, frames, sizeof sites[s].frames);
      sites[s].size = size;
      sites[s].made_on_main = made_on_main;
      sites[s].count = 0;
      ++count;
    }
    if (s < kSites) ++sites[s].count;
  }
};
Sites g_made, g_crossed;  // every allocation; those freed on another thread
long g_allocs[2], g_frees[2], g_crossings[2];  // [0]: main thread, [1]: the others

alignas(16) char g_boot[1 << 16];  // dlsym may allocate before the real functions are known
std::size_t g_boot_used = 0;

int current_tid() {
  thread_local int tid = static_cast<int>(syscall(SYS_gettid));
  return tid;
}
int role(int tid) { return tid == g_main_tid ? 0 : 1; }
std::size_t slot_of(std::uintptr_t p) { return ((p >> 4) * 0x9E3779B97F4A7C15ull) >> 42; }

void resolve() {
  if (real_malloc) return;
  real_calloc = reinterpret_cast<CallocFn>(dlsym(RTLD_NEXT, "calloc"));
  real_free = reinterpret_cast<FreeFn>(dlsym(RTLD_NEXT, "free"));
  real_realloc = reinterpret_cast<ReallocFn>(dlsym(RTLD_NEXT, "realloc"));
  real_memalign = reinterpret_cast<MemalignFn>(dlsym(RTLD_NEXT, "posix_memalign"));
  real_malloc = reinterpret_cast<MallocFn>(dlsym(RTLD_NEXT, "malloc"));
}

void* boot_alloc(std::size_t n) {
  void* p = g_boot + g_boot_used;
  g_boot_used += (n + 15) & ~std::size_t{15};
  return p;
}

void note_alloc(void* p, std::size_t size) {
  if (p == nullptr || t_inside || g_live == nullptr) return;
  t_inside = true;
  Live e{reinterpret_cast<std::uintptr_t>(p), current_tid(), static_cast<unsigned>(size), {}};
  void* frames[kFrames + 2];
  const int n = backtrace(frames, kFrames + 2);
  for (int i = 2; i < n; ++i) e.frames[i - 2] = frames[i];  // past this function and malloc itself
  pthread_mutex_lock(&g_lock);
  ++g_allocs[role(e.tid)];
  g_made.add(e.frames, e.size, role(e.tid) == 0);
  std::size_t i = slot_of(e.ptr);
  while (g_live[i].ptr != 0) i = (i + 1) & (kSlots - 1);
  g_live[i] = e;
  pthread_mutex_unlock(&g_lock);
  t_inside = false;
}

// Removes slot `i` keeping every other entry reachable from its home slot (backward shift).
void erase_slot(std::size_t i) {
  for (;;) {
    g_live[i].ptr = 0;
    std::size_t j = i;
    for (;;) {
      j = (j + 1) & (kSlots - 1);
      if (g_live[j].ptr == 0) return;
      const std::size_t home = slot_of(g_live[j].ptr);
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stays) break;
    }
    g_live[i] = g_live[j];
    i = j;
  }
}

void note_free(void* p) {
  if (p == nullptr || t_inside || g_live == nullptr) return;
  t_inside = true;
  const int tid = current_tid();
  pthread_mutex_lock(&g_lock);
  ++g_frees[role(tid)];
  std::size_t i = slot_of(reinterpret_cast<std::uintptr_t>(p));
  while (g_live[i].ptr != 0 && g_live[i].ptr != reinterpret_cast<std::uintptr_t>(p)) i = (i + 1) & (kSlots - 1);
  if (g_live[i].ptr != 0) {
    const Live e = g_live[i];
    erase_slot(i);
    if (e.tid != tid) {
      const bool main_made = role(e.tid) == 0;
      ++g_crossings[main_made ? 0 : 1];
      g_crossed.add(e.frames, e.size, main_made);
    }
  }
  pthread_mutex_unlock(&g_lock);
  t_inside = false;
}

void print_sites(const char* title, const Sites& table, long operations) {
  std::fprintf(stderr, "%s, by call site (at least once in 20 operations):\n", title);
  const double n = static_cast<double>(operations);
  for (int s = 0; s < table.count; ++s) {
    const Site& site = table.sites[s];
    if (site.count * 20 < operations) continue;
    std::fprintf(stderr, "  %.2f per operation, %u bytes, made on %s:", site.count / n, site.size,
                 site.made_on_main ? "main" : "another thread");
    for (void* f : site.frames) {
      Dl_info where{};
      if (f != nullptr && dladdr(f, &where) != 0 && where.dli_fname != nullptr) {
        const char* slash = std::strrchr(where.dli_fname, '/');
        std::fprintf(stderr, " %s+%#lx", slash ? slash + 1 : where.dli_fname,
                     static_cast<unsigned long>(static_cast<char*>(f) - static_cast<char*>(where.dli_fbase)));
      } else {
        std::fprintf(stderr, " %p", f);
      }
    }
    std::fprintf(stderr, "\n");
  }
}

bool in_boot(void* p) { return p >= static_cast<void*>(g_boot) && p < static_cast<void*>(g_boot + sizeof g_boot); }

}  // namespace

extern "C" {

void* malloc(std::size_t n) {
  if (real_malloc == nullptr) {
    if (t_inside) return boot_alloc(n);
    t_inside = true;
    resolve();
    t_inside = false;
  }
  void* p = real_malloc(n);
  note_alloc(p, n);
  return p;
}

void* calloc(std::size_t count, std::size_t size) {
  if (real_calloc == nullptr) return std::memset(boot_alloc(count * size), 0, count * size);
  void* p = real_calloc(count, size);
  note_alloc(p, count * size);
  return p;
}

void* realloc(void* old, std::size_t n) {
  resolve();
  note_free(old);
  void* p = real_realloc(old, n);
  note_alloc(p, n);
  return p;
}

int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  resolve();
  const int rc = real_memalign(out, alignment, n);
  if (rc == 0) note_alloc(*out, n);
  return rc;
}

void free(void* p) {
  if (in_boot(p)) return;
  resolve();
  note_free(p);
  real_free(p);
}

__attribute__((visibility("default"))) void alloc_crossings_start() {
  if (std::getenv("MCOUNT") == nullptr) return;
  resolve();
  t_inside = true;
  g_live = static_cast<Live*>(real_calloc(kSlots, sizeof(Live)));
  g_main_tid = current_tid();
  t_inside = false;
}

__attribute__((visibility("default"))) void alloc_crossings_report(long operations) {
  if (g_live == nullptr || operations <= 0) return;
  t_inside = true;
  pthread_mutex_lock(&g_lock);
  const double n = static_cast<double>(operations);
  std::fprintf(stderr,
               "per operation: main thread %.2f allocations, %.2f frees; other threads %.2f allocations, %.2f frees; "
               "made on main and freed elsewhere %.2f; made elsewhere and freed on another thread %.2f\n",
               g_allocs[0] / n, g_frees[0] / n, g_allocs[1] / n, g_frees[1] / n, g_crossings[0] / n, g_crossings[1] / n);
  print_sites("freed on another thread", g_crossed, operations);
  print_sites("every allocation", g_made, operations);
  pthread_mutex_unlock(&g_lock);
  t_inside = false;
}

}  // extern "C"
