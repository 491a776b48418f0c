// Which malloc a kpc program runs on, for `--version` (and the test that checks the fast
// allocator is really in use, not only linked). Header-only on purpose: KPC_WITH_MIMALLOC is
// defined per executable (kpc_use_fast_allocator in cmake/kpc.cmake), not for the libraries.
#pragma once

#include <cstdlib>
#include <string>

#ifdef KPC_WITH_MIMALLOC
#include <mimalloc.h>
#include <unistd.h>

#include <algorithm>
#endif

namespace kpc {

/// "allocator mimalloc 2.0.9", or "allocator glibc malloc" (a sanitizer build, or
/// -DKPC_MIMALLOC=OFF); "... (linked but not in use)" if mimalloc is linked yet malloc()
/// is not its own (a link order that put libc first): that would be a build bug.
inline std::string allocator_line() {
#ifdef KPC_WITH_MIMALLOC
  const int v = mi_version();  // 209 = 2.0.9
  std::string line = "allocator mimalloc " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." +
                     std::to_string(v % 10);
  void* probe = std::malloc(64);
  const bool in_use = mi_is_in_heap_region(probe);
  std::free(probe);
  if (!in_use) line += " (linked but not in use)";
  return line;
#else
  return "allocator glibc malloc";
#endif
}

/// For kpc's one-shot commands, before they read anything: kpc verify / diff at 10,000
/// Services build 1.3-2.2 GB of model state in a few seconds, and a page the kernel hands out
/// is zeroed on first touch; by default mimalloc gives what is freed back to the kernel and
/// faults it in again later (kpc diff across back ends at 10k: ~970,000 page faults for a 2.2 GB
/// peak). An arena reserved up front keeps freed memory in the process for reuse (~560,000;
/// docs/performance.md, session 13). Committed means mapped read-write, not touched: nothing
/// counts in the resident set until used. A quarter of the machine's memory at most (a
/// reservation the kernel refuses is skipped: mimalloc then maps as it would have). Not for
/// kpc-applier, which runs for days and should return what it frees. A no-op without mimalloc
/// (sanitizer builds).
inline void tune_allocator_for_batch() {
#ifdef KPC_WITH_MIMALLOC
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const size_t quarter = static_cast<size_t>(pages) / 4 * static_cast<size_t>(page);
  (void)mi_reserve_os_memory(std::min(size_t{4} << 30, quarter), /*commit=*/true, /*allow_large=*/false);
#endif
}

}  // namespace kpc
