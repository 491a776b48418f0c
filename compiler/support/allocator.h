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

}  // namespace kpc
