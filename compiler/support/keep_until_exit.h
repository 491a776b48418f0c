// Memory a one-shot command does not free: the process's end returns it at once.
#pragma once

#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace kpc {

/// Takes v over and never destroys it: for kpc's one-shot commands, whose models at 10,000
/// Services are 1-2 GB of small objects that took 0.15-0.6 s to free after the answer was
/// known (docs/performance.md, sessions 13 and 14); the kernel reclaims the pages when the
/// process exits. Not for kpc-applier or any loop: what is kept here is never freed.
/// Returns the kept object, which stays where it is until the process ends.
template <class T>
std::decay_t<T>& keep_until_exit(T&& v) {
  static std::mutex m;
  static auto* kept = new std::vector<std::shared_ptr<void>>;  // never destroyed, on purpose
  auto p = std::make_shared<std::decay_t<T>>(std::forward<T>(v));
  std::decay_t<T>& ref = *p;
  std::lock_guard<std::mutex> lock(m);
  kept->push_back(std::move(p));
  return ref;
}

}  // namespace kpc
