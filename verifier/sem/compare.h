// Behavioural comparison of two programs, whatever their modes (issue 5: `kpc diff`, level 2
// of `kpc verify`; issue 16 §1: one core, a front end per mode): is there a packet whose
// outcome distribution differs? Each side is a CompareSide — a mode's symbolic explorer and
// its concrete reference tracer (verifier/symbolic for iptables states, verifier/nft_sym for
// nft ones) — over one shared universe.
//
//  1. Narrowing, the front end's (it knows its programs): the destination atoms a
//     difference can reach (AffectedAtoms; iptables: semantic chain hashes,
//     symbolic/affected.cpp; nft: map elements and chain reachability, nft_sym/affected.cpp).
//  2. For each affected atom and origin, both sides are explored symbolically. Equal leaf
//     multisets: same behaviour. Otherwise the leaves are refined into regions with exact
//     outcome distributions and the regions of both sides are intersected; every
//     intersection whose distributions differ is a difference, every one involving an
//     Unknown outcome is undecided.
//  3. Each difference gets a witness packet, traced concretely on both sides with the
//     reference tracers, whose outcome must agree with the symbolic one (a self-check; a
//     disagreement is a bug in kpc and is reported as such).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "verifier/ipset/ipset.h"
#include "verifier/sem/outcome.h"
#include "verifier/sem/packet_class.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::sem {

struct CompareOptions {
  /// The node's addresses (addrtype LOCAL, routing to the node). Loopback is always local.
  std::vector<IPAddr> local_addresses;
  /// The node's ipsets (`ipset save`): `-m set` matches are decided on them (else predicates).
  const ipset::Table* ipsets = nullptr;
  /// At most this many destination atoms are explored (0: all). When more reach a
  /// difference, an evenly spread sample is explored and the result says so (`sampled`):
  /// its classes are real differences, but classes of unexplored atoms are not listed and
  /// "equivalent" cannot be concluded from it. kpc drift uses it (its verdict comes from
  /// the chains; a missing PREROUTING jump touches every atom).
  size_t max_atoms = 0;
  /// Explore every atom, skipping the front end's narrowing (tests, and a reference).
  bool explore_all = false;
  /// Stop collecting after this many differences (the count still says how many classes differ).
  size_t max_reported = 2000;
  /// Witnesses traced concretely (paths, services, self-check): per start class and in all.
  /// The concrete tracer copies each path per statistic branch (quadratic in a service's
  /// endpoints), so big diffs trace a sample; the others share their start class's services.
  size_t traced_per_start = 3, traced_total = 200;
};

/// One outcome of a distribution, concrete for the class it is shown for.
struct OutcomeShare {
  trace::Verdict verdict = trace::Verdict::Accept;
  std::string route;
  std::string dnat;  ///< "ip:port" or ""
  bool masquerade = false;
  std::string snat;
  uint32_t mark = 0;  ///< for the witness's arriving mark
  std::string options;   ///< target options that are behaviour ("reject-with tcp-reset", ...)
  std::string affinity;  ///< recent lists written, by canonical key
  std::string unknown;
  Probability probability;
  friend bool operator==(const OutcomeShare&, const OutcomeShare&) = default;
};
std::string format_share(const OutcomeShare& s);  ///< "p=33.3% (1/3) ACCEPT(forward) DNAT 10.1.0.1:80 masquerade mark 0x4000"
std::string format_outcome(const OutcomeShare& s);  ///< the same without the probability
std::string format_probability(const Probability& p);  ///< "33.3% (1431655765/4294967296)", or "1"

