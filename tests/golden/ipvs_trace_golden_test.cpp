// The IPVS tracer (verifier/ipvs_trace) against kube-proxy's IPVS test expectations and
// against the nftables tracer.
//
// * kube-proxy's expectations: for every fixtures/kp-ipvs-* (transcribed from
//   pkg/proxy/ipvs/proxier_test.go) and fixtures/example/expected/ipvs-*, kpc's four files
//   are read back by the verifier and a packet to each virtual server (ClusterIP, external
//   IP, load-balancer IP, NodePort) is traced from outside the node: the accepted outcomes
//   must go to exactly the real servers the test expects, each with share 1/N (rr, weight 1),
//   nothing else may happen to the packet, and a virtual server without real servers must
//   answer ICMP port unreachable (ip_vs_leave). Every virtual server of the program is
//   traced, the ones kube-proxy's test lists are checked against its list.
// * nftables: the same snapshot compiled with the nftables back end and traced with the
//   nft tracer (numgen shares exactly 1/N) must give the same destinations and shares, except
//   the differences by design listed in kByDesign (IPVS's fallback to cluster endpoints when
//   a Local policy has no local endpoint, where nftables drops).
// There is no IPVS in this kernel: the IPVS side is checked against kube-proxy's expectations
// and the verifier's model only.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "compiler/driver/compile.h"
#include "compiler/driver/compile_ipvs.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "tests/support/test_util.h"
#include "verifier/ipvs_trace/tracer.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/state/state.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;
namespace it = verifier::ipvs_trace;
namespace vt = verifier::trace;
namespace nt = verifier::nft_trace;

using Shares = std::map<std::string, std::string>;  // "ip:port" (accepted) or verdict -> fraction

struct Fixture {
  std::string name, dir;
  IPFamily family = IPFamily::V4;
};

