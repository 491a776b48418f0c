// The iptables and nft concrete front ends (frontend.h): cut points read from each program's
// own text, traces by the mode's reference tracer, outcomes mapped by outcome.h.
#include "verifier/cross/frontend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "verifier/ipset/ipset.h"
#include "verifier/nft/nft.h"
#include "verifier/state/state.h"

namespace kpc::verifier::cross {

const char* dest_kind_name(DestKind k) {
  switch (k) {
    case DestKind::Service: return "service";
    case DestKind::ServiceOtherPort: return "service-other-port";
    case DestKind::NodePort: return "nodeport";
    case DestKind::LocalhostNodePort: return "localhost-nodeport";
    case DestKind::Endpoint: return "endpoint";
    case DestKind::ServiceRange: return "service-cidr";
    case DestKind::Unnamed: return "unnamed";
  }
  return "?";
}

const char* source_kind_name(SourceKind k) {
  switch (k) {
    case SourceKind::Pod: return "pod";
    case SourceKind::External: return "external";
    case SourceKind::Node: return "node";
    case SourceKind::Hairpin: return "hairpin";
    case SourceKind::Localhost: return "localhost";
  }
  return "?";
}

namespace {
// "established+dnat" (ir::CtStateBits), for states other than the three plain ones.
std::string ct_text(uint32_t bits) {
  static const std::pair<uint32_t, const char*> kNames[] = {{1, "invalid"},  {2, "new"},    {4, "established"},
                                                            {8, "related"},  {16, "untracked"}, {32, "snat"},
                                                            {64, "dnat"}};
  std::string s;
  for (const auto& [b, n] : kNames)
    if (bits & b) s += (s.empty() ? "" : "+") + std::string(n);
  return s.empty() ? std::to_string(bits) : s;
}
}  // namespace

std::string Packet::text() const {
  std::string s = std::string(trace::proto_name(proto)) + " " + trace::host_port(dst, dport) + " from " +
                  source_kind_name(source_kind) + " " + src.str();
  s += ctstate == 2 ? ", new" : ctstate == 4 ? ", established" : ctstate == 1 ? ", invalid" : ", ctstate " + ct_text(ctstate);
  if (mark != 0) {
    char b[16];
    std::snprintf(b, sizeof b, "0x%x", mark);
    s += std::string(", mark ") + b;
  }
  if (!remembered_endpoint.empty()) {
    s += ", client remembered for " + remembered_endpoint;
    if (remembered_age) s += " (seen " + std::to_string(remembered_age) + " s ago)";
  }
  return s;
}

void PacketSpace::add_service(const IPAddr& a, uint8_t proto, uint16_t port, const std::string& label) {
  if (a.family != family) return;
  Dest d{a, proto, port};
  services.insert(d);
  if (!label.empty()) labels.emplace(d, normalise_service(label));
}

void PacketSpace::add_nodeport(uint8_t proto, uint16_t port, const std::string& label) {
  nodeports.insert({proto, port});
  if (!label.empty()) labels.emplace(Dest{IPAddr{family, {}}, proto, port}, normalise_service(label));
}

void PacketSpace::add_endpoint(const IPAddr& a, uint8_t proto, uint16_t port) {
  if (a.family == family) endpoints.insert({a, proto, port});
}

namespace {

// Splits a save-text rule into words; a double-quoted word keeps its spaces (comments).
std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    if (i >= s.size()) break;
    std::string w;
    if (s[i] == '"') {
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        w += s[i++];
      }
      ++i;
    } else {
      while (i < s.size() && s[i] != ' ') w += s[i++];
    }
    out.push_back(w);
  }
  return out;
}

// "10.1.2.3:80" / "[fd00::1]:80" -> address and port.
bool split_host_port(std::string_view s, IPAddr* a, uint16_t* port) {
  size_t c = s.rfind(':');
  if (c == std::string_view::npos) return false;
  std::string_view h = s.substr(0, c), p = s.substr(c + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  auto ip = IPAddr::parse(h);
  if (!ip || p.empty() || p.size() > 5) return false;
  uint32_t v = 0;
  for (char ch : p) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + static_cast<uint32_t>(ch - '0');
  }
  if (v > 65535) return false;
  *a = *ip;
  *port = static_cast<uint16_t>(v);
  return true;
}

