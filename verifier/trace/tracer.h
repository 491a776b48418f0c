// A concrete single-packet tracer over a RulesetState (issue 5, part 3).
//
// One packet — addresses, protocol, ports, where it comes from, its mark and
// conntrack state — is walked through the tables the way netfilter orders its
// hooks for the first packet of a connection:
//
//   from a pod or an external host (it arrives on an interface):
//     PREROUTING (raw, mangle, nat) -> routing on the (possibly DNAT'ed) destination ->
//       local destination:  INPUT (mangle, filter, security, nat)
//       otherwise:          FORWARD (mangle, filter, security) -> POSTROUTING (mangle, nat)
//   from the node itself (locally generated):
//     OUTPUT (raw, mangle, nat, filter, security) -> POSTROUTING (mangle, nat)
//       and, for a local destination, back in through lo:
//       PREROUTING (raw, mangle) -> INPUT (mangle, filter, security)   (nat is not
//       consulted again: the connection's NAT bindings are already made)
//
// Chains are run with call/goto/return semantics and built-in policies. The nat
// table is consulted only for conntrack state NEW. Tables the state does not
// hold are skipped. Matches and targets are evaluated exactly where the packet
// determines them (docs/verifier.md, "Tracing a packet"); anything the packet
// does not determine — an unmodelled match or target, an interface the caller
// did not name, an ipset — ends that branch with an Unknown outcome naming the
// rule, never a guess.
//
// `-m statistic --mode random` splits the trace: both branches are followed and
// each outcome carries its exact probability (product of t/2^31 and (2^31-t)/2^31
// factors of the kernel thresholds, see rational.h). `-m recent --rcheck/--update`
// is decided by the client model: a new client is in no list; a remembered
// client is in the lists named in Packet::remembered (kube-proxy names each list
// after its KUBE-SEP chain).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ir/rule.h"
#include "compiler/support/net.h"
#include "verifier/state/state.h"
#include "verifier/ipset/ipset.h"
#include "verifier/trace/effects.h"
#include "verifier/trace/rational.h"