struct Difference {
  Origin origin = Origin::Arriving;
  std::string cls;  ///< describe() of the class
  trace::Packet witness_a, witness_b;  ///< the same packet (recent lists named per side)
  std::string witness_text;            ///< "tcp 203.0.113.10:40000 -> 10.96.0.10:80 from arriving, ct NEW, ..."
  std::vector<OutcomeShare> before, after;
  /// "ns/name:port" named on the paths of the witness on either side (from each
  /// class's own leaves: exactly what the concrete tracer names for the witness).
  std::vector<std::string> services;
  std::vector<std::string> path_before, path_after;  ///< rules of the most likely outcome's path
  bool undecided = false;  ///< an Unknown outcome: neither proved equal nor different
  /// Tests the model cannot evaluate that the witness's outcomes depend on, with the
  /// values taken ("[--match-set KUBE-X dst,dst (nat PREROUTING, arriving)] holds"). A
  /// difference that holds for every value is decided; one that holds for some is undecided.
  std::vector<std::string> assumptions;
  bool traced = false;     ///< the witness was run through the concrete tracer (paths, self-check)
};

struct CompareResult {
  bool equivalent_by_hash = false;
  size_t atoms = 0, atoms_explored = 0, classes_compared = 0, leaves = 0;
  size_t differing_classes = 0, undecided_classes = 0;
  bool sampled = false;  ///< only a sample of the affected atoms was explored (CompareOptions::max_atoms)
  std::string narrowing;  ///< how the atoms to explore were chosen
  std::vector<Difference> differences;  ///< proven differences, then undecided ones
  /// Every service filed against a differing or undecided class, listed or not (the first
  /// service named on the class's paths, "" for none; sorted, once each): past
  /// CompareOptions::max_reported classes, `differences` names only some of them.
  std::vector<std::string> services_differing;
  std::vector<std::string> self_check_failures;  ///< symbolic vs concrete disagreements (bugs)
  bool equivalent() const { return differing_classes == 0 && undecided_classes == 0 && !sampled; }
};

/// The class of exactly one concrete packet (its interfaces must be universe atoms), as a
/// remembered client of affinity id `client` (0: a new client; the front end knows which
/// id its records of the packet's `remembered` have: symbolic::point_class).
PacketClass point_class(const trace::Packet& p, const Universe& u, uint32_t client);
/// A packet's exact outcome distribution according to the leaves of a start class holding it.
std::vector<OutcomeShare> distribution_at(const std::vector<Leaf>& leaves, const PacketClass& point,
                                          uint32_t mark, const Universe& u);
/// Same outcomes with the same probabilities (order aside).
bool same_outcomes(const std::vector<OutcomeShare>& a, const std::vector<OutcomeShare>& b);

/// Which destination atoms can behave differently (step 1, by the front end). all = every atom.
struct AffectedAtoms {
  /// Equivalent by the front end's narrowing alone (iptables: every built-in chain hashes alike).
  bool equal = false;
  bool all = false;
  std::vector<char> atom;  ///< per atom of the universe
  std::string why_all;
};

/// One side of a comparison, whatever its mode (issue 16: one core, a front end per mode):
/// its symbolic explorer and its concrete reference tracer. symbolic::compare_states gives
/// the comparison two iptables sides; nft_sym::compare_nft two nft ones.
class CompareSide {
 public:
  virtual ~CompareSide() = default;
  /// Every leaf of a start class (its destination in one atom of the shared universe).
  virtual std::vector<Leaf> explore(const PacketClass& start, Origin origin) = 0;
  /// The witness as a concrete packet of this side (affinity records named as it names them).
  virtual trace::Packet concrete(const Witness& w, Origin origin) const = 0;
  /// The concrete tracer's outcome distribution for the packet (OutcomeShare's shape, merged),
  /// adding the services its paths name to *services and its most likely path to *path.
  virtual std::vector<OutcomeShare> trace(const trace::Packet& p, std::vector<std::string>* services,
                                          std::vector<std::string>* path) = 0;
};

/// Steps 2-3 of the comparison over two sides sharing one universe, for the atoms aff marks.
CompareResult compare_sides(const Universe& u, CompareSide& before, CompareSide& after, AffectedAtoms aff,
                            const CompareOptions& options);
/// same_outcomes for a front end's concrete shares (decided outcomes, exact probabilities).
bool same_shares(const std::vector<OutcomeShare>& a, const std::vector<OutcomeShare>& b);

}  // namespace kpc::verifier::sem