std::optional<uint16_t> port_of(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  uint32_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(ch - '0');
  }
  if (v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

// ------------------------------------------------------------------ iptables

class IptablesFrontend : public ConcreteFrontend {
 public:
  IptablesFrontend(const RulesetState& state, std::vector<IPAddr> local, const ipset::Table* ipsets)
      : state_(state), tracer_(state, options(std::move(local), ipsets)) {
    scan();
  }
  std::string backend() const override { return "iptables"; }

  void cut_points(PacketSpace& space) const override {
    for (const auto& [d, label] : services_) space.add_service(std::get<0>(d), std::get<1>(d), std::get<2>(d), label);
    for (const auto& [np, label] : nodeports_) space.add_nodeport(np.first, np.second, label);
    for (const auto& e : endpoints_) space.add_endpoint(std::get<0>(e), std::get<1>(e), std::get<2>(e));
    for (const auto& c : pod_cidrs_) space.pod_cidrs.push_back(c);
  }

  Facts facts() const override { return facts_; }

  Distribution trace(const Packet& p) const override {
    trace::Packet t;
    t.src = p.src;
    t.dst = p.dst;
    t.proto = p.proto;
    t.sport = p.sport;
    t.dport = p.dport;
    t.origin = p.origin;
    if (!p.in_iface.empty()) t.in_iface = p.in_iface;
    if (!p.out_iface.empty()) t.out_iface = p.out_iface;
    t.in_bridge_port = "";  // routed: kube-proxy's nodes do not bridge service traffic
    t.mark = p.mark;
    t.ctstate = p.ctstate;
    if (p.ctstate != 2) t.ctmark = 0;
    if (!p.remembered_endpoint.empty()) t.remembered = affinity_lists(p.remembered_endpoint);
    t.remembered_age = p.remembered_age;
    std::lock_guard<std::mutex> lock(mu_);
    return from_iptables(tracer_.trace(t));
  }

 private:
  static trace::TraceOptions options(std::vector<IPAddr> local, const ipset::Table* ipsets) {
    trace::TraceOptions o;
    o.local_addresses = std::move(local);
    o.ipsets = ipsets;
    o.record_paths = false;  // the comparison reads outcomes and services only
    return o;
  }

  std::vector<std::string> affinity_lists(const std::string& endpoint) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = affinity_.find(endpoint);
    if (it != affinity_.end()) return it->second;
    std::vector<std::string> lists;
    if (endpoint.rfind("KUBE-SEP-", 0) == 0 || state_.find(ir::TableId::Nat, endpoint)) {
      lists = trace::resolve_affinity(state_, endpoint);
    } else {
      // One pass over the KUBE-SEP chains for every endpoint (resolve_affinity reads them all
      // for each: quadratic in the Services with affinity).
      if (!affinity_index_) affinity_index_ = trace::affinity_index(state_);
      if (auto f = affinity_index_->find(endpoint); f != affinity_index_->end()) lists = f->second;
    }
    return affinity_.emplace(endpoint, std::move(lists)).first->second;
  }

  void scan() {
    const auto& store = *state_.store;
    for (ir::TableId t : {ir::TableId::Nat, ir::TableId::Filter}) {
      const auto& tb = state_.table(t);
      for (const auto& ch : tb.chains) {
        for (uint32_t id : ch.rules) scan_rule(ch.name, words(store.text(id)));
      }
    }
  }

  void scan_rule(std::string_view chain, const std::vector<std::string>& w) {
    std::optional<CIDR> d, not_s, not_d;
    std::optional<uint8_t> proto;
    std::optional<uint16_t> dport;
    std::string target, to_dest, comment, or_mark;
    bool dst_local = false, invalid = false, mark_match = false;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      bool neg = i > 0 && w[i - 1] == "!";
      const std::string& v = w[i + 1];
      if (w[i] == "-d") (neg ? not_d : d) = CIDR::parse(v, false, nullptr, true);
      else if (w[i] == "-s" && neg) not_s = CIDR::parse(v, false, nullptr, true);
      else if (w[i] == "-p") proto = trace::proto_from_name(v);
      else if (w[i] == "--dport") dport = port_of(v);
      else if (w[i] == "-j") target = v;
      else if (w[i] == "--to-destination") to_dest = v;
      else if (w[i] == "--comment") comment = v;
      else if (w[i] == "--or-mark" || w[i] == "--set-xmark") or_mark = v;
      else if (w[i] == "--mark" && !neg) mark_match = true;
      else if (w[i] == "--dst-type" && v == "LOCAL" && !neg) dst_local = true;
      else if (w[i] == "--ctstate" && v == "INVALID") invalid = true;
    }
    std::string label = trace::service_from_comment(comment);
    if (proto && dport) {
      if (d && d->is_host()) services_.emplace(Dest{d->addr, *proto, *dport}, label);
      else if (!d && chain == "KUBE-NODEPORTS") nodeports_.emplace(std::pair{*proto, *dport}, label);
    }
    if (target == "DNAT" && proto) {
      IPAddr a;
      uint16_t port = 0;
      if (split_host_port(to_dest, &a, &port)) endpoints_.insert({a, *proto, port});
    }
    if (not_s && !not_s->is_host() && target == "KUBE-MARK-MASQ") pod_cidrs_.push_back(not_s->masked());
    if (chain == "KUBE-SERVICES" && target == "KUBE-NODEPORTS") {
      if (dst_local) {
        // NodePorts on every local address; on 127.0.0.0/8 too unless excluded (route_localnet).
        facts_.localhost_nodeports = state_.family == IPFamily::V4 && !not_d;
      } else if (d) {
        if (!facts_.nodeport_addresses) facts_.nodeport_addresses.emplace();
        facts_.nodeport_addresses->push_back(d->addr);
      }
    }
    if (invalid && target == "DROP") facts_.drops_invalid = true;
    if (target == "DROP" && comment == "block incoming localnet connections") facts_.blocks_localnet = true;
    if (chain == "KUBE-FORWARD" && target == "ACCEPT" && mark_match) facts_.forward_accepts_marked = true;
    if (chain == "KUBE-MARK-MASQ" && target == "MARK" && !or_mark.empty()) {
      // --or-mark 0x4000, or iptables-save's --set-xmark 0x4000/0x4000.
      std::string v = or_mark.substr(0, or_mark.find('/'));
      char* end = nullptr;
      unsigned long m = std::strtoul(v.c_str(), &end, 0);
      if (end && *end == '\0' && m <= 0xffffffffu) facts_.masquerade_mark = static_cast<uint32_t>(m);
    }
  }

  const RulesetState& state_;
  mutable trace::Tracer tracer_;
  mutable std::mutex mu_;
  mutable std::optional<std::unordered_map<std::string, std::vector<std::string>>> affinity_index_;
  mutable std::map<std::string, std::vector<std::string>> affinity_;
  std::map<Dest, std::string> services_;
  std::map<std::pair<uint8_t, uint16_t>, std::string> nodeports_;
  std::set<Dest> endpoints_;
  std::vector<CIDR> pod_cidrs_;
  Facts facts_;
};

