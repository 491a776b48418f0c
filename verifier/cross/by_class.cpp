#include "verifier/cross/by_class.h"

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "verifier/nft/nft.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/explorer.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/sem/compare.h"
#include "verifier/state/state.h"
#include "verifier/symbolic/affinity_lists.h"
#include "verifier/symbolic/compare.h"
#include "verifier/symbolic/engine.h"

namespace kpc::verifier::cross {
namespace {

// The client records of both programs, by the endpoint they remember a client for. iptables
// keys a recent list "ns/svc:port -> ip:port" (symbolic/affinity_lists.h), nft an affinity set
// "nft set NAME" (nft_sym/explorer.h): the nft key of the set kube-proxy writes for the same
// Service port and endpoint is made an alias of the iptables key, so that one client id of the
// shared universe is the same client in both programs.
struct Records {
  std::map<std::string, std::string> endpoint_of;  ///< list / set name -> "ip:port"
};

// "ns/svc:port -> ip:port" -> {"ns/svc:port" (normalised), "ip:port"}; false for "list NAME".
bool split_key(const std::string& key, std::string* svc, std::string* ep) {
  if (key.rfind("list ", 0) == 0) return false;
  size_t arrow = key.find(" -> ");
  if (arrow == std::string::npos) {
    svc->clear();
    *ep = key;
  } else {
    *svc = normalise_service(key.substr(0, arrow));
    *ep = key.substr(arrow + 4);
  }
  return !ep->empty();
}

Records align_records(const std::vector<const RulesetState*>& ipts, const std::vector<const nft::NftState*>& nfts,
                      sem::Universe& u) {
  Records rec;
  std::map<std::pair<std::string, std::string>, std::string> ipt_key;  // (svc, endpoint) -> key
  for (const RulesetState* st : ipts)
    for (const auto& [list, key] : symbolic::affinity_list_keys(*st)) {
      std::string svc, ep;
      if (!split_key(key, &svc, &ep)) continue;
      rec.endpoint_of[list] = ep;
      ipt_key.emplace(std::pair{svc, ep}, key);
    }
  for (const nft::NftState* st : nfts)
    for (const auto& [ep, sets] : nft_trace::affinity_index(*st))
      for (const auto& set : sets) {
        rec.endpoint_of[set] = ep;
        // kube-proxy names the set after the endpoint chain: affinity-HASH-ns/svc/proto/port__ip/port.
        std::string svc = set.rfind("affinity-", 0) == 0
                              ? normalise_service(nft_trace::service_from_chain("endpoint-" + set.substr(9)))
                              : std::string();
        if (auto it = ipt_key.find({svc, ep}); it != ipt_key.end())
          u.affinity_alias.emplace(nft_sym::affinity_key(set), it->second);
      }
  return rec;
}

// What the comparison's destinations are (the packet space both concrete front ends name), to
// give a class's witness the kinds the known differences read.
struct Kinds {
  IPFamily family = IPFamily::V4;
  std::set<Dest> services, endpoints;
  std::set<std::pair<uint8_t, uint16_t>> nodeports;
  std::set<IPAddr> service_addrs, endpoint_addrs, local;
  std::vector<CIDR> pod_cidrs, service_cidrs;
  std::map<Dest, std::string> labels;

  explicit Kinds(const PacketSpace& s)
      : family(s.family), services(s.services), endpoints(s.endpoints), nodeports(s.nodeports),
        pod_cidrs(s.pod_cidrs), service_cidrs(s.service_cidrs), labels(s.labels) {
    for (const auto& d : services) service_addrs.insert(std::get<0>(d));
    for (const auto& d : endpoints) endpoint_addrs.insert(std::get<0>(d));
    local.insert(s.local_addresses.begin(), s.local_addresses.end());
  }

  bool loopback(const IPAddr& a) const {
    return a.family == IPFamily::V4 ? a.bytes[0] == 127 : a == *IPAddr::parse("::1");
  }

