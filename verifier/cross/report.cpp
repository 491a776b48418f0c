#include "verifier/cross/report.h"

#include <map>
#include <string_view>

#include <cmath>

namespace kpc::verifier::cross {

const char* const kCoverageNote =
    "This is an exhaustive check over representative packets, not yet a per-class proof: every "
    "destination either program names (service address, protocol and port; NodePorts on each node "
    "address and on 127.0.0.1; each endpoint; one other port per service address; one unallocated "
    "address per service CIDR; one address nobody names), from a pod, an external client, the node, "
    "the endpoint itself (hairpin) and localhost; new, established and invalid packets; new and "
    "remembered affinity clients. Other packets to the same destinations are not covered.";

const char* const kClassCoverageNote =
    "This is a per-class proof: both programs were explored packet class by packet class over every "
    "destination atom either names (addresses, protocols, ports, interfaces, conntrack states, marks, "
    "remembered affinity clients), from outside and from the node; every class whose outcomes differ was "
    "traced through both programs with its witness packet and named by the documented mode difference "
    "that explains it, or reported as not known.";

const char* const kFirstPacketsNote =
    "First packets only: one side is IPVS, whose later packets of a connection follow its connection "
    "table (ip_vs_conn_in_get), which no program holds; established and invalid packets were not traced.";

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "+") + x;
  return s;
}

// The known differences of the comparison's pair of modes.
const std::vector<KnownDifference>& known_list(const CrossResult& r) {
  return r.backend_a == "ipvs" || r.backend_b == "ipvs" ? ipvs_known_differences() : known_differences();
}

std::string family_word(IPFamily f) { return f == IPFamily::V4 ? "IPv4" : "IPv6"; }

std::string counts_line(const CrossResult& r) {
  size_t known = r.differences.size() - r.surprises;
  std::string s = r.per_class ? "every packet class compared (from outside and from the node); " +
                                    std::to_string(r.differences.size()) + " classes differ: " +
                                    std::to_string(known) + " known"
                              : std::to_string(r.packets) + " packets traced by both; " +
                                    std::to_string(r.differences.size()) + " differ: " + std::to_string(known) +
                                    " known";
  if (!r.known_counts.empty()) {
    s += " (";
    bool first = true;
    for (const auto& [id, n] : r.known_counts) {
      s += (first ? "" : ", ") + id + " " + std::to_string(n);
      first = false;
    }
    s += ")";
  }
  s += ", " + std::to_string(r.surprises) + " not known";
  if (r.undecided) s += " (" + std::to_string(r.undecided) + " undecided)";
  return s;
}

// What a service's count counts: packets traced, or differing classes.
const char* unit(const CrossResult& r) { return r.per_class ? " differing classes, " : " packets, "; }

std::string coverage(const CrossResult& r) {
  if (r.per_class) return kClassCoverageNote;
  return r.first_packets_only ? std::string(kCoverageNote) + " " + kFirstPacketsNote : kCoverageNote;
}



nlohmann::ordered_json probability_json(const Fraction& p) {
  nlohmann::ordered_json j;
  j["percent"] = std::round(p.to_double() * 100 * 10000) / 10000;
  j["fraction"] = p.fraction();
  j["numerator"] = p.numerator().str();
  int l2 = p.denominator_log2();
  j["denominator_log2"] = l2 >= 0 ? nlohmann::ordered_json(l2) : nlohmann::ordered_json(nullptr);
  j["denominator"] = p.denominator().str();
  j["decimal"] = p.decimal(10);
  return j;
}

nlohmann::ordered_json dist_json(const Distribution& d) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& s : d.shares) {
    nlohmann::ordered_json x;
    x["probability"] = probability_json(s.probability);
    x["outcome"] = s.outcome.text();
    x["verdict"] = trace::verdict_name(s.outcome.verdict);
    x["route"] = s.outcome.route.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.outcome.route);
    x["dnat"] = s.outcome.dnat.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.outcome.dnat);
    x["masquerade"] = s.outcome.masquerade;
    x["mark"] = s.outcome.mark;
    x["affinity"] = s.outcome.affinity;
    x["options"] = s.outcome.options;
    if (s.outcome.verdict == Verdict::Unknown) x["unknown"] = s.outcome.unknown_reason;
    a.push_back(x);
  }
  return a;
}

