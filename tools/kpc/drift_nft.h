// `kpc drift` for an nftables node (cmd_drift_nft.cpp): cmd_drift.cpp decides the mode (the
// state's content, --backend, the snapshot's KubeProxyConfiguration.mode) and hands it here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kpc::cli {

struct NftDriftRequest {
  std::vector<std::string> inputs;  ///< the snapshot
  std::string state;                ///< `nft list ruleset` / `nft list table ip kube-proxy` (or a script)
  std::string output;               ///< -o: the repair transaction
  std::string format = "text";
  std::vector<std::string> local_addresses;
  uint64_t max_input_size = 0;
  size_t max_atoms = 2000;
  std::string node;
  bool verbose = false;
};

/// 0 no drift, 1 drift (repair written with -o), 2 error, 3 internal error.
int run_drift_nft(const NftDriftRequest& r);

}  // namespace kpc::cli