// ------------------------------------------------------------------ nftables

class NftFrontend : public ConcreteFrontend {
 public:
  NftFrontend(const nft::NftState& state, IPFamily family, std::vector<IPAddr> local, bool kernel_numgen)
      : state_(state), family_(family), tracer_(state, options(std::move(local), kernel_numgen)) {
    scan();
  }
  std::string backend() const override { return "nftables"; }

  void cut_points(PacketSpace& space) const override {
    for (const auto& [d, label] : services_) space.add_service(std::get<0>(d), std::get<1>(d), std::get<2>(d), label);
    for (const auto& [np, label] : nodeports_) space.add_nodeport(np.first, np.second, label);
    for (const auto& e : endpoints_) space.add_endpoint(std::get<0>(e), std::get<1>(e), std::get<2>(e));
    for (const auto& c : pod_cidrs_) space.pod_cidrs.push_back(c);
    for (const auto& c : facts_.service_cidrs) space.service_cidrs.push_back(c);
  }

  Facts facts() const override { return facts_; }

  Distribution trace(const Packet& p) const override {
    nft_trace::Packet t;
    t.src = p.src;
    t.dst = p.dst;
    t.proto = p.proto;
    t.sport = p.sport;
    t.dport = p.dport;
    t.origin = p.origin;
    if (!p.in_iface.empty()) t.in_iface = p.in_iface;
    if (!p.out_iface.empty()) t.out_iface = p.out_iface;
    t.mark = p.mark;
    t.ctstate = p.ctstate;
    t.remembered_age = p.remembered_age;
    std::lock_guard<std::mutex> lock(mu_);
    if (!p.remembered_endpoint.empty()) {
      auto it = affinity_.find(p.remembered_endpoint);
      if (it == affinity_.end()) {
        bool set_name = false;
        for (const auto& tb : state_.tables) set_name = set_name || tb.find_set(p.remembered_endpoint);
        std::vector<std::string> sets;
        if (set_name) {
          sets = nft_trace::resolve_affinity(state_, p.remembered_endpoint);
        } else {
          // One pass over the chains for every endpoint (as for iptables).
          if (!affinity_index_) affinity_index_ = nft_trace::affinity_index(state_);
          if (auto f = affinity_index_->find(p.remembered_endpoint); f != affinity_index_->end()) sets = f->second;
        }
        it = affinity_.emplace(p.remembered_endpoint, std::move(sets)).first;
      }
      t.remembered = it->second;
    }
    return from_nft(tracer_.trace(t));
  }

 private:
  static nft_trace::TraceOptions options(std::vector<IPAddr> local, bool kernel_numgen) {
    nft_trace::TraceOptions o;
    o.local_addresses = std::move(local);
    o.kernel_numgen = kernel_numgen;
    o.record_paths = false;  // the comparison reads outcomes and services only
    return o;
  }

