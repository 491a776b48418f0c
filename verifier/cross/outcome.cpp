#include "verifier/cross/outcome.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace kpc::verifier::cross {
namespace {

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

void replace_all(std::string* s, const std::string& from, const std::string& to) {
  for (size_t i = s->find(from); i != std::string::npos; i = s->find(from, i + to.size())) s->replace(i, from.size(), to);
}

// The pieces of Outcome::key(), in order, as views (hex_mark is the buffer of the mark's text),
// so that two keys compare without being built: Distribution::add and same() run for every
// share of every traced packet (the cross diff traces ~350,000 packets at 10,000 Services).
struct KeyPieces {
  char hex_mark[16];
  std::string_view p[15];
  explicit KeyPieces(const Outcome& o) {
    std::snprintf(hex_mark, sizeof hex_mark, "0x%x", o.mark);
    p[0] = trace::verdict_name(o.verdict);
    p[2] = o.route;
    p[4] = o.dnat;
    p[6] = o.masquerade ? "m" : "";
    p[8] = o.snat;
    p[10] = hex_mark;
    p[12] = o.affinity ? "a" : "";
    p[14] = o.options;
    for (int i = 1; i < 15; i += 2) p[i] = "|";
  }
  KeyPieces(const KeyPieces&) = delete;  // p[10] points into this object
};

}  // namespace

int compare_keys(const Outcome& a, const Outcome& b) {
  const KeyPieces x(a), y(b);
  // The two concatenations compared byte by byte, piece by piece.
  size_t i = 0, j = 0, oi = 0, oj = 0;
  while (true) {
    while (i < 15 && oi == x.p[i].size()) ++i, oi = 0;
    while (j < 15 && oj == y.p[j].size()) ++j, oj = 0;
    if (i == 15 || j == 15) return (i == 15 ? 0 : 1) - (j == 15 ? 0 : 1);
    size_t n = std::min(x.p[i].size() - oi, y.p[j].size() - oj);
    if (int c = std::memcmp(x.p[i].data() + oi, y.p[j].data() + oj, n)) return c < 0 ? -1 : 1;
    oi += n;
    oj += n;
  }
}

std::string Outcome::key() const {
  std::string k = trace::verdict_name(verdict);
  k += '|' + route + '|' + dnat + '|' + (masquerade ? "m" : "") + '|' + snat + '|' + hex(mark) + '|' +
       (affinity ? "a" : "") + '|' + options;
  return k;
}

std::string Outcome::text() const {
  std::string s = trace::verdict_name(verdict);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (verdict == Verdict::Unknown) return s + " (" + unknown_reason + ")";
  if (!route.empty()) s += " " + route;
  if (!dnat.empty()) s += " dnat " + dnat;
  if (masquerade) s += " masquerade";
  if (!snat.empty()) s += " snat " + snat;
  if (mark) s += " mark " + hex(mark);
  if (affinity) s += " affinity";
  if (!options.empty()) s += " [" + options + "]";
  return s;
}

bool Distribution::decided() const {
  return std::none_of(shares.begin(), shares.end(), [](const Share& s) { return s.outcome.verdict == Verdict::Unknown; });
}

void Distribution::add(const Outcome& o, const Fraction& p) {
  auto it = std::lower_bound(shares.begin(), shares.end(), o,
                             [](const Share& s, const Outcome& x) { return compare_keys(s.outcome, x) < 0; });
  if (it != shares.end() && compare_keys(it->outcome, o) == 0 && o.verdict != Verdict::Unknown) {
    it->probability = it->probability + p;
    return;
  }
  shares.insert(it, Share{o, p});
}

std::string Distribution::text() const {
  std::string s;
  for (const auto& sh : shares) {
    if (!s.empty()) s += "; ";
    if (!sh.probability.is_one()) s += sh.probability.fraction() + " ";
    s += sh.outcome.text();
  }
  return s.empty() ? "(no outcome)" : s;
}

bool same(const Distribution& a, const Distribution& b) {
  if (!a.decided() || !b.decided() || a.shares.size() != b.shares.size()) return false;
  for (size_t i = 0; i < a.shares.size(); ++i)
    if (compare_keys(a.shares[i].outcome, b.shares[i].outcome) != 0 || a.shares[i].probability != b.shares[i].probability)
      return false;
  return true;
}

std::string normalise_iptables_options(const std::string& options) {
  std::string s = options;
  // effects.h prints the default reject type as nothing already.
  replace_all(&s, "reject-with tcp-reset", "reject tcp-reset");
  replace_all(&s, "masquerade --random-fully", "masquerade fully-random");
  replace_all(&s, "masquerade --random", "masquerade random");
  return s;
}

std::string normalise_nft_options(const std::string& options) {
  std::string s = options;
  // nft's bare `reject` is ICMP (v6) port-unreachable: iptables REJECT's default.
  for (const char* d : {"reject with icmp type port-unreachable", "reject with icmpv6 type port-unreachable",
                        "reject with icmpx type port-unreachable", "reject with icmp port-unreachable",
                        "reject with icmpv6 port-unreachable"})
    replace_all(&s, d, "");
  if (s == "reject") s.clear();
  replace_all(&s, "reject with tcp reset", "reject tcp-reset");
  while (!s.empty() && (s.back() == ' ' || s.back() == ';')) s.pop_back();
  while (!s.empty() && (s.front() == ' ' || s.front() == ';')) s.erase(0, 1);
  return s;
}

std::string normalise_service(std::string s) {
  while (!s.empty() && s.back() == ':') s.pop_back();
  return s;
}

namespace {
void add_service(std::vector<std::string>* out, const std::string& s) {
  std::string n = normalise_service(s);
  if (!n.empty() && std::find(out->begin(), out->end(), n) == out->end()) out->push_back(n);
}
}  // namespace

Distribution from_iptables(const trace::TraceResult& r) {
  Distribution d;
  for (const auto& o : r.outcomes) {
    Outcome x;
    x.verdict = o.verdict;
    x.route = o.route;
    x.dnat = o.dnat ? o.dnat_text : "";
    x.masquerade = o.masquerade;
    x.snat = o.snat_text;
    x.mark = o.final_mark;
    // The client is remembered when a --set wrote it or an --update found it.
    x.affinity = std::any_of(o.affinity.begin(), o.affinity.end(), [](const trace::RecentUse& u) {
      return u.cmd == trace::RecentUse::Cmd::Set || u.cmd == trace::RecentUse::Cmd::Update;
    });
    x.options = normalise_iptables_options(o.options);
    x.unknown_reason = o.unknown_reason;
    d.add(x, Fraction::from_dyadic(o.probability));
    for (const auto& s : o.services) add_service(&d.services, s);
  }
  return d;
}

Distribution from_nft(const nft_trace::TraceResult& r) {
  Distribution d;
  for (const auto& o : r.outcomes) {
    Outcome x;
    x.verdict = o.verdict;
    x.route = o.route;
    x.dnat = o.dnat ? o.dnat_text : "";
    x.masquerade = o.masquerade;
    x.snat = o.snat_text;
    x.mark = o.final_mark;
    x.affinity = std::any_of(o.affinity.begin(), o.affinity.end(),
                             [](const std::string& a) { return a.rfind("update", 0) == 0 || a.rfind("add", 0) == 0; });
    x.options = normalise_nft_options(o.options);
    x.unknown_reason = o.unknown_reason;
    d.add(x, o.probability);
    for (const auto& s : o.services) add_service(&d.services, s);
  }
  return d;
}

}  // namespace kpc::verifier::cross
