#include "verifier/cross/compare.h"

#include <algorithm>
#include <future>
#include <set>

namespace kpc::verifier::cross {
namespace {

constexpr uint32_t kNew = 2, kEstablished = 4, kInvalid = 1;

// The address `back` places from the end of a CIDR (a host no program is likely to name).
IPAddr near_end(const CIDR& c, uint32_t back) {
  CIDR m = c.masked();
  IPAddr a = m.addr;
  size_t bits = a.bit_length();
  // Set every host bit, then subtract back (host bits are at least a byte for the CIDRs read).
  for (size_t i = m.len; i < bits; ++i) a.bytes[i / 8] |= static_cast<uint8_t>(1u << (7 - i % 8));
  size_t last = bits / 8 - 1;
  a.bytes[last] = static_cast<uint8_t>(a.bytes[last] - std::min<uint32_t>(back, a.bytes[last]));
  return a;
}

IPAddr literal(IPFamily f, const char* v4, const char* v6) { return *IPAddr::parse(f == IPFamily::V4 ? v4 : v6); }

Packet make(const IPAddr& src, const IPAddr& dst, uint8_t proto, uint16_t port, SourceKind sk, DestKind dk,
            uint32_t ct = kNew) {
  Packet p;
  p.src = src;
  p.dst = dst;
  p.proto = proto;
  p.dport = port;
  p.source_kind = sk;
  p.dest_kind = dk;
  p.ctstate = ct;
  switch (sk) {
    case SourceKind::Pod:
    case SourceKind::Hairpin:
      p.origin = trace::Origin::Pod;
      p.in_iface = "veth-kpc0";
      break;
    case SourceKind::External:
      p.origin = trace::Origin::External;
      p.in_iface = "eth0";
      break;
    case SourceKind::Node:
    case SourceKind::Localhost:
      p.origin = trace::Origin::Node;
      break;
  }
  return p;
}

}  // namespace

PacketSpace build_space(const ConcreteFrontend& a, const ConcreteFrontend& b, IPFamily family,
                        std::vector<IPAddr> local_addresses) {
  PacketSpace s;
  s.family = family;
  s.local_addresses = std::move(local_addresses);
  a.cut_points(s);
  b.cut_points(s);
  std::sort(s.pod_cidrs.begin(), s.pod_cidrs.end());
  s.pod_cidrs.erase(std::unique(s.pod_cidrs.begin(), s.pod_cidrs.end()), s.pod_cidrs.end());
  std::sort(s.service_cidrs.begin(), s.service_cidrs.end());
  s.service_cidrs.erase(std::unique(s.service_cidrs.begin(), s.service_cidrs.end()), s.service_cidrs.end());
  return s;
}

std::vector<Packet> packets(const PacketSpace& s) {
  const IPFamily f = s.family;
  std::set<IPAddr> named;
  for (const auto& d : s.services) named.insert(std::get<0>(d));
  for (const auto& d : s.endpoints) named.insert(std::get<0>(d));
  IPAddr pod = literal(f, "10.244.255.250", "fd00:10:244:ffff::fa");
  for (const auto& c : s.pod_cidrs)
    if (c.family() == f) {
      pod = near_end(c, 5);
      break;
    }
  const IPAddr external = literal(f, "203.0.113.77", "2001:db8:ffff::77");
  const IPAddr node = s.local_addresses.empty() ? literal(f, "192.0.2.10", "2001:db8::10") : s.local_addresses.front();
  auto label = [&](const Dest& d) {
    auto it = s.labels.find(d);
    return it == s.labels.end() ? std::string() : it->second;
  };

  std::vector<Packet> out;
  for (const auto& d : s.services) {
    const auto& [a, proto, port] = d;
    std::string l = label(d);
    for (auto [src, sk] : {std::pair{pod, SourceKind::Pod}, {external, SourceKind::External}, {node, SourceKind::Node}}) {
      out.push_back(make(src, a, proto, port, sk, DestKind::Service));
      out.back().label = l;
    }
    for (uint32_t ct : {kEstablished, kInvalid}) {
      if (s.first_packets_only) break;
      out.push_back(make(pod, a, proto, port, SourceKind::Pod, DestKind::Service, ct));
      out.back().label = l;
    }
  }
  // One port no program names, per service address and protocol.
  std::set<std::pair<IPAddr, uint8_t>> addr_proto;
  for (const auto& d : s.services) addr_proto.insert({std::get<0>(d), std::get<1>(d)});
  for (const auto& [a, proto] : addr_proto) {
    uint16_t port = 1;
    std::string l;
    for (auto it = s.services.lower_bound(Dest{a, proto, 0}); it != s.services.end() && std::get<0>(*it) == a &&
                                                                std::get<1>(*it) == proto && l.empty();
         ++it) {
      l = label(*it);
      if (port == std::get<2>(*it)) ++port;  // the set is sorted by port: the first free one
    }
    while (s.services.count(Dest{a, proto, port})) ++port;
    out.push_back(make(pod, a, proto, port, SourceKind::Pod, DestKind::ServiceOtherPort));
    // The service is the address's (its port name is another's): "ns/name".
    out.back().label = l.substr(0, l.find(':'));
  }
  std::vector<IPAddr> locals = s.local_addresses;
  for (const auto& [proto, port] : s.nodeports) {
    std::string l;
    if (auto it = s.labels.find(Dest{IPAddr{f, {}}, proto, port}); it != s.labels.end()) l = it->second;
    for (const auto& la : locals) {
      for (auto [src, sk] : {std::pair{external, SourceKind::External}, {pod, SourceKind::Pod}, {la, SourceKind::Node}}) {
        out.push_back(make(src, la, proto, port, sk, DestKind::NodePort));
        out.back().label = l;
      }
    }
    if (f == IPFamily::V4) {
      IPAddr lo = IPAddr::v4(127, 0, 0, 1);
      out.push_back(make(lo, lo, proto, port, SourceKind::Localhost, DestKind::LocalhostNodePort));
      out.back().label = l;
    }
  }
  for (const auto& [a, proto, port] : s.endpoints) {
    out.push_back(make(pod, a, proto, port, SourceKind::Pod, DestKind::Endpoint));
    out.push_back(make(external, a, proto, port, SourceKind::External, DestKind::Endpoint));
  }
  for (const auto& c : s.service_cidrs) {
    if (c.family() != f) continue;
    IPAddr a = near_end(c, 2);
    for (uint32_t back = 3; named.count(a) && back < 200; ++back) a = near_end(c, back);
    out.push_back(make(pod, a, trace::kProtoTCP, 80, SourceKind::Pod, DestKind::ServiceRange));
  }
  IPAddr nobody = literal(f, "192.0.2.123", "2001:db8::123");
  out.push_back(make(pod, nobody, trace::kProtoTCP, 1, SourceKind::Pod, DestKind::Unnamed));
  out.push_back(make(external, nobody, trace::kProtoUDP, 1, SourceKind::External, DestKind::Unnamed));
  return out;
}

CrossResult compare(const ConcreteFrontend& fa, const ConcreteFrontend& fb, const PacketSpace& space,
                    const CompareOptions& options) {
  CrossResult r;
  r.backend_a = fa.backend();
  r.backend_b = fb.backend();
  r.family = space.family;
  r.first_packets_only = space.first_packets_only;
  const Facts facts_a = fa.facts(), facts_b = fb.facts();

  std::vector<Packet> queue = packets(space);
  // Traces are computed a batch at a time and consumed in queue order: the packets a batch's
  // consumption appends (hairpin and affinity follow-ups) are traced in a later batch, exactly
  // as the sequential loop would reach them. With two threads the work is a pipeline: while
  // this thread traces side B's next batch, the second thread traces side A's and then
  // consumes the batch before it (the consumption — classification, follow-ups, the
  // summaries — was ~1.3 s of the 10,000-Service diff with both tracers idle). A batch's
  // packets are copied out of the queue, which the consumption may grow meanwhile.
  // A bounded batch keeps at most options.batch distributions per side alive, twice.
  const size_t batch = std::max<size_t>(1, options.batch);
  struct Batch {
    std::vector<Packet> packets;
    std::vector<Distribution> a, b;
  };
  size_t handed_out = 0;  // queue[0, handed_out) belongs to a batch
  auto take = [&](Batch& bt) {
    const size_t n = std::min(batch, queue.size() - handed_out);
    bt.packets.assign(queue.begin() + static_cast<std::ptrdiff_t>(handed_out),
                      queue.begin() + static_cast<std::ptrdiff_t>(handed_out + n));
    handed_out += n;
  };
  auto trace = [](const ConcreteFrontend& f, const std::vector<Packet>& ps, std::vector<Distribution>& out) {
    out.assign(ps.size(), {});
    for (size_t k = 0; k < ps.size(); ++k) out[k] = f.trace(ps[k]);
  };
  auto consume_one = [&](const Packet& p, Distribution da, Distribution db) {
    ++r.packets;
    std::string svc;
    for (const auto* d : {&da, &db})
      if (svc.empty() && !d->services.empty()) svc = d->services.front();
    if (svc.empty()) svc = fa.service_of(p);
    if (svc.empty()) svc = fb.service_of(p);
    if (svc.empty()) svc = "(no service)";
    ServiceSummary& sum = r.services[svc];
    ++sum.packets;

    // Packets that depend on this one's outcome: the endpoints it reaches as sources
    // (hairpin), and a client remembered for one of them (session affinity).
    if (p.dest_kind == DestKind::Service && p.source_kind == SourceKind::Pod && p.ctstate == kNew &&
        p.remembered_endpoint.empty()) {
      std::set<std::string> seen;
      bool affinity = false;
      std::vector<std::pair<std::string, IPAddr>> eps;
      for (const auto* d : {&da, &db})
        for (const auto& sh : d->shares) {
          affinity = affinity || sh.outcome.affinity;
          if (sh.outcome.dnat.empty() || !seen.insert(sh.outcome.dnat).second) continue;
          IPAddr a;
          std::string h = sh.outcome.dnat.substr(0, sh.outcome.dnat.rfind(':'));
          if (h.size() > 2 && h.front() == '[') h = h.substr(1, h.size() - 2);
          if (auto ip = IPAddr::parse(h)) eps.push_back({sh.outcome.dnat, *ip});
        }
      for (size_t k = 0; k < eps.size() && k < options.max_hairpin; ++k) {
        Packet h = p;
        h.src = eps[k].second;
        h.source_kind = SourceKind::Hairpin;
        queue.push_back(h);
      }
      if (affinity && !eps.empty()) {
        Packet m = p;
        m.remembered_endpoint = eps.front().first;
        queue.push_back(m);
      }
    }

    if (same(da, db)) return;
    Cell c{p, std::move(da), std::move(db), svc, {}, false};
    DiffContext ctx{c.packet, c.a, c.b, facts_a, facts_b, r.backend_a, r.backend_b};
    if (auto ks = classify(ctx); !ks.empty()) {
      ++sum.known;
      for (const auto* k : ks) {
        c.known.push_back(k->id);
        ++sum.by_known[k->id];
        ++r.known_counts[k->id];
      }
    } else {
      c.undecided = !c.a.decided() || !c.b.decided();
      ++sum.surprises;
      ++r.surprises;
      if (c.undecided) ++r.undecided;
    }
    r.differences.push_back(std::move(c));
  };
  auto consume = [&](Batch& bt) {
    for (size_t k = 0; k < bt.packets.size(); ++k) consume_one(bt.packets[k], std::move(bt.a[k]), std::move(bt.b[k]));
  };
  auto trace_both = [&](Batch& bt) {
    if (options.threads > 1) {
      auto other = std::async(std::launch::async, [&] { trace(fa, bt.packets, bt.a); });
      trace(fb, bt.packets, bt.b);
      other.get();
    } else {
      trace(fa, bt.packets, bt.a);
      trace(fb, bt.packets, bt.b);
    }
  };
  Batch cur, next;
  take(cur);
  trace_both(cur);
  while (!cur.packets.empty()) {
    take(next);
    if (options.threads > 1 && !next.packets.empty()) {
      auto other = std::async(std::launch::async, [&] {
        trace(fa, next.packets, next.a);
        consume(cur);
      });
      trace(fb, next.packets, next.b);
      other.get();
    } else {
      consume(cur);
      if (next.packets.empty()) take(next);  // what the consumption appended, if anything
      trace_both(next);
    }
    std::swap(cur, next);
  }
  for (size_t i = 0; i < r.differences.size(); ++i)
    for (const auto& k : r.differences[i].known) r.known_example.emplace(k, i);
  return r;
}

}  // namespace kpc::verifier::cross