  bool our_family(nft::Family f) const {
    if (f == nft::Family::Inet) return true;
    return f == (family_ == IPFamily::V4 ? nft::Family::Ip : nft::Family::Ip6);
  }

  void scan() {
    for (const auto& tb : state_.tables) {
      if (!our_family(tb.family)) continue;
      for (const auto& s : tb.sets) scan_set(s);
      for (const auto& c : tb.chains)
        for (const auto& r : c.rules) scan_rule(r);
    }
  }

  static std::string label_of(const nft::Element& e) {
    if (e.value) {
      std::string_view v = *e.value;
      size_t sp = v.rfind(' ');
      if (sp != std::string_view::npos) return nft_trace::service_from_chain(v.substr(sp + 1));
    }
    return e.comment ? trace::service_from_comment(*e.comment) : "";
  }

  void scan_set(const nft::Set& s) {
    using D = nft::Dtype;
    const D addr = family_ == IPFamily::V4 ? D::Ipv4Addr : D::Ipv6Addr;
    for (const auto& e : s.elements) {
      if (s.key.size() == 3 && s.key[0] == addr && s.key[1] == D::InetProto && s.key[2] == D::InetService &&
          e.key.size() == 3) {
        auto a = IPAddr::parse(e.key[0]);
        auto p = trace::proto_from_name(e.key[1]);
        auto port = port_of(e.key[2]);
        if (a && p && port) services_.emplace(Dest{*a, *p, *port}, label_of(e));
      } else if (s.key.size() == 2 && s.key[0] == D::InetProto && s.key[1] == D::InetService && e.key.size() == 2) {
        auto p = trace::proto_from_name(e.key[0]);
        auto port = port_of(e.key[1]);
        if (p && port) nodeports_.emplace(std::pair{*p, *port}, label_of(e));
      }
    }
    if (s.name == "nodeport-ips") {
      facts_.nodeport_addresses.emplace();
      for (const auto& e : s.elements)
        if (auto a = e.key.empty() ? std::nullopt : IPAddr::parse(e.key[0])) facts_.nodeport_addresses->push_back(*a);
    }
  }

  void scan_rule(const nft::Rule& r) {
    auto w = words(r.text());
    std::optional<uint8_t> proto;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      if (w[i] == "l4proto") proto = trace::proto_from_name(w[i + 1]);
      if (w[i] == "dnat" && w[i + 1] == "to" && i + 2 < w.size() && proto) {
        IPAddr a;
        uint16_t port = 0;
        if (split_host_port(w[i + 2], &a, &port)) endpoints_.insert({a, *proto, port});
      }
      // kube-proxy's masquerade rule for traffic from outside the cluster CIDR.
      if (w[i] == "saddr" && w[i + 1] == "!=" && i + 2 < w.size()) {
        auto c = CIDR::parse(w[i + 2]);
        if (c && !c->is_host() && r.text().find("mark-for-masquerade") != std::string::npos)
          pod_cidrs_.push_back(c->masked());
      }
    }
    if (r.comment() && r.comment()->find("unallocated ClusterIPs") != std::string::npos) {
      size_t b = r.text().find('{'), e = r.text().find('}');
      if (b != std::string::npos && e != std::string::npos && e > b) {
        std::string list = r.text().substr(b + 1, e - b - 1);
        for (auto& ch : list)
          if (ch == ',') ch = ' ';
        for (const auto& x : words(list))
          if (auto c = CIDR::parse(x, false, nullptr, true)) facts_.service_cidrs.push_back(c->masked());
      }
    }
  }

  const nft::NftState& state_;
  IPFamily family_;
  mutable nft_trace::Tracer tracer_;
  mutable std::mutex mu_;
  mutable std::optional<std::map<std::string, std::vector<std::string>>> affinity_index_;
  mutable std::map<std::string, std::vector<std::string>> affinity_;
  std::map<Dest, std::string> services_;
  std::map<std::pair<uint8_t, uint16_t>, std::string> nodeports_;
  std::set<Dest> endpoints_;
  std::vector<CIDR> pod_cidrs_;
  Facts facts_;
};

}  // namespace

std::unique_ptr<ConcreteFrontend> make_iptables_frontend(const RulesetState& state, std::vector<IPAddr> local_addresses,
                                                         const ipset::Table* ipsets) {
  return std::make_unique<IptablesFrontend>(state, std::move(local_addresses), ipsets);
}

std::unique_ptr<ConcreteFrontend> make_nft_frontend(const nft::NftState& state, IPFamily family,
                                                    std::vector<IPAddr> local_addresses, bool kernel_numgen) {
  return std::make_unique<NftFrontend>(state, family, std::move(local_addresses), kernel_numgen);
}

}  // namespace kpc::verifier::cross