nlohmann::ordered_json packet_json(const Packet& p) {
  nlohmann::ordered_json j;
  j["text"] = p.text();
  j["src"] = p.src.str();
  j["dst"] = p.dst.str();
  j["proto"] = trace::proto_name(p.proto);
  j["dport"] = p.dport;
  j["source"] = source_kind_name(p.source_kind);
  j["destination"] = dest_kind_name(p.dest_kind);
  j["ctstate"] = p.ctstate == 2 ? "NEW" : p.ctstate == 4 ? "ESTABLISHED" : p.ctstate == 1 ? "INVALID" : "OTHER";
  j["remembered_endpoint"] =
      p.remembered_endpoint.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(p.remembered_endpoint);
  return j;
}

}  // namespace

std::string cross_text(const CrossResult& r, const ReportOptions& o) {
  // The first line says which engine answered: packets traced through both programs, by sample
  // (the same-mode diff compares packet classes); the second what that covers.
  std::string out = "kpc diff across modes: " + o.name_a + " (" + r.backend_a + ") -> " + o.name_b + " (" +
                    r.backend_b + "), " + family_word(r.family) + "\n";
  out += r.per_class ? "coverage: every packet class (a per-class proof), each difference classified\n"
                     : "coverage: representative packets traced through both programs, not a per-class proof\n";
  out += counts_line(r) + "\n";
  if (r.per_class && r.same_neutral)
    out += "(" + std::to_string(r.same_neutral) +
           " more classes differ only in how each mode spells the same outcome: recent lists and affinity sets, "
           "statistic and numgen shares)\n";
  for (const auto& f : r.self_check_failures) out += "internal error (a symbolic front end and its tracer disagree): " + f + "\n";
  if (r.first_packets_only) out += std::string(kFirstPacketsNote) + "\n";
  if (o.verbose) out += std::string(r.per_class ? kClassCoverageNote : kCoverageNote) + "\n";
  out += r.surprises == 0 ? "verdict: every difference is a documented difference between the modes\n"
                          : "verdict: differences that are not documented between the modes\n";
  // Each service's cells in the order compare() found them, gathered once (looking through every
  // cell for every service was quadratic: ~6 s of a 10,000-Service diff).
  std::map<std::string_view, std::vector<const Cell*>> cells_of;
  for (const auto& c : r.differences) cells_of[c.service].push_back(&c);
  bool any = false;
  for (const auto& [svc, sum] : r.services) {
    if (sum.known == 0 && sum.surprises == 0) continue;
    if (!any) out += "\nby service:\n";
    any = true;
    out += "  " + svc + ": " + std::to_string(sum.packets) + unit(r) + std::to_string(sum.surprises) +
           " not known, " + std::to_string(sum.known) + " known";
    if (!sum.by_known.empty()) {
      out += " (";
      bool first = true;
      for (const auto& [id, n] : sum.by_known) {
        out += (first ? "" : ", ") + id + " " + std::to_string(n);
        first = false;
      }
      out += ")";
    }
    out += "\n";
    size_t shown = 0;
    static const std::vector<const Cell*> kNone;
    auto found = cells_of.find(svc);
    for (const Cell* cp : found == cells_of.end() ? kNone : found->second) {
      const Cell& c = *cp;
      bool show = c.known.empty() ? (o.verbose || shown < o.max_examples) : o.verbose;
      if (!show) continue;
      if (c.known.empty()) ++shown;
      out += c.known.empty() ? (c.undecided ? "    undecided: " : "    NOT KNOWN: ") : "    known " + join(c.known) + ": ";
      out += c.packet.text() + "\n";
      out += "      " + r.backend_a + ": " + c.a.text() + "\n";
      out += "      " + r.backend_b + ": " + c.b.text() + "\n";
    }
    if (!o.verbose && sum.surprises > shown)
      out += "    ... " + std::to_string(sum.surprises - shown) + " more (--verbose)\n";
  }
  if (o.show_known) {
    out += "\nknown differences between kube-proxy's modes:\n";
    for (const auto& k : known_list(r)) {
      auto it = r.known_counts.find(k.id);
      size_t n = it == r.known_counts.end() ? 0 : it->second;
      out += "  " + k.id + ": " + std::to_string(n) + " packets\n";
      out += "    " + k.explanation + "\n";
      out += "    source: " + k.source + "\n";
      if (auto ex = r.known_example.find(k.id); ex != r.known_example.end()) {
        out += "    example: ";
        const Cell& c = r.differences[ex->second];
        out += c.packet.text() + " (" + c.service + ")\n";
        out += "      " + r.backend_a + ": " + c.a.text() + "\n";
        out += "      " + r.backend_b + ": " + c.b.text() + "\n";
      }
    }
  } else if (!r.known_counts.empty()) {
    out += "\n(--show-known lists the known differences with their sources and an example each)\n";
  }
  return out;
}

