// Random pairs of kube-proxy iptables programs for the iptables verifier's property tests: a
// random cluster and the same after 1-4 everyday changes (cluster_changes.h), compiled for both
// families and loaded as a node holds them (kube-proxy's jumps from the built-in chains added).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/state/state.h"

namespace kpc::test {

/// An iptables restore program applied to an empty state (legacy semantics), kube-proxy's
/// jumps added; nullopt if either fails.
std::optional<verifier::RulesetState> load_iptables_program(const std::string& text, IPFamily family);

struct IptablesPair {
  verifier::RulesetState before, after;
  std::vector<IPAddr> local;  ///< both snapshots' node addresses of the family
};

/// One pair per family that both snapshots compile for. Draws from rapidcheck (call it inside a
/// property; a cluster the loader refuses is discarded with RC_PRE). One in
/// `flip_masquerade_all_one_in` (0: never) pairs is instead the cluster and the same with
/// iptables.masqueradeAll flipped: every Service's chains change.
std::vector<IptablesPair> random_iptables_pairs(int flip_masquerade_all_one_in = 0);

}  // namespace kpc::test
