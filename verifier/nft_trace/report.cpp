// Reports and helpers around the nft tracer: distribution, text output, affinity and
// local-address resolution from a state.
#include <algorithm>
#include <cstdio>

#include "compiler/ir/rule.h"
#include "compiler/support/text.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::verifier::nft_trace {

std::vector<DistributionEntry> distribution(const TraceResult& r) {
  std::vector<DistributionEntry> out;
  for (const auto& o : r.outcomes) {
    auto it = std::find_if(out.begin(), out.end(), [&](const DistributionEntry& d) {
      return d.verdict == o.verdict && d.dnat_text == o.dnat_text && d.masquerade == o.masquerade &&
             d.unknown_reason == o.unknown_reason;
    });
    if (it == out.end()) {
      DistributionEntry d;
      d.verdict = o.verdict;
      d.dnat_text = o.dnat_text;
      d.masquerade = o.masquerade;
      d.unknown_reason = o.unknown_reason;
      out.push_back(d);
      it = out.end() - 1;
    }
    it->probability = it->probability + o.probability;
    it->outcomes += 1;
  }
  std::stable_sort(out.begin(), out.end(), [](const DistributionEntry& a, const DistributionEntry& b) {
    return a.probability > b.probability;
  });
  return out;
}

std::string service_from_chain(std::string_view chain) {
  // service-HASH-ns/name/proto/port, external-..., firewall-..., endpoint-...__ip/port
  size_t dash = chain.find('-');
  if (dash == std::string_view::npos) return "";
  std::string_view kind = chain.substr(0, dash);
  if (kind != "service" && kind != "external" && kind != "endpoint" && kind != "firewall") return "";
  std::string_view rest = chain.substr(dash + 1);
  size_t d2 = rest.find('-');
  if (d2 != 8) return "";
  rest = rest.substr(9);
  if (size_t sep = rest.find("__"); sep != std::string_view::npos) rest = rest.substr(0, sep);
  auto parts = split(rest, '/');
  if (parts.size() != 4) return "";
  std::string svc = std::string(parts[0]) + "/" + std::string(parts[1]);
  return parts[3].empty() ? svc : svc + ":" + std::string(parts[3]);
}

