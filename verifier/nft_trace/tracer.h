// A concrete single-packet tracer over the nft model's state (issue 16 §3): the reference
// for nft packet semantics, as verifier/trace is for iptables (the symbolic nft front end
// is to be checked against it on every golden program).
//
// One packet -- addresses, protocol, ports, origin, interfaces, mark, conntrack state and
// session-affinity client model -- goes through the base chains of every table of its
// family (ip or ip6, and inet) in the order the kernel runs them: by hook, and within a
// hook by priority (ties: table, then chain creation order, the kernel's registration
// order):
//
//   arriving (pod, external):  prerouting -> routing on the (possibly DNAT'ed) destination
//                              -> local: input | otherwise: forward -> postrouting
//   from the node itself:      output -> postrouting, and for a local destination back in
//                              through lo: prerouting -> input
//
// so kube-proxy's filter chains at -110 run before its dstnat (-100) chains. `type nat`
// chains see only a packet whose conntrack state is NEW, and at each hook only until one
// of them binds the NAT (dnat, snat, masquerade: the kernel's nf_nat_inet_fn); a node ->
// local packet meets no nat chain on its way back in (its bindings are made). `type
// filter` and `type route` chains see every packet. `accept` ends a base chain (the next
// base chain of the hook still runs), `drop` and `reject` end the packet, the end of a
// base chain is its policy; `jump`, `goto`, `return` as nft defines them.
//
// Matches are evaluated where the packet determines them (docs/verifier.md, "nft packet
// semantics"); `numgen random mod N` splits the trace into N branches of probability 1/N
// each (fraction.h); an affinity set (a set the rules `update`) holds the client iff the
// client model says so (Packet::remembered) or the state lists the element. Anything else
// -- a statement, an expression or a chain type kpc does not model, an interface the
// caller did not name -- ends that branch with an Unknown outcome naming the rule, never
// a guess.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/fraction.h"
#include "verifier/nft_trace/rule_model.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::nft_trace {

// Back-end-neutral vocabulary shared with the iptables tracer.
using trace::Origin;
using trace::Verdict;
using trace::origin_name;
using trace::verdict_name;

struct Packet {
  IPAddr src, dst;
  uint8_t proto = trace::kProtoTCP;
  std::optional<uint16_t> sport;  ///< unset: a sport test is Unknown
  uint16_t dport = 0;
  Origin origin = Origin::External;
  std::optional<std::string> in_iface;   ///< as the iptables tracer's Packet
  std::optional<std::string> out_iface;
  uint32_t mark = 0;
  uint32_t ctstate = 2;  ///< ir::CtStateBits; NEW (2) by default
  /// Session-affinity client model: the affinity sets (by name) that hold this client,
  /// last seen remembered_age seconds ago (an element lives for the set's timeout).
  std::vector<std::string> remembered;
  uint32_t remembered_age = 0;
};

struct TraceOptions {
  /// The node's addresses (fib type local). 127.0.0.0/8 and ::1 are always local.
  std::vector<IPAddr> local_addresses;
  size_t max_outcomes = 100000;
  size_t max_depth = 64;  ///< jump depth (the kernel's limit is 16 jumps, enforced on load)
  /// numgen random shares: false (default) exactly 1/N each, as documented and as issue 16
  /// asks; true the kernel's reciprocal_scale split, numgen_kernel_share() (within 2^-32 of 1/N).
  bool kernel_numgen = false;
  /// false: outcomes carry no path (nor its notes); the services the path names are still given
  /// (as trace::TraceOptions::record_paths).
  bool record_paths = true;
};

/// The kernel's probability of `numgen random mod n` giving value v (0 <= v < n):
/// reciprocal_scale(r, n) = (r * n) >> 32 over the 2^32 values of r, i.e.
/// (ceil((v+1) 2^32 / n) - ceil(v 2^32 / n)) / 2^32.
Fraction numgen_kernel_share(uint32_t n, uint32_t v);