std::vector<Fixture> fixtures() {
  std::vector<Fixture> out;
  for (const auto& e : fs::directory_iterator(source_path("fixtures"))) {
    std::string name = e.path().filename().string();
    if (!name.starts_with("kp-ipvs-") || !fs::exists(e.path() / "case.yaml")) continue;
    YAML::Node c = YAML::LoadFile((e.path() / "case.yaml").string());
    out.push_back({name, e.path().string(), c["family"].as<std::string>() == "ipv6" ? IPFamily::V6 : IPFamily::V4});
  }
  std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* proto_lower(verifier::ipvs::Proto p) {
  return p == verifier::ipvs::Proto::TCP ? "tcp" : p == verifier::ipvs::Proto::UDP ? "udp" : "sctp";
}
uint8_t proto_number(verifier::ipvs::Proto p) {
  return p == verifier::ipvs::Proto::TCP ? vt::kProtoTCP : p == verifier::ipvs::Proto::UDP ? vt::kProtoUDP
                                                                                           : vt::kProtoSCTP;
}

// A client outside the node that the load-balancer source ranges let in: the first address of
// a KUBE-LOAD-BALANCER-SOURCE-CIDR entry for the virtual server, else a documentation address.
IPAddr client_for(const it::ProgramSet& set, const verifier::ipvs::ServiceKey& key) {
  IPAddr def = *IPAddr::parse(set.family == IPFamily::V4 ? "203.0.113.77" : "2001:db8:77::77");
  for (const auto& [name, s] : set.sets.sets) {
    if (name.find("LOAD-BALANCER-SOURCE-CID") == std::string::npos) continue;
    for (const auto& e : s.entries) {
      if (e.dims.size() != 3) continue;
      // dims: vip, proto:port, cidr
      IPAddr vip = key.vip.address;
      verifier::ipset::u128 v = 0;
      for (size_t b = 0; b < (vip.family == IPFamily::V4 ? 4u : 16u); ++b) v = (v << 8) | vip.bytes[b];
      if (e.dims[0].lo != v || e.dims[1].lo != key.vip.port || e.proto != proto_number(key.proto)) continue;
      verifier::ipset::u128 lo = e.dims[2].lo;
      IPAddr a;
      a.family = vip.family;
      size_t n = vip.family == IPFamily::V4 ? 4 : 16;
      for (size_t b = 0; b < n; ++b) a.bytes[n - 1 - b] = uint8_t(lo >> (8 * b));
      return a;
    }
  }
  return def;
}

vt::Packet packet_to(const it::ProgramSet& set, const verifier::ipvs::ServiceKey& key) {
  vt::Packet p;
  p.src = client_for(set, key);
  p.dst = key.vip.address;
  p.dport = key.vip.port;
  p.proto = proto_number(key.proto);
  p.origin = vt::Origin::External;
  p.in_iface = "eth0";
  p.in_bridge_port = "";  // not through a bridge port
  return p;
}

Shares ipvs_shares(const it::TraceResult& r) {
  Shares m;
  for (const auto& d : it::distribution(r)) {
    std::string k = d.verdict == vt::Verdict::Accept && !d.dnat_text.empty() ? d.dnat_text
                                                                               : vt::verdict_name(d.verdict);
    if (d.verdict == vt::Verdict::Unknown) k += " (" + d.unknown_reason + ")";
    m[k] = d.probability.fraction();
  }
  return m;
}

Shares equal_shares(const std::set<std::string>& servers) {
  Shares m;
  if (servers.empty()) {
    m["REJECT"] = "1";
    return m;
  }
  std::string f = servers.size() == 1 ? "1" : "1/" + std::to_string(servers.size());
  for (const auto& s : servers) m[s] = f;
  return m;
}

std::string show(const Shares& s) {
  std::string o;
  for (const auto& [k, v] : s) o += " " + k + "=" + v;
  return o.empty() ? " (nothing)" : o;
}

std::string key_text(const verifier::ipvs::ServiceKey& k) {
  return std::string(verifier::ipvs::proto_name(k.proto)) + " " + vt::host_port(k.vip.address, k.vip.port);
}

// What kube-proxy's test lists: "TCP 10.20.30.41:80" -> real servers.
std::map<std::string, std::set<std::string>> expected_real_servers(const std::string& dir) {
  std::map<std::string, std::set<std::string>> out;
  YAML::Node exp = YAML::LoadFile(dir + "/kubeproxy/expected.yaml");
  if (!exp["ipvs"] || !exp["ipvs"]["virtualServers"]) return out;
  for (const auto& vs : exp["ipvs"]["virtualServers"]) {
    auto addr = *IPAddr::parse(vs["address"].as<std::string>());
    std::string k = vs["protocol"].as<std::string>() + " " + vt::host_port(addr, vs["port"].as<uint16_t>());
    std::set<std::string> rs;
    for (const auto& r : vs["realServers"]) {
      auto h = verifier::ipvs::parse_host_port(r.as<std::string>());
      rs.insert(h ? vt::host_port(h->address, h->port) : r.as<std::string>());
    }
    out[k] = rs;
  }
  return out;
}

struct Traced {
  std::map<std::string, Shares> by_vs;  // key_text -> shares
};

// Traces a packet to every virtual server of the program set; checks each against its own
// real servers (equal shares) and returns what it saw.
Traced trace_all(const it::ProgramSet& set, const std::string& label, size_t* packets) {
  Traced t;
  it::TraceOptions o;
  o.local_addresses = it::inferred_node_addresses(set);
  it::Tracer tracer(set, o);
  for (const auto& [key, vs] : set.ipvs.services) {
    auto r = tracer.trace(packet_to(set, key), {});
    Shares got = ipvs_shares(r);
    std::set<std::string> rs;
    for (const auto& s : vs.real_servers) rs.insert(vt::host_port(s.dest.address, s.dest.port));
    EXPECT_EQ(got, equal_shares(rs)) << label << " " << key_text(key) << ":" << show(got) << " want"
                                     << show(equal_shares(rs));
    EXPECT_TRUE(r.total().is_one()) << label << " " << key_text(key);
    t.by_vs[key_text(key)] = got;
    ++*packets;
  }
  return t;
}

std::optional<it::ProgramSet> load_set(const it::ProgramTexts& texts, IPFamily family, const std::string& label) {
  it::ProgramSet set;
  it::LoadError e;
  if (!it::load_program_set(texts, family, &set, &e)) {
    ADD_FAILURE() << label << ": " << e.text();
    return std::nullopt;
  }
  return set;
}

TEST(IpvsTraceGolden, EveryVirtualServerOfKubeProxysTestsGetsTheExpectedRealServersInEqualShares) {
  size_t packets = 0, listed = 0, fixtures_seen = 0;
  for (const auto& f : fixtures()) {
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    ASSERT_TRUE(load_snapshot({f.dir + "/snapshot.yaml"}, LoadOptions{}, sm, &snap, diags)) << f.name;
    auto c = compile_ipvs(snap, f.family, diags);
    ASSERT_TRUE(c) << f.name << diags.render(sm);
    it::ProgramTexts texts;
    texts.ipvs = c->ipvs_rules;
    texts.ipset = c->ipset_rules;
    texts.iptables = c->iptables_rules;
    texts.node_plan = c->node_plan;
    auto set = load_set(texts, f.family, f.name);
    if (!set) continue;
    ++fixtures_seen;
    Traced t = trace_all(*set, f.name, &packets);
    for (const auto& [k, rs] : expected_real_servers(f.dir)) {
      ++listed;
      auto g = t.by_vs.find(k);
      if (g == t.by_vs.end()) {
        ADD_FAILURE() << f.name << ": kube-proxy's test expects virtual server " << k << ", not traced";
        continue;
      }
      EXPECT_EQ(g->second, equal_shares(rs)) << f.name << " " << k << ":" << show(g->second) << " kube-proxy expects"
                                             << show(equal_shares(rs));
    }
  }
  EXPECT_EQ(fixtures_seen, 40u);
  EXPECT_EQ(listed, 41u);
  EXPECT_EQ(packets, 71u);
  std::printf("ipvs trace golden: %zu fixtures, %zu packets, %zu virtual servers listed by kube-proxy's tests\n",
              fixtures_seen, packets, listed);
}

TEST(IpvsTraceGolden, TheExamplesExpectedFiles) {
  size_t packets = 0;
  for (const char* fam : {"ipv4", "ipv6"}) {
    std::string dir = source_path(std::string("fixtures/example/expected/ipvs-") + fam);
    it::ProgramTexts texts;
    texts.ipvs = slurp(dir + "/ipvs.rules");
    texts.ipset = slurp(dir + "/ipset.rules");
    texts.iptables = slurp(dir + "/iptables.rules");
    texts.node_plan = slurp(dir + "/node.plan");
    auto set = load_set(texts, std::string(fam) == "ipv4" ? IPFamily::V4 : IPFamily::V6, dir);
    ASSERT_TRUE(set);
    Traced t = trace_all(*set, dir, &packets);
    if (std::string(fam) == "ipv4") {
      EXPECT_EQ(t.by_vs["TCP 10.96.30.30:9000"],
                (Shares{{"10.244.1.30:9000", "1/3"}, {"10.244.2.31:9000", "1/3"}, {"10.244.2.32:9000", "1/3"}}));
      EXPECT_EQ(t.by_vs["TCP 198.51.100.7:443"], (Shares{{"10.244.1.20:8443", "1"}}));
    }
  }
  EXPECT_EQ(packets, 10u);
}

// The checker must be able to fail: a changed expectation is caught.
TEST(IpvsTraceGolden, TheComparisonCatchesAWrongExpectation) {
  EXPECT_NE(equal_shares({"10.244.1.5:8080", "10.244.2.6:8080"}), (Shares{{"10.244.1.5:8080", "1/2"}}));
  EXPECT_NE(equal_shares({}), (Shares{{"DROP", "1"}}));
  EXPECT_EQ(equal_shares({"a", "b", "c"}), (Shares{{"a", "1/3"}, {"b", "1/3"}, {"c", "1/3"}}));
}

// ------------------------------------------------------------------ against nftables

// Sums nft outcomes by destination exactly.
Shares nft_distribution(const nt::TraceResult& r) {
  std::map<std::string, nt::Fraction> sum;
  for (const auto& o : r.outcomes) {
    std::string k = o.verdict == nt::Verdict::Accept && o.dnat ? o.dnat_text : nt::verdict_name(o.verdict);
    auto [pos, fresh] = sum.emplace(k, o.probability);
    if (!fresh) pos->second = pos->second + o.probability;
  }
  Shares m;
  for (const auto& [k, p] : sum) m[k] = p.fraction();
  return m;
}

// Differences by design: "fixture|virtual server" -> why. Each must differ, every other
// virtual server must agree.
const std::map<std::string, std::string>& by_design() {
  static const std::map<std::string, std::string> m = {
      {"kp-ipvs-internal-traffic-policy-local-no-local|TCP 172.20.1.1:80",
       "iTP=Local without a local endpoint: IPVS keeps a virtual server without real servers (ip_vs_leave answers "
       "ICMP port unreachable: REJECT), nftables drops (\"no local endpoints\")"},
      {"etp-local-no-local-endpoint|TCP 1.2.3.4:80",
       "eTP=Local without a local endpoint: IPVS falls back to the cluster endpoints (kube-proxy PR #97081), "
       "nftables drops"},
      {"etp-local-no-local-endpoint|TCP 10.0.0.10:3001",
       "the same fallback for the NodePort"},
  };
  return m;
}

// kp-ipvs-only-local-load-balancing with its local endpoint moved to another node: no local
// endpoint for the eTP=Local load balancer and NodePort.
std::string etp_local_without_local_endpoint() {
  std::string s = slurp(source_path("fixtures/kp-ipvs-only-local-load-balancing/snapshot.yaml"));
  auto replace = [&](const std::string& a, const std::string& b) {
    size_t i = s.find(a);
    EXPECT_NE(i, std::string::npos) << a;
    if (i != std::string::npos) s.replace(i, a.size(), b);
  };
  replace("nodeName: test-node", "nodeName: node-x");
  replace("- name: kube-ipvs0", "- name: eth0\n  addresses: [10.0.0.10/24]\n- name: kube-ipvs0");
  return s;
}

TEST(IpvsTraceGolden, AgreesWithTheNftablesTracerExceptByDesign) {
  size_t agree = 0, differ = 0;
  std::set<std::string> seen_by_design;
  auto cases = fixtures();
  cases.push_back({"etp-local-no-local-endpoint", "", IPFamily::V4});
  for (const auto& f : cases) {
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    if (f.dir.empty())
      ASSERT_TRUE(load_snapshot_text({{f.name + ".yaml", etp_local_without_local_endpoint()}}, LoadOptions{}, sm, &snap,
                                     diags))
          << diags.render(sm);
    else
      ASSERT_TRUE(load_snapshot({f.dir + "/snapshot.yaml"}, LoadOptions{}, sm, &snap, diags)) << f.name;
    auto c = compile_ipvs(snap, f.family, diags);
    ASSERT_TRUE(c) << f.name;
    NftOptions no;
    no.keep_state = false;
    auto n = compile_nftables(snap, f.family, no, diags);
    ASSERT_TRUE(n) << f.name << diags.render(sm);
    verifier::nft::NftState nstate;
    auto applied = verifier::nft::apply_script(nstate, n->text, "compiled.nft");
    ASSERT_TRUE(applied.ok) << f.name;
    it::ProgramTexts texts;
    texts.ipvs = c->ipvs_rules;
    texts.ipset = c->ipset_rules;
    texts.iptables = c->iptables_rules;
    texts.node_plan = c->node_plan;
    auto set = load_set(texts, f.family, f.name);
    if (!set) continue;
    it::TraceOptions io;
    io.local_addresses = it::inferred_node_addresses(*set);
    it::Tracer itr(*set, io);
    nt::TraceOptions nto;
    // The node's addresses: in iptables and nftables mode nothing is bound to kube-ipvs0.
    nto.local_addresses = io.local_addresses;
    nt::Tracer ntr(nstate, nto);
    // iptables: the same endpoints (its statistic cascade's shares are t/2^31 products, not 1/N).
    auto ipt = compile_iptables(snap, f.family == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables, {}, diags);
    ASSERT_TRUE(ipt) << f.name;
    auto istate = verifier::RulesetState::empty(f.family);
    verifier::ApplyOptions ao;
    ao.noflush = true;
    ASSERT_TRUE(verifier::apply_text(istate, ipt->text, ao).ok()) << f.name;
    ASSERT_TRUE(vt::add_kube_proxy_jumps(istate)) << f.name;
    vt::TraceOptions ito;
    ito.local_addresses = io.local_addresses;
    vt::Tracer iptr(istate, ito);
    for (const auto& [key, vs] : set->ipvs.services) {
      vt::Packet p = packet_to(*set, key);
      nt::Packet np;
      np.src = p.src, np.dst = p.dst, np.proto = p.proto, np.dport = p.dport;
      np.origin = nt::Origin::External;
      np.in_iface = "eth0";
      Shares a = ipvs_shares(itr.trace(p, {}));
      Shares b = nft_distribution(ntr.trace(np));
      std::set<std::string> ipt_dests, nft_dests;
      for (const auto& o : iptr.trace(p).outcomes)
        ipt_dests.insert(o.verdict == vt::Verdict::Accept && o.dnat ? o.dnat_text : vt::verdict_name(o.verdict));
      for (const auto& [k, v] : b) nft_dests.insert(k);
      EXPECT_EQ(ipt_dests, nft_dests) << f.name << " " << key_text(key) << ": iptables and nftables name other "
                                                                            "destinations";
      // nft answers a service without endpoints with REJECT too; both "no destination".
      std::string id = f.name + "|" + key_text(key);
      auto d = by_design().find(id);
      if (a == b) {
        ++agree;
        EXPECT_TRUE(d == by_design().end()) << id << " is listed as a difference by design but both give" << show(a);
      } else {
        ++differ;
        EXPECT_TRUE(d != by_design().end()) << "\"" << id << "\": ipvs" << show(a) << " / nftables" << show(b);
        if (d != by_design().end()) seen_by_design.insert(id);
      }
    }
  }
  EXPECT_EQ(seen_by_design.size(), by_design().size());
  EXPECT_EQ(agree, 71u);
  std::printf("ipvs vs nftables (and iptables' endpoint sets): %zu virtual servers agree, %zu differ (all by "
              "design)\n", agree, differ);
}

}  // namespace
}  // namespace kpc::test
