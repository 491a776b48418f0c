// `kpc verify` and `kpc diff` on nftables input (issue 16 §4): cmd_verify.cpp / cmd_diff.cpp
// decide the back end (from the files' content, a snapshot's mode, or --backend nftables)
// and hand the request here. Verdicts, formats and exit codes are the iptables ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kpc::cli {

struct NftVerifyRequest {
  std::string state, partial, full;           ///< programs (transactions or listings)
  std::vector<std::string> next, prior;       ///< or snapshots (compiled with the nftables back end)
  std::string format = "text";
  bool verbose = false, allow_equivalent = false;
  std::vector<std::string> local_addresses;
  uint64_t max_input_size = 0;
  std::string node;
};
int run_verify_nft(const NftVerifyRequest& r);

struct NftDiffRequest {
  std::string before, after;  ///< nft transactions, `nft list` listings, or snapshots (compiled: nftables, every family)
  std::string format = "text";
  std::vector<std::string> local_addresses;
  uint64_t max_input_size = 0;
  bool explore_all = false;
  size_t max_classes = 2000;  ///< classes listed (0: every one)
  std::string node;           ///< --node, for a side that is a snapshot
  bool verbose = false;       ///< -v: the comparison's own words, at full width
};
int run_diff_nft(const NftDiffRequest& r);

}  // namespace kpc::cli