struct Step {
  enum Kind : uint8_t { Rule, Policy, Unknown };
  Kind kind = Rule;
  std::string table;  ///< "ip kube-proxy"
  std::string hook;   ///< base chain's hook of this stage
  std::string chain;
  uint32_t rule_no = 0;  ///< 1-based position in the chain (0 for a policy)
  uint64_t handle = 0;
  std::string text;      ///< the rule as `nft list` prints it (policy: "policy accept")
  std::string comment;
  std::string note;      ///< "numgen: 1 of mod 3, p = 1/3; vmap: goto endpoint-..."
};

struct Outcome {
  Fraction probability;
  Verdict verdict = Verdict::Accept;
  std::string route;  ///< "local", "forward", "output" for accepted packets
  bool dnat = false;
  IPAddr dnat_addr;
  uint16_t dnat_port = 0;
  std::string dnat_text;
  bool masquerade = false;
  std::string snat_text;
  uint32_t final_mark = 0;
  std::string options;                ///< reject type, masquerade/nat flags ("masquerade fully-random")
  std::vector<std::string> affinity;  ///< "update @set" effects, in path order
  std::string unknown_reason;
  std::vector<Step> path;
  std::vector<std::string> services;  ///< "ns/name:port" from kube-proxy's chain names and comments
};

struct TraceResult {
  std::vector<Outcome> outcomes;
  std::vector<std::string> notes;
  Fraction total() const;
};

/// Traces packets through a state (which must outlive the tracer). Reusable: rules are read
/// once.
class Tracer {
 public:
  Tracer(const nft::NftState& state, TraceOptions options);
  ~Tracer();
  TraceResult trace(const Packet& packet);
  bool is_local(const IPAddr& a) const;
  const TraceOptions& options() const { return options_; }
  /// The rule as the tracer reads it (cached).
  const RuleModel& model(const nft::Rule& r, bool ipv4);

 private:
  struct Impl;
  const nft::NftState& state_;
  TraceOptions options_;
  std::unordered_map<const nft::Rule*, RuleModel> rules_;
  /// The state's base chains in table and creation order (read once: a 10,000-Service table has
  /// 30,000 regular chains, and every packet asks for the base chains of up to four hooks).
  std::vector<std::pair<const nft::Table*, const nft::Chain*>> base_chains_;
  bool base_chains_read_ = false;
  const std::vector<std::pair<const nft::Table*, const nft::Chain*>>& base_chains();
  /// Per table, the sets a rule updates (read once, for the same reason).
  std::map<const nft::Table*, std::set<std::string>> dynsets_;
  friend struct Impl;
};

struct DistributionEntry {
  Verdict verdict = Verdict::Accept;
  std::string dnat_text;
  bool masquerade = false;
  std::string unknown_reason;
  Fraction probability = Fraction::zero();
  size_t outcomes = 0;
};
std::vector<DistributionEntry> distribution(const TraceResult& r);

/// "ns/name:port" of a kube-proxy nftables chain name ("service-HASH-ns/name/tcp/port",
/// "endpoint-HASH-ns/name/tcp/port__ip/port"), or "".
std::string service_from_chain(std::string_view chain);

/// The affinity sets whose endpoint chain DNATs to endpoint ("ip:port", "[v6]:port"), or
/// the name itself when a set of that name exists. Empty if nothing matches.
std::vector<std::string> resolve_affinity(const nft::NftState& state, const std::string& endpoint);

/// resolve_affinity of every "ip:port" at once (one pass over the state): each `dnat to` address
/// of a chain -> the sets the chain updates, sorted and unique. For an endpoint no table has a
/// set of that name, resolve_affinity(state, e) is index[e] (empty if absent).
std::map<std::string, std::vector<std::string>> affinity_index(const nft::NftState& state);

/// Node addresses the state names: kube-proxy's nodeport-ips set (nodePortAddresses).
std::vector<IPAddr> infer_local_addresses(const nft::NftState& state, IPFamily family,
                                          std::vector<std::string>* reasons = nullptr);

std::string format_text(const Packet& packet, const TraceOptions& options, const TraceResult& r);

}  // namespace kpc::verifier::nft_trace