std::vector<std::string> resolve_affinity(const nft::NftState& state, const std::string& endpoint) {
  std::vector<std::string> out;
  for (const auto& tb : state.tables)
    if (tb.find_set(endpoint)) return {endpoint};
  // "ip:port": the sets a chain updates before it DNATs there.
  for (const auto& tb : state.tables) {
    for (const auto& c : tb.chains) {
      std::vector<std::string> updated;
      bool dnats = false;
      for (const auto& r : c.rules) {
        for (const auto& s : r.refs().dynset) updated.push_back(s);
        size_t p = r.canonical().find("dnat to ");
        if (p == std::string::npos) continue;
        std::string_view rest = std::string_view(r.canonical()).substr(p + 8);
        rest = rest.substr(0, rest.find(' '));
        dnats = dnats || rest == endpoint;
      }
      if (dnats) out.insert(out.end(), updated.begin(), updated.end());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::map<std::string, std::vector<std::string>> affinity_index(const nft::NftState& state) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& tb : state.tables) {
    for (const auto& c : tb.chains) {
      std::vector<std::string> updated, targets;
      for (const auto& r : c.rules) {
        for (const auto& s : r.refs().dynset) updated.push_back(s);
        size_t p = r.canonical().find("dnat to ");
        if (p == std::string::npos) continue;
        std::string_view rest = std::string_view(r.canonical()).substr(p + 8);
        targets.emplace_back(rest.substr(0, rest.find(' ')));
      }
      for (const auto& t : targets) {
        auto& names = out[t];
        names.insert(names.end(), updated.begin(), updated.end());
      }
    }
  }
  for (auto& [endpoint, names] : out) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  return out;
}

std::vector<IPAddr> infer_local_addresses(const nft::NftState& state, IPFamily family,
                                          std::vector<std::string>* reasons) {
  std::vector<IPAddr> out;
  for (const auto& tb : state.tables) {
    if (tb.family != (family == IPFamily::V4 ? nft::Family::Ip : nft::Family::Ip6)) continue;
    const nft::Set* s = tb.find_set("nodeport-ips");
    if (!s) continue;
    for (const auto& el : s->elements) {
      if (el.removed || el.key.size() != 1) continue;
      auto a = IPAddr::parse(el.key[0]);
      if (!a || a->family != family || std::find(out.begin(), out.end(), *a) != out.end()) continue;
      out.push_back(*a);
      if (reasons)
        reasons->push_back(a->str() + ": in @nodeport-ips of " + std::string(nft::family_name(tb.family)) + " " +
                           tb.name + " (kube-proxy's nodePortAddresses)");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}
}  // namespace

std::string format_text(const Packet& pkt, const TraceOptions& options, const TraceResult& r) {
  std::string out = "packet: ";
  out += trace::proto_name(pkt.proto);
  out += " " + (pkt.src.family == IPFamily::V6 ? "[" + pkt.src.str() + "]" : pkt.src.str()) + ":" +
         (pkt.sport ? std::to_string(*pkt.sport) : std::string("*"));
  out += " -> " + trace::host_port(pkt.dst, pkt.dport);
  out += ", from ";
  out += origin_name(pkt.origin);
  if (pkt.origin != Origin::Node) out += " (in " + (pkt.in_iface ? printable(*pkt.in_iface) : std::string("?")) + ")";
  if (pkt.out_iface) out += ", out " + printable(*pkt.out_iface);
  out += ", ct " + ir::ctstate_text(pkt.ctstate) + ", mark " + hex(pkt.mark);
  if (pkt.remembered.empty()) {
    out += ", new client";
  } else {
    out += ", client remembered by";
    for (const auto& n : pkt.remembered) out += " @" + printable(n);
    out += " (last seen " + std::to_string(pkt.remembered_age) + " s ago)";
  }
  out += "\nlocal addresses:";
  for (const auto& a : options.local_addresses) out += " " + a.str();
  out += pkt.dst.family == IPFamily::V4 ? " (and 127.0.0.0/8)\n" : " (and ::1)\n";
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  out += std::to_string(r.outcomes.size()) + (r.outcomes.size() == 1 ? " outcome\n" : " outcomes\n");
  size_t k = 0;
  for (const auto& o : r.outcomes) {
    ++k;
    out += "\n[" + std::to_string(k) + "] p = " + o.probability.fraction() + " ~ " + o.probability.decimal(10) + "  " +
           verdict_name(o.verdict);
    if (!o.route.empty()) out += " (" + o.route + ")";
    if (o.dnat) out += "  DNAT " + o.dnat_text;
    out += std::string("  masquerade: ") + (o.masquerade ? "yes" : "no");
    if (!o.snat_text.empty()) out += "  SNAT " + o.snat_text;
    out += "  mark " + hex(o.final_mark);
    if (!o.options.empty()) out += "  [" + printable(o.options) + "]";
    if (!o.affinity.empty()) {
      out += "  affinity:";
      for (const auto& a : o.affinity) out += " " + printable(a);
    }
    if (!o.services.empty()) {
      out += "  service";
      for (const auto& s : o.services) out += " " + printable(s);
    }
    out += "\n";
    if (o.verdict == Verdict::Unknown) out += "    unknown: " + printable(o.unknown_reason) + "\n";
    for (const auto& s : o.path) {
      out += "    " + printable(s.table) + " " + s.hook + " " + printable(s.chain) + " ";
      if (s.kind == Step::Policy)
        out += printable(s.text);
      else
        out += "#" + std::to_string(s.rule_no) + " " + printable(s.text);
      if (s.kind == Step::Unknown) out += "   [unknown]";
      if (!s.note.empty()) out += "   (" + printable(s.note) + ")";
      out += "\n";
    }
  }
  auto dist = distribution(r);
  if (dist.size() > 1 || (dist.size() == 1 && dist[0].outcomes > 1)) {
    out += "\ndistribution:\n";
    for (const auto& d : dist) {
      out += "  " + d.probability.decimal(10) + "  " + d.probability.fraction() + "  " + verdict_name(d.verdict);
      if (!d.dnat_text.empty()) out += " DNAT " + d.dnat_text;
      if (d.masquerade) out += " masquerade";
      if (!d.unknown_reason.empty()) out += " (" + printable(d.unknown_reason) + ")";
      out += "\n";
    }
  }
  Fraction total = r.total();
  if (!total.is_one()) out += "total probability " + total.fraction() + " (not 1)\n";
  return out;
}

}  // namespace kpc::verifier::nft_trace
