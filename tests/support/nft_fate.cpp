#include "tests/support/nft_fate.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "verifier/nft_sym/explorer.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::test {
namespace {
namespace vn = verifier::nft;
namespace nft_trace = verifier::nft_trace;
namespace sem = verifier::sem;
namespace trace = verifier::trace;
using verifier::nft_sym::build_universe;

// A packet's outcomes as comparable text (kernel numgen shares on both sides).
std::string fate(nft_trace::Tracer& t, const nft_trace::Packet& p) {
  std::vector<std::string> v;
  for (const auto& o : t.trace(p).outcomes)
    v.push_back(std::string(nft_trace::verdict_name(o.verdict)) + " " + o.route + " " + o.dnat_text +
                (o.masquerade ? " masq" : "") + " mark " + std::to_string(o.final_mark) + " p " +
                o.probability.fraction() + " " + o.unknown_reason);
  std::sort(v.begin(), v.end());
  std::string s;
  for (auto& x : v) s += x + "; ";
  return s;
}

}  // namespace

bool nft_fate_differs(const vn::NftState& a, const vn::NftState& b, const std::vector<IPAddr>& local) {
  sem::Universe u = build_universe({&a, &b}, IPFamily::V4, local);
  nft_trace::TraceOptions to;
  to.local_addresses = local;
  to.kernel_numgen = true;
  nft_trace::Tracer ta(a, to), tb(b, to);
  std::vector<uint16_t> ports = {80, 443, 53, 3001, 3002, 8080, 30000, 30080};
  std::string la = vn::print_ruleset(a) + vn::print_ruleset(b);
  for (size_t p = la.find(" . "); p != std::string::npos; p = la.find(" . ", p + 1)) {
    unsigned v = 0;
    size_t k = p + 3;
    while (k < la.size() && isdigit(static_cast<unsigned char>(la[k])) && v < 100000) v = v * 10 + unsigned(la[k++] - '0');
    if (k > p + 3 && v <= 65535) ports.push_back(static_cast<uint16_t>(v));
  }
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  for (size_t i = 0; i < u.atom_count(); ++i) {
    IPAddr dst = sem::addr_from_value(u.atom(i).first, IPFamily::V4);
    for (uint16_t port : ports)
      for (uint8_t proto : {6, 17})
        for (int from = 0; from < 3; ++from) {
          nft_trace::Packet p;
          p.src = *IPAddr::parse(from == 0 ? "10.0.1.5" : "203.0.113.9");
          p.dst = dst;
          p.proto = proto;
          p.sport = 40000;
          p.dport = port;
          p.origin = from == 0 ? trace::Origin::Pod : from == 1 ? trace::Origin::External : trace::Origin::Node;
          if (from == 2) p.src = local[0];
          if (from != 2) p.in_iface = "eth0";
          p.out_iface = "eth0";
          if (fate(ta, p) != fate(tb, p)) return true;
        }
  }
  return false;
}

}  // namespace kpc::test
