// Drift repair: given what a node really has (an iptables-save dump, or any state)
// and the full program kpc compiled for the desired snapshot, write the smallest
// restore program that brings the node to the full program's state:
//  - chains the full program declares whose rules already match are left out;
//  - chains that differ or are missing are declared (flushed) and rewritten;
//  - kube-proxy's per-service chains (KUBE-SVC/SVL/EXT/FW/SEP) that exist but are
//    not in the desired state are flushed and deleted (-X), as kube-proxy does.
// The result is checked with the restore state machine before it is returned:
// applying it to the actual state must give the same state as applying the full
// program, or repair() fails (no program is better than a wrong one).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "verifier/state/state.h"

namespace kpc::applier {

struct RepairStats {
  size_t chains_kept = 0;       ///< declared by the full program and already identical
  size_t chains_written = 0;    ///< declared and rewritten
  size_t chains_deleted = 0;    ///< stale per-service chains deleted
  size_t rules_written = 0;
  size_t jumps_restored = 0;    ///< kube-proxy's rules in built-in chains put back
};

struct RepairOptions {
  verifier::Flavor flavor = verifier::Flavor::Legacy;
  /// Also put back kube-proxy's jump rules in the built-in chains (nat PREROUTING ->
  /// KUBE-SERVICES ...) that the actual state lacks, inserted at the top as kube-proxy
  /// does. kube-proxy writes them outside its restore input, so the full program has
  /// none; a node's dump without one is drift.
  bool ensure_jumps = false;
};

struct RepairResult {
  bool ok = false;
  std::string program;  ///< the restore program (--noflush input)
  std::string error;    ///< why no program could be produced
  RepairStats stats;
};

/// actual: the node's state (e.g. from verifier::load_save). full_program: the
/// restore text kpc compiled for the desired snapshot (restore form, as kube-proxy
/// writes it). flavor: which iptables-restore semantics to check against.
RepairResult repair(const verifier::RulesetState& actual, std::string_view full_program, verifier::Flavor flavor);
RepairResult repair(const verifier::RulesetState& actual, std::string_view full_program, const RepairOptions& options);

/// kube-proxy's jump rules (verifier/trace kube_proxy_jumps) that `state` lacks although
/// the full program declares their target chain, in kube-proxy's order, as (table,
/// built-in chain, rule text "ARGS -j TO").
struct MissingJump {
  ir::TableId table;
  std::string chain, rule;
};
std::vector<MissingJump> missing_jumps(const verifier::RulesetState& state, std::string_view full_program);

/// The chains a restore program declares, per table, and those it deletes (-X).
struct ProgramChains {
  std::map<ir::TableId, std::vector<std::string>> declared, deleted;
};
ProgramChains program_chains(std::string_view program);
/// kube-proxy's per-service chains (KUBE-SVC/SVL/EXT/FW/SEP-): stale when no program declares them.
bool is_service_chain(std::string_view chain);

}  // namespace kpc::applier