std::string cross_markdown(const CrossResult& r, const ReportOptions& o) {
  std::string out = "### kpc diff across modes: `" + o.name_a + "` (" + r.backend_a + ") → `" + o.name_b + "` (" +
                    r.backend_b + "), " + family_word(r.family) + "\n\n";
  out += counts_line(r) + (r.per_class ? " (every packet class, a per-class proof).\n\n"
                                       : " (representative packets per destination, not a per-class proof).\n\n");
  if (r.first_packets_only) out += std::string(kFirstPacketsNote) + "\n\n";
  out += r.surprises == 0 ? "**Every difference is a documented difference between kube-proxy's modes.**\n\n"
                          : "**Differences that are not documented between the modes: read them.**\n\n";
  out += r.per_class ? "| Service | differing classes | not known | known |\n|---|---:|---:|---|\n"
                     : "| Service | packets | not known | known |\n|---|---:|---:|---|\n";
  for (const auto& [svc, sum] : r.services) {
    if (sum.known == 0 && sum.surprises == 0) continue;
    std::string k;
    for (const auto& [id, n] : sum.by_known) k += (k.empty() ? "" : ", ") + id + " " + std::to_string(n);
    out += "| `" + svc + "` | " + std::to_string(sum.packets) + " | " + std::to_string(sum.surprises) + " | " + k +
           " |\n";
  }
  size_t shown = 0;
  for (const auto& c : r.differences) {
    if (!c.known.empty() || shown >= o.max_examples) continue;
    if (shown++ == 0) out += "\nNot known (first " + std::to_string(o.max_examples) + "):\n\n";
    out += "- `" + c.service + "`: " + c.packet.text() + " — " + r.backend_a + ": " + c.a.text() + "; " +
           r.backend_b + ": " + c.b.text() + "\n";
  }
  if (o.show_known) {
    out += "\nKnown differences:\n\n";
    for (const auto& k : known_list(r)) {
      auto it = r.known_counts.find(k.id);
      out += "- **" + k.id + "** (" + std::to_string(it == r.known_counts.end() ? 0 : it->second) + "): " +
             k.explanation + " — " + k.source + "\n";
    }
  }
  return out;
}

nlohmann::ordered_json cross_json(const CrossResult& r, const ReportOptions& o) {
  nlohmann::ordered_json j;
  j["a"] = {{"input", o.name_a}, {"backend", r.backend_a}};
  j["b"] = {{"input", o.name_b}, {"backend", r.backend_b}};
  j["family"] = family_word(r.family);
  j["coverage"] = coverage(r);
  j["engine"] = r.per_class ? "per-class" : "sampled";
  j["packets"] = r.packets;
  if (r.per_class) {
    j["classes"] = r.classes;
    j["atoms"] = r.atoms;
    j["same_neutral"] = r.same_neutral;
    j["self_check_failures"] = r.self_check_failures;
  }
  j["only_known"] = r.only_known();
  j["surprises"] = r.surprises;
  j["undecided"] = r.undecided;
  nlohmann::ordered_json services = nlohmann::ordered_json::array();
  for (const auto& [svc, sum] : r.services) {
    if (sum.known == 0 && sum.surprises == 0) continue;
    nlohmann::ordered_json s;
    s["service"] = svc;
    s["packets"] = sum.packets;
    s["surprises"] = sum.surprises;
    s["known"] = sum.by_known;
    services.push_back(s);
  }
  j["services"] = services;
  nlohmann::ordered_json diffs = nlohmann::ordered_json::array();
  for (const auto& c : r.differences) {
    nlohmann::ordered_json d;
    d["service"] = c.service;
    d["known"] = c.known;
    d["undecided"] = c.undecided;
    d["packet"] = packet_json(c.packet);
    d["a"] = dist_json(c.a);
    d["b"] = dist_json(c.b);
    diffs.push_back(d);
  }
  j["differences"] = diffs;
  nlohmann::ordered_json known = nlohmann::ordered_json::array();
  for (const auto& k : known_list(r)) {
    auto it = r.known_counts.find(k.id);
    size_t n = it == r.known_counts.end() ? 0 : it->second;
    if (n == 0 && !o.show_known) continue;
    nlohmann::ordered_json x;
    x["id"] = k.id;
    x["count"] = n;
    x["explanation"] = k.explanation;
    x["source"] = k.source;
    if (auto ex = r.known_example.find(k.id); ex != r.known_example.end()) {
      const Cell& c = r.differences[ex->second];
      x["example"] = {{"service", c.service}, {"packet", packet_json(c.packet)}, {"a", dist_json(c.a)},
                      {"b", dist_json(c.b)}};
    } else {
      x["example"] = nullptr;
    }
    known.push_back(x);
  }
  j["known_differences"] = known;
  return j;
}

}  // namespace kpc::verifier::cross
