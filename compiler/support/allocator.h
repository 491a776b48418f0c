// Which malloc a kpc program runs on, for `--version` (and the test that checks the fast
// allocator is really in use, not only linked). Header-only on purpose: KPC_WITH_MIMALLOC is
// defined per executable (kpc_use_fast_allocator in cmake/kpc.cmake), not for the libraries.
#pragma once

#include <cstdlib>
#include <string>

#ifdef KPC_WITH_MIMALLOC
#include <mimalloc.h>
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
/// Services build 1.3-2.2 GB of model state in a few seconds, and a fresh page is zeroed by
/// the kernel on first touch (a quarter to a third of those commands' time went to page
/// faults: docs/performance.md, session 13). mimalloc's arena is reserved up front (address
/// space only: nothing is committed until used) with transparent huge pages allowed, so the
/// kernel faults 2 MiB at a time. Not for kpc-applier, which holds its state for days and
/// should return what it frees. A no-op without mimalloc (sanitizer builds).
inline void tune_allocator_for_batch() {
#ifdef KPC_WITH_MIMALLOC
  mi_option_set(mi_option_large_os_pages, 1);
  (void)mi_reserve_os_memory(size_t{4} << 30, /*commit=*/false, /*allow_large=*/true);
#endif
}

}  // namespace kpc
