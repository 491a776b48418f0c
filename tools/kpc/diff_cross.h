// `kpc diff` across back ends (issue 16 §4): `kpc diff A B` where A and B are programs of
// different modes (an iptables-save dump / restore program vs an nft transaction / `nft list
// ruleset`), or `kpc diff SNAPSHOT --from-backend iptables --to-backend nftables`, which
// compiles both. cmd_diff.cpp hands such requests here (cmd_diff_cross.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kpc::cli {

struct CrossDiffRequest {
  std::string a, b;                  ///< b == "": the snapshot a compiled twice
  std::string from_backend, to_backend;  ///< "" = from the file (rule files) / iptables, nftables (snapshots)
  bool v6 = false;                   ///< --backend ip6tables: the IPv6 programs
  std::string format = "text";
  bool show_known = false, verbose = false, kernel_numgen = false;
  std::vector<std::string> local_addresses;
  uint64_t max_input_size = 0;
  std::string node, flavor = "legacy", jumps = "auto";
  /// --cross-engine: per-class (both symbolic front ends), sample (representative packets), or
  /// auto: per class up to kAutoPerClassRules rules a side, by sample above, said in the report.
  std::string engine = "auto";
};

/// auto's bound: a side with more rules is compared by sample (at 10,000 Services, ~400,000
/// iptables rules, the per-class comparison takes minutes and ~10 GB; docs/performance.md).
inline constexpr size_t kAutoPerClassRules = 20000;

/// Runs it: 0 every difference is a known one, 1 any other (or undecided), 2 error.
int run_diff_cross(const CrossDiffRequest& r);

}  // namespace kpc::cli
