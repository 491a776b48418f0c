// The iptables side of a behavioural comparison (issue 5: `kpc diff`, and level 2 of
// `kpc verify`): two RulesetStates compared by the mode-neutral core (verifier/sem/compare.h).
//
//  1. Semantic hashes (affected.cpp): each chain is hashed without comments and
//     with jump targets replaced by the target's hash, so renamed chains and
//     comment edits hash alike. Equal hashes for every built-in chain: the rule
//     sets are equivalent, nothing to explore. Otherwise the differing rules are
//     located by walking both chain graphs in parallel, and the destination
//     atoms they can affect are collected (all atoms when a difference sits
//     where a DNAT may already have rewritten the destination).
//  2-3. sem::compare_sides over two iptables sides (the engine, engine.h, and the
//     reference tracer, verifier/trace) for those atoms: regions, witnesses, the
//     concrete self-check.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "verifier/sem/compare.h"
#include "verifier/state/state.h"
#include "verifier/symbolic/engine.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::symbolic {

sem::CompareResult compare_states(const RulesetState& before, const RulesetState& after,
                                  const sem::CompareOptions& options);

/// The iptables side of a comparison (its engine and the reference tracer) over a universe
/// built over (at least) this state; the engine interns the state's affinity keys into it.
/// For comparisons other than compare_states' (a program of another mode on the other side).
std::unique_ptr<sem::CompareSide> make_side(const RulesetState& state, sem::Universe& u,
                                            const sem::CompareOptions& options);

/// The class of exactly one concrete packet (its interfaces must be universe atoms;
/// its remembered lists, if any, must name one list the engine knows).
sem::PacketClass point_class(const trace::Packet& p, const sem::Universe& u, const Engine& e);
/// The concrete tracer's result in the shape of sem::distribution_at (outcomes merged);
/// recent lists are named by the keys the symbolic layer gives them in that state
/// (affinity_lists.h).
std::vector<sem::OutcomeShare> concrete_distribution(const trace::TraceResult& r, const RulesetState& state);

/// Step 1: which destination atoms can behave differently.
sem::AffectedAtoms affected_atoms(const RulesetState& a, const RulesetState& b, const sem::Universe& u);

}  // namespace kpc::verifier::symbolic
