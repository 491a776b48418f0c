// Two independent computations on two threads (the machine kpc verifies on has at least two
// cores): the nft comparison's per-side work (a 10,000-Service state's universe cuts, its
// reference index, its listing), the halves of a large nft parse, the halves of a state's
// copy. Each computation must touch only its own data: the nft model's look-up indexes are
// built lazily, so two threads must never read the same table.
#pragma once

#include <exception>
#include <thread>

namespace kpc {

/// Runs f on a second thread while g runs on this one; an exception of either is rethrown
/// here once both are done (f's first).
template <class F, class G>
void side_by_side(F f, G g) {
  std::exception_ptr side_error;
  std::thread side([&] {
    try {
      f();
    } catch (...) {
      side_error = std::current_exception();
    }
  });
  try {
    g();
  } catch (...) {
    side.join();
    throw;
  }
  side.join();
  if (side_error) std::rethrow_exception(side_error);
}

}  // namespace kpc
