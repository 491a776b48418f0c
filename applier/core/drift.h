// Drift check (issue 12, part 4): does a node do what kube-proxy would make it do?
//
// Only kube-proxy's part of the node is compared: the chains the full program
// declares, the per-service chains it would have deleted (stale), and its jump rules
// in the built-in chains (nat PREROUTING -> KUBE-SERVICES ...). Everything else —
// Docker's, a CNI's, a user's chains and rules, also in the built-in chains — is
// foreign and ignored.
//
// The report lists, per chain, the rules that are missing, extra, or only in another
// order; then the consequence for packets: the node as it is against the node after
// the repair (its foreign rules identical on both sides), compared by behaviour, so
// every difference is one kube-proxy's part causes, filed by Service with a witness.
// The repair is the smallest program that puts kube-proxy's part back (applier/core/
// repair.h, with the missing jumps), checked with the restore state machine.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "applier/core/repair.h"
#include "verifier/state/state.h"
#include "verifier/sem/compare.h"

namespace kpc::applier {

struct ChainDrift {
  enum class Kind : uint8_t { Missing, Changed, Stale };
  ir::TableId table = ir::TableId::Nat;
  std::string chain;
  Kind kind = Kind::Changed;
  std::vector<std::string> missing_rules;  ///< "-A CHAIN ..." the node lacks (as many as lacking)
  std::vector<std::string> extra_rules;    ///< "-A CHAIN ..." the node has beyond the program's
  bool reordered = false;                  ///< same rules, another order
};
const char* chain_drift_kind_name(ChainDrift::Kind k);

struct DriftOptions {
  verifier::Flavor flavor = verifier::Flavor::Legacy;
  std::vector<IPAddr> local_addresses;  ///< the node's addresses (packet-level comparison)
  size_t max_reported = 2000;
  /// Destination atoms explored for the packet-level consequence (a sample beyond; the
  /// drift verdict itself comes from the chains, exactly).
  size_t max_atoms = 2000;
  const verifier::ipset::Table* ipsets = nullptr;  ///< the node's ipsets (`ipset save`), for -m set
};

struct DriftReport {
  bool ok = false;      ///< false: no report (error says why)
  std::string error;
  size_t chains_compared = 0;
  std::vector<ChainDrift> chains;     ///< kube-proxy's chains that differ, table then name order
  std::vector<MissingJump> jumps;     ///< kube-proxy's jumps the built-in chains lack
  verifier::sem::CompareResult packets;  ///< node as it is -> node after the repair
  std::string repair;                 ///< the smallest repair program ("" when there is no drift)
  RepairStats repair_stats;
  bool drift() const { return !chains.empty() || !jumps.empty(); }
};

/// actual: the node's state (an iptables-save dump); full_program: the restore text
/// kpc compiled for the snapshot (kube-proxy's full sync).
DriftReport check_drift(const verifier::RulesetState& actual, std::string_view full_program,
                        const DriftOptions& options);

}  // namespace kpc::applier
