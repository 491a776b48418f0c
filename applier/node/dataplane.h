// The applier's dataplane: what it needs from a node's kernel, behind an interface so that
// the sync loop runs in unit tests without one.
//  * KernelDataplane (kernel_dataplane.h): the real tools, as kube-proxy runs them
//    (`iptables-restore --noflush -w`, `iptables -C/-I` for the jump rules, `iptables-save`;
//    `nft -f -`, `nft list table`).
//  * ModelDataplane (below): kpc's own models of those tools (verifier/state for
//    iptables-restore, verifier/nft for nft), with failures on demand: the unit tests' kernel.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/driver/backend.h"
#include "compiler/model/objects.h"
#include "verifier/nft/nft.h"
#include "verifier/state/state.h"

namespace kpc::applier {

/// (table, chain) pairs.
using ChainSet = std::set<std::pair<ir::TableId, std::string>>;

struct DataplaneResult {
  bool ok = true;
  std::string error;  ///< the tool's stderr (or why it could not run)
  static DataplaneResult failure(std::string e) { return DataplaneResult{false, std::move(e)}; }
};

class Dataplane {
 public:
  virtual ~Dataplane() = default;
  /// The iptables-restore semantics of this node's iptables (legacy or nft flavour).
  virtual verifier::Flavor flavor() const = 0;
  /// What the kernel holds: iptables -> `iptables-save` of the family (every table);
  /// nftables -> `nft list table FAMILY kube-proxy`, "" when there is no such table.
  virtual DataplaneResult read(BackendKind kind, IPFamily family, std::string* out) = 0;
  /// Applies a program: iptables -> `iptables-restore --noflush -w`; nftables -> `nft -f -`.
  virtual DataplaneResult apply(BackendKind kind, IPFamily family, const std::string& program) = 0;
  /// iptables: kube-proxy's jump rules in the built-in chains (verifier/trace kube_proxy_jumps),
  /// each checked with `-C` and inserted at the top with `-I` only when missing; the target
  /// chains must exist (the full program declares them). *inserted counts the -I.
  virtual DataplaneResult ensure_jumps(IPFamily family, const ChainSet& targets,
                                       size_t* inserted) = 0;
  /// kube-proxy's nfacct counters (`-m nfacct --nfacct-name NAME` needs the object), created
  /// when missing, as kube-proxy does at start-up. The models need none.
  virtual DataplaneResult ensure_nfacct(const std::vector<std::string>& names) { return {}; }
};

/// kpc's models as the kernel (unit tests; a dry run). Holds one iptables state and one nft
/// state per family; fail_next_applies makes the next applies fail as a real tool would
/// (the kernel unchanged), and every applied program is recorded.
class ModelDataplane final : public Dataplane {
 public:
  explicit ModelDataplane(verifier::Flavor flavor = verifier::Flavor::Legacy);
  verifier::Flavor flavor() const override { return flavor_; }
  DataplaneResult read(BackendKind kind, IPFamily family, std::string* out) override;
  DataplaneResult apply(BackendKind kind, IPFamily family, const std::string& program) override;
  DataplaneResult ensure_jumps(IPFamily family, const ChainSet& targets, size_t* inserted) override;

  int fail_next_applies = 0;
  struct Applied {
    BackendKind kind;
    IPFamily family;
    std::string program;
    bool ok;
  };
  std::vector<Applied> applied;
  size_t reads = 0;

  verifier::RulesetState& iptables(IPFamily f);
  verifier::nft::NftState& nft(IPFamily f) { return nft_[f == IPFamily::V4 ? 0 : 1]; }
  /// `iptables-save` of the model (no counters).
  std::string save(IPFamily f);

 private:
  verifier::Flavor flavor_;
  std::map<int, verifier::RulesetState> ipt_;
  verifier::nft::NftState nft_[2];
};

}  // namespace kpc::applier