  DestKind dest(const Packet& p) const {
    const bool nodeport = nodeports.count({p.proto, p.dport}) > 0;
    if (loopback(p.dst) && nodeport && family == IPFamily::V4) return DestKind::LocalhostNodePort;
    if (services.count(Dest{p.dst, p.proto, p.dport})) return DestKind::Service;
    if (local.count(p.dst) && nodeport) return DestKind::NodePort;
    if (service_addrs.count(p.dst)) return DestKind::ServiceOtherPort;
    if (endpoints.count(Dest{p.dst, p.proto, p.dport})) return DestKind::Endpoint;
    for (const auto& c : service_cidrs)
      if (c.contains(p.dst)) return DestKind::ServiceRange;
    return DestKind::Unnamed;
  }

  SourceKind source(const Packet& p) const {
    if (p.origin == trace::Origin::Node) return loopback(p.src) && loopback(p.dst) ? SourceKind::Localhost : SourceKind::Node;
    if (endpoint_addrs.count(p.src)) return SourceKind::Hairpin;
    for (const auto& c : pod_cidrs)
      if (c.contains(p.src)) return SourceKind::Pod;
    return SourceKind::External;
  }

  std::string label(const Packet& p) const {
    if (p.dest_kind == DestKind::NodePort || p.dest_kind == DestKind::LocalhostNodePort) {
      auto it = labels.find(Dest{IPAddr{family, {}}, p.proto, p.dport});
      return it == labels.end() ? "" : it->second;
    }
    if (auto it = labels.find(Dest{p.dst, p.proto, p.dport}); it != labels.end()) return it->second;
    if (p.dest_kind == DestKind::ServiceOtherPort) {  // the address's Service ("ns/name")
      for (auto it = labels.lower_bound(Dest{p.dst, 0, 0}); it != labels.end() && std::get<0>(it->first) == p.dst; ++it)
        if (!it->second.empty()) return it->second.substr(0, it->second.find(':'));
    }
    return "";
  }
};

// A class's witness as the concrete front ends' packet.
Packet witness_packet(const sem::Difference& d, const Records& rec, const Kinds& kinds) {
  const trace::Packet& w = d.witness_a;
  Packet p;
  p.src = w.src;
  p.dst = w.dst;
  p.proto = w.proto;
  p.sport = w.sport.value_or(40000);
  p.dport = w.dport;
  p.origin = w.origin;
  p.in_iface = w.origin == trace::Origin::Node ? "" : w.in_iface.value_or("");
  p.out_iface = w.out_iface.value_or("");
  p.mark = w.mark;
  p.ctstate = w.ctstate;
  for (const trace::Packet* side : {&d.witness_a, &d.witness_b}) {
    for (const auto& name : side->remembered)
      if (auto it = rec.endpoint_of.find(name); it != rec.endpoint_of.end()) {
        p.remembered_endpoint = it->second;
        break;
      }
    if (!p.remembered_endpoint.empty()) {
      p.remembered_age = side->remembered_age;
      break;
    }
  }
  p.dest_kind = kinds.dest(p);
  p.source_kind = kinds.source(p);
  p.label = kinds.label(p);
  return p;
}

}  // namespace

CrossResult compare_by_class(const ClassSide& a, const ClassSide& b, IPFamily family, const ByClassOptions& options) {
  CrossResult r;
  r.backend_a = a.concrete->backend();
  r.backend_b = b.concrete->backend();
  r.family = family;
  r.per_class = true;

  // One universe both programs cut: the iptables front end's (node atoms, every rule's
  // addresses, interfaces, bridge ports, ages), then the nft front end's cut points added.
  std::vector<const RulesetState*> ipts;
  std::vector<const nft::NftState*> nfts;
  for (const ClassSide* s : {&a, &b}) {
    if (s->iptables) ipts.push_back(s->iptables);
    if (s->nft) nfts.push_back(s->nft);
  }
  sem::Universe u = ipts.empty() ? nft_sym::build_universe(nfts, family, options.local_addresses)
                                 : symbolic::build_universe(ipts, options.local_addresses);
  if (!ipts.empty() && !nfts.empty()) nft_sym::add_to_universe(u, nfts);
  const Records rec = align_records(ipts, nfts, u);

  sem::CompareOptions co;
  co.local_addresses = options.local_addresses;
  co.explore_all = true;
  co.max_reported = static_cast<size_t>(-1);  // every differing class is classified
  auto side = [&](const ClassSide& s) {
    return s.iptables ? symbolic::make_side(*s.iptables, u, co) : nft_sym::make_side(*s.nft, u, co);
  };
  std::unique_ptr<sem::CompareSide> sa = side(a), sb = side(b);
  sem::AffectedAtoms aff;
  aff.all = true;
  aff.atom.assign(u.atom_count(), 1);
  aff.why_all = "programs of two modes: every atom";
  sem::CompareResult cr = sem::compare_sides(u, *sa, *sb, std::move(aff), co);
  r.classes = cr.classes_compared;
  r.atoms = cr.atoms_explored;
  r.self_check_failures = cr.self_check_failures;

  // Each differing class's witness through both concrete front ends (two threads: the tracers
  // share nothing), judged in class order, a batch at a time: a batch's distributions are freed
  // once judged (at 10,000 Services about a million classes differ, most of them only in spelling).
  const PacketSpace space = build_space(*a.concrete, *b.concrete, family, options.local_addresses);
  const Kinds kinds(space);
  const Facts facts_a = a.concrete->facts(), facts_b = b.concrete->facts();
  constexpr size_t kBatch = 4096;
  std::vector<Packet> packets;
  std::vector<Distribution> da, db;
  for (size_t from = 0; from < cr.differences.size(); from += kBatch) {
    const size_t n = std::min(kBatch, cr.differences.size() - from);
    packets.clear();
    for (size_t k = 0; k < n; ++k) packets.push_back(witness_packet(cr.differences[from + k], rec, kinds));
    da.assign(n, {});
    db.assign(n, {});
    auto other = std::async(std::launch::async, [&] {
      for (size_t k = 0; k < n; ++k) da[k] = a.concrete->trace(packets[k]);
    });
    for (size_t k = 0; k < n; ++k) db[k] = b.concrete->trace(packets[k]);
    other.get();
    for (size_t k = 0; k < n; ++k) {
      sem::Difference& d = cr.differences[from + k];
      ++r.packets;
      std::string svc;
      for (const auto* x : {&da[k], &db[k]})
        if (svc.empty() && !x->services.empty()) svc = x->services.front();
      if (svc.empty()) svc = a.concrete->service_of(packets[k]);
      if (svc.empty()) svc = b.concrete->service_of(packets[k]);
      if (svc.empty() && !d.services.empty()) svc = normalise_service(d.services.front());
      if (svc.empty()) svc = "(no service)";
      // The two modes spell some outcomes differently (recent lists and affinity sets, numgen and
      // statistic shares as the symbolic front ends write them): a class whose witness has the
      // same mode-neutral outcome on both sides does not differ. An undecided class stays a surprise.
      const bool undecided = d.undecided;
      d = sem::Difference{};  // judged from here on by its witness's traces
      if (!undecided && same(da[k], db[k])) {
        ++r.same_neutral;
        continue;
      }
      ServiceSummary& sum = r.services[svc];
      ++sum.packets;
      Cell c{std::move(packets[k]), std::move(da[k]), std::move(db[k]), svc, {}, false};
      DiffContext ctx{c.packet, c.a, c.b, facts_a, facts_b, r.backend_a, r.backend_b};
      std::vector<const KnownDifference*> ks;
      if (!undecided) ks = classify(ctx);
      if (!ks.empty()) {
        ++sum.known;
        for (const auto* kd : ks) {
          c.known.push_back(kd->id);
          ++sum.by_known[kd->id];
          ++r.known_counts[kd->id];
        }
      } else {
        c.undecided = undecided || !c.a.decided() || !c.b.decided();
        ++sum.surprises;
        ++r.surprises;
        if (c.undecided) ++r.undecided;
      }
      r.differences.push_back(std::move(c));
    }
  }
  for (size_t i = 0; i < r.differences.size(); ++i)
    for (const auto& k : r.differences[i].known) r.known_example.emplace(k, i);
  return r;
}

}  // namespace kpc::verifier::cross
