// Every nftables program kpc's golden fixtures give, as sequences a node would apply: the full
// transaction of a snapshot, then (for kube-proxy fixtures with steps) each step's stale-chain
// deletion and partial transaction from the step before. IPv4 and IPv6 where the node has the
// family; the example's pinned programs (fixtures/example/expected) as well. Shared by the unit
// test of the netlink encoder's vocabulary and the kernel test of its encodings.
#pragma once

#include <string>
#include <vector>

#include "compiler/support/net.h"

namespace kpc::test {

struct NftProgramSequence {
  std::string name;  ///< fixture (and family)
  IPFamily family = IPFamily::V4;
  bool fastpath = false;              ///< table inet kube-proxy-fastpath (a flowtable: not loadable here)
  std::vector<std::string> programs;  ///< in the order a node applies them; [0] is a full program
};

/// All of them, in a fixed order.
std::vector<NftProgramSequence> golden_nft_program_sequences();

/// `nft --debug=netlink list ruleset` with the element lines of each set in sorted order (the
/// kernel lists a hash set in an order of its own per set).
std::string sorted_set_elements(const std::string& debug_listing);

}  // namespace kpc::test