namespace kpc::verifier::trace {

enum class Origin : uint8_t { Pod, Node, External };
const char* origin_name(Origin o);
std::optional<Origin> origin_from_name(std::string_view s);

/// IP protocol numbers the tracer sends.
constexpr uint8_t kProtoTCP = 6, kProtoUDP = 17, kProtoSCTP = 132;
std::optional<uint8_t> proto_from_name(std::string_view s);  ///< "tcp" / "udp" / "sctp" (any case)
const char* proto_name(uint8_t p);

struct Packet {
  IPAddr src, dst;
  uint8_t proto = kProtoTCP;
  std::optional<uint16_t> sport;  ///< unset: a --sport test is Unknown
  uint16_t dport = 0;
  Origin origin = Origin::External;
  /// Interface the packet arrives on (pod / external origin). Unset: -i tests in
  /// PREROUTING/INPUT/FORWARD are Unknown. Node origin ignores it (no input
  /// interface; "lo" when the packet loops back to a local address).
  std::optional<std::string> in_iface;
  /// Interface routing sends the packet out of (FORWARD/OUTPUT/POSTROUTING).
  /// Unset: -o tests there are Unknown, except for node -> local traffic ("lo").
  std::optional<std::string> out_iface;
  /// Bridge port the packet entered through (br_netfilter; `-m physdev`, physdev.h).
  /// Unset: physdev tests of an arriving packet are Unknown; "": it did not enter
  /// through a bridge port (no bridge information). Node origin ignores it.
  std::optional<std::string> in_bridge_port;
  /// Bridge port the packet is bridged to, as FORWARD/POSTROUTING see it (after any
  /// DNAT): unset = not known (tests of the out port there are Unknown); "" = routed,
  /// not bridged. Read only when in_bridge_port names a port.
  std::optional<std::string> out_bridge_port;
  uint32_t mark = 0;
  /// The connection's mark (connmark) as the packet arrives. A first packet's connection
  /// (NEW) has 0 whatever this says; for other states unset = not known (a connmark test
  /// or --restore-mark that reads it is Unknown).
  std::optional<uint32_t> ctmark;
  /// Conntrack state bits (ir::CtStateBits) of the packet: NEW by default. The
  /// nat table is consulted only for NEW; other states are traced through the
  /// filter path with the addresses as given.
  uint32_t ctstate = ir::kCtNew;
  /// Session-affinity client model for `-m recent --rcheck/--update/--remove`:
  /// empty = a new client (in no list, such tests never match); otherwise the
  /// recent lists (kube-proxy: KUBE-SEP-... chain names) that remember this client.
  std::vector<std::string> remembered;
  /// Seconds since a remembered client was last seen: `--seconds S` finds it iff age < S.
  uint32_t remembered_age = 0;
};

struct TraceOptions {
  /// The node's addresses (addrtype LOCAL). 127.0.0.0/8 and ::1 are always local.
  std::vector<IPAddr> local_addresses;
  size_t max_outcomes = 100000;  ///< beyond this, remaining branches become one Unknown outcome
  size_t max_depth = 128;        ///< chain call depth (a loop the state machine let through)
  /// The node's ipsets (`ipset save`): `-m set --match-set` is decided on them; without, Unknown.
  const ipset::Table* ipsets = nullptr;
  /// Chains of at least index_min_rules rules (kube-proxy's KUBE-SERVICES has one per service
  /// address and port) are walked through an index of the destination each rule requires
  /// (ChainIndex), built on a chain's first use: per packet, only the rules that can match it
  /// are read, in rule order, so first-match semantics and every outcome are those of the
  /// plain walk. false: the plain walk, rule by rule (the reference the index is tested against).
  bool index_chains = true;
  size_t index_min_rules = 32;
  /// false: outcomes carry no path (nor its notes), only what the path decides -- the services
  /// its comments name are still given (Outcome::services). For callers that compare outcomes
  /// (the cross-mode diff), not for reports.
  bool record_paths = true;
};

/// The rules of one chain bucketed by what they require of the destination (tracer.cpp): an
/// exact address (`-d A/32`), else an exact protocol and port (`-p P --dport N`); a rule that
/// requires neither, or whose result on another destination might not be plainly "no match"
/// (it writes a `-m recent` list, or its text does not re-parse), is kept in every walk.
struct ChainIndex;

enum class Verdict : uint8_t { Accept, Drop, Reject, Unknown };
const char* verdict_name(Verdict v);

/// One step of an outcome's path: a rule that matched (or, for a statistic
/// branch, was not taken), a built-in policy, or the rule that made the trace Unknown.
struct Step {
  enum Kind : uint8_t { Rule, NotTaken, Policy, Unknown };
  Kind kind = Rule;
  ir::TableId table = ir::TableId::Filter;
  std::string chain;
  uint32_t rule_no = 0;  ///< 1-based position in the chain (0 for a policy)
  std::string text;      ///< save form "-A CHAIN ..." (":CHAIN POLICY" for a policy)
  std::string comment;   ///< the rule's --comment, if any
  std::string note;      ///< e.g. "statistic: matched, p = 1/2"
};

struct Outcome {
  Probability probability;
  Verdict verdict = Verdict::Accept;
  /// Where an accepted packet goes: "local" (INPUT), "forward" (FORWARD), "output"
  /// (node-originated, leaves the node); empty for drops and unknowns.
  std::string route;
  bool dnat = false;
  IPAddr dnat_addr;
  uint16_t dnat_port = 0;
  std::string dnat_text;  ///< "10.180.0.1:80" / "[fd00::1]:80", empty without DNAT
  bool masquerade = false;
  std::string snat_text;  ///< SNAT --to-source (port range, flags), empty without
  uint32_t final_mark = 0;
  /// Target options that are behaviour besides the fields above ("reject-with tcp-reset",
  /// "masquerade --random-fully"; effects.h), joined with "; ".
  std::string options;
  /// What the kernel remembers afterwards: every `-m recent` --set, and --update/--remove
  /// that found the client, in path order (effects.h).
  std::vector<RecentUse> affinity;
  std::string unknown_reason;  ///< Unknown: what could not be decided (the rule is the path's last step)
  std::vector<Step> path;
  std::vector<std::string> services;  ///< "ns/name:port" from the path's comments, first seen first
};

struct TraceResult {
  std::vector<Outcome> outcomes;  ///< in exploration order (statistic: matched branch first)
  std::vector<std::string> notes;
  Probability total() const;  ///< sum of the outcome probabilities (1 unless truncated)
};

struct StageSpec;
struct StageStart;

/// Traces one packet. The state's family must match the packet's addresses.
/// Reusable: a Tracer caches the typed form of the rules it has read and the indexes of long
/// chains, so the state must not change while a tracer reads it.
class Tracer {
 public:
  Tracer(const RulesetState& state, TraceOptions options);
  ~Tracer();
  TraceResult trace(const Packet& packet);
  const TraceOptions& options() const { return options_; }
  bool is_local(const IPAddr& a) const;

  /// The typed rule of a state rule id in table t (nullptr if its text does not re-parse).
  const ir::Rule* rule(ir::TableId t, std::string_view chain, uint32_t id);
  /// True if the rule's leading -s/-d (canonical save text) already exclude the
  /// addresses: the rule cannot match, and is not read further. Sound: a false
  /// match decides a rule whatever its other matches say.
  bool excluded_by_addresses(uint32_t id, const IPAddr& src, const IPAddr& dst);

 private:
  struct Impl;
  const RulesetState& state_;
  TraceOptions options_;
  std::unordered_map<uint64_t, std::unique_ptr<ir::Rule>> cache_;
  std::unordered_map<uint64_t, bool> bad_;
  struct Quick {
    bool read = false, has_s = false, neg_s = false, has_d = false, neg_d = false;
    CIDR s, d;
  };
  std::vector<Quick> quick_;  ///< by rule id
  std::unordered_map<uint64_t, std::string> services_;  ///< rule_service's cache
  /// The service "ns/name[:port]" the rule's comment names ("" none), as Outcome::services reads it.
  const std::string& rule_service(ir::TableId t, std::string_view chain, uint32_t id);
  std::vector<IPAddr> locals_;  ///< options_.local_addresses, sorted (is_local: a binary search)
  std::unordered_map<const Chain*, std::unique_ptr<ChainIndex>> index_;
  /// The index of a chain (built on first use), nullptr when the chain is walked rule by rule.
  const ChainIndex* chain_index(ir::TableId t, const Chain& c);
  friend struct Impl;
  friend TraceResult trace_stages(Tracer&, const Packet&, const std::vector<StageSpec>&, const StageStart&);
};

/// What IPVS did to a packet, as `-m ipvs` (xt_ipvs) reads it: the virtual service of the
/// connection IPVS made and how it forwards. The IPVS tracer (verifier/ipvs_trace) sets it on
/// the packet IPVS sends on (skb->ipvs_property).
struct IpvsProperty {
  uint8_t vproto = kProtoTCP;
  IPAddr vaddr;
  uint16_t vport = 0;
  std::string vmethod = "MASQ";  ///< GATE, IPIP or MASQ (ipvsadm -g, -i, -m)
};

/// One stage of a walk a caller composes (trace_stages): a table at a built-in chain.
struct StageSpec {
  ir::TableId table = ir::TableId::Filter;
  std::string chain;  ///< PREROUTING, INPUT, FORWARD, OUTPUT or POSTROUTING
};

/// The packet as an earlier part of a walk left it.
struct StageStart {
  IPAddr dst;
  uint16_t dport = 0;
  uint32_t mark = 0;
  uint32_t ctstate = ir::kCtNew;
  bool dnat = false;
  bool masquerade = false;
  /// Set: IPVS handled the packet (-m ipvs decided on it); unset: it did not (-m ipvs
  /// --vaddr/... is false, `! --ipvs` true). In Tracer::trace, -m ipvs stays Unknown.
  std::optional<IpvsProperty> ipvs;
  std::string route;  ///< the accepted outcomes' route
};

/// Walks `packet` through exactly `stages`, in order, from `start` (no routing decision:
/// the caller makes it): for front ends that put steps of their own between the hooks (the
/// IPVS tracer: IPVS takes the packet at LOCAL_IN and sends it on through LOCAL_OUT). An
/// outcome is Accept when every stage passed; the nat table runs only for NEW (as in trace).
/// A stage whose table or chain the state lacks is skipped.
TraceResult trace_stages(Tracer& tracer, const Packet& packet, const std::vector<StageSpec>& stages,
                         const StageStart& start);

/// Distribution over distinct results (verdict, DNAT destination, masquerade,
/// unknown reason), probabilities summed, most likely first.
struct DistributionEntry {
  Verdict verdict = Verdict::Accept;
  std::string dnat_text;
  bool masquerade = false;
  std::string unknown_reason;
  Probability probability = Probability::zero();
  size_t outcomes = 0;
};
std::vector<DistributionEntry> distribution(const TraceResult& r);

/// An outcome's affinity effects as text ("set KUBE-SEP-X; remove L"), each list named by label(list).
template <typename Label>
std::string affinity_text(const std::vector<RecentUse>& effects, Label label) {
  std::string s;
  for (const auto& r : effects) append_effect(&s, affinity_effect_text(r, label(r.list)));
  return s;
}

/// The service "ns/name[:port]" a kube-proxy comment names (first word with a
/// '/'), or "".
std::string service_from_comment(std::string_view comment);

/// Formats "ip:port" as kube-proxy and iptables-save print DNAT targets ("[v6]:port").
std::string host_port(const IPAddr& a, uint16_t port);

/// Text report of a trace (kpc trace's default output).
std::string format_text(const Packet& packet, const TraceOptions& options, const TraceResult& r);

/// Resolves a session-affinity endpoint given as a KUBE-SEP chain name (kept as
/// is) or as "ip:port" / "[ip]:port" (every nat KUBE-SEP-* chain whose DNAT
/// goes there). Empty if nothing matches.
std::vector<std::string> resolve_affinity(const RulesetState& state, const std::string& endpoint);

/// resolve_affinity of every "ip:port" at once (one pass over the state, for callers that
/// resolve many endpoints): each --to-destination of a nat KUBE-SEP-* chain -> the chains whose
/// DNAT goes there, sorted. For an endpoint that is neither a KUBE-SEP- name nor a nat chain's
/// name, resolve_affinity(state, e) is index[e] (empty if absent).
std::unordered_map<std::string, std::vector<std::string>> affinity_index(const RulesetState& state);

/// Adds the jump rules kube-proxy installs in built-in chains outside its restore
/// input on a full sync (reference notes kubeproxy-iptables.md, section 3) as it
/// does: for each, in the reference list's order, create the target chain if it is
/// missing, then insert the rule at the top of the built-in chain unless an
/// identical rule is there. On a clean node each built-in chain ends up with the
/// jumps in reverse list order. False (with *error) if the state refuses a command;
/// the failing table then holds the commands before that one (it is changed in place).
bool add_kube_proxy_jumps(RulesetState& state, std::string* error = nullptr);

/// One rule kube-proxy keeps in a built-in chain (reference notes kubeproxy-iptables.md,
/// section 3), in the order kube-proxy ensures them (each inserted at the top if missing).
struct KubeProxyJump {
  ir::TableId table;
  const char* from;  ///< built-in chain
  const char* to;    ///< kube-proxy's chain
  const char* args;  ///< matches before "-j TO"
  std::string rule_text() const;  ///< "ARGS -j TO" (restore/save order)
};
const std::vector<KubeProxyJump>& kube_proxy_jumps();

/// True if no built-in chain of nat or filter has a rule (the state holds only
/// what a restore program declared, not what a node would hold).
bool builtin_chains_empty(const RulesetState& state);

// ------------------------------------------------------------ kube-proxy test mode
//
// The packet tracer of kube-proxy's own unit tests (proxier_test.go, tracePacket /
// runPacketFlowTests; reference notes kubeproxy-iptables.md, section 11.5),
// reproduced exactly so that the expectations transcribed in
// fixtures/kubeproxy-packet-flows.yaml can be replayed against kpc's programs:
// nat PREROUTING, then the destination becomes the first output up to its first
// ':', then filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS,
// KUBE-PROXY-FIREWALL run directly. Only -s, --src-type, -p, -d, --dst-type and
// --dport are tested (values compared as that test compares them: addresses by
// CIDR containment / IP equality, the rest as strings); rules with --rcheck,
// --mark or --ctstate never match; everything else is ignored. KUBE-MARK-MASQ
// sets masq and continues; ACCEPT/REJECT/DROP/DNAT append an output and end the
// chain; any other -j target runs the chain of that name (nothing if there is
// none, e.g. MARK, RETURN, MASQUERADE) and ends the caller only if it ended and
// the rule had no --probability. Rules without -j (and -g rules, which that
// parser does not know) are skipped.
struct KubeProxyTestResult {
  std::string output;  ///< outputs joined with ", "
  bool masq = false;
  std::vector<std::string> matches;  ///< save text of every matched rule, in order
  std::string error;                 ///< the Go test would have failed here (e.g. "Bad IP in test case")
};
KubeProxyTestResult trace_kube_proxy_test(const RulesetState& state, const std::string& source_ip,
                                          const std::string& protocol, const std::string& dest_ip,
                                          const std::string& dest_port, const std::vector<std::string>& local_ips);

}  // namespace kpc::verifier::trace
