// The nft tracer against the real kernel (issue 16 §3): kpc's nftables program for a few of
// kube-proxy's packet-flow fixtures (TestInternalExternalMasquerade: 27 flows from pods, the
// node and external hosts to ClusterIPs, NodePorts and load balancers; TestLoadBalancer,
// TestNoEndpointsReject, TestClusterIPGeneral, TestExternalTrafficPolicyLocal, TestNodePorts in
// both families)
// is loaded with the real `nft -f` into a "node" network namespace that has the fixture's node
// addresses, IP forwarding and a veth link to a "client" namespace holding every other source
// address. For every TCP/UDP flow, 40 connections (40 independent numgen draws) are opened
// from the flow's source, and a probe
// table (priority 300, after kube-proxy's chains) records what the kernel did:
//   postrouting: destination address . port of every packet leaving (after DNAT), and of those
//                whose connection was source-NATed (ct status snat: masquerade);
//   input:       packets delivered locally;
//   output:      ICMP destination-unreachable the node sends (nft's reject).
// Every connection has a source port of its own (an ephemeral port reused by a later flow toward
// the same endpoint would clash with the earlier connection's reply tuple, and the kernel would
// remap the port: a source NAT no rule asked for).
// The tracer, given the same node addresses (its fib ... type local and routing assumptions),
// must predict exactly that: the set of DNAT destinations (every branch seen), masquerading,
// local delivery, reject or drop.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "compiler/support/text.h"
#include "tests/support/netns.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::test {
namespace {

namespace nt = verifier::nft_trace;

const char* kSender = R"(
import socket, sys, time
src, dst, port, n, proto, base = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
keep = []
for i in range(n):
    fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM if proto == "TCP" else socket.SOCK_DGRAM)
    s.setblocking(False)
    s.bind((src, base + i))
    try:
        if proto == "TCP":
            s.connect((dst, port))
        else:
            s.sendto(b"x", (dst, port))
    except OSError:
        pass
    keep.append(s)
time.sleep(0.1)
)";

// The probe table; FAM/ADDR/IP/ICMP are replaced for IPv4 (ip, ipv4_addr, ip, icmp) or IPv6.
const char* kProbe = R"(table FAM probe {
  set seen { type ADDR . inet_service ; flags dynamic ; }
  set masq { type ADDR . inet_service ; flags dynamic ; }
  set local { type ADDR . inet_service ; flags dynamic ; }
  set rej { type ADDR ; flags dynamic ; }
  chain post { type filter hook postrouting priority 300 ; policy accept ;
    ct direction original meta l4proto { tcp, udp } add @seen { IP daddr . th dport }
    ct direction original meta l4proto { tcp, udp } ct status snat add @masq { IP daddr . th dport }
  }
  chain in { type filter hook input priority 300 ; policy accept ;
    ct direction original meta l4proto { tcp, udp } add @local { IP daddr . th dport }
  }
  chain out { type filter hook output priority 300 ; policy accept ;
    ICMP type destination-unreachable add @rej { IP daddr }
  }
}
)";

std::string probe_for(bool v6) {
  std::string p = kProbe;
  auto sub = [&](const std::string& from, const std::string& to) {
    for (size_t i = p.find(from); i != std::string::npos; i = p.find(from, i + to.size())) p.replace(i, from.size(), to);
  };
  sub("FAM", v6 ? "ip6" : "ip");
  sub("ADDR", v6 ? "ipv6_addr" : "ipv4_addr");
  sub("ICMP", v6 ? "icmpv6" : "icmp");
  sub("IP daddr", v6 ? "ip6 daddr" : "ip daddr");
  return p;
}

// "a . p, b . q" elements of a probe set as "a:p" / "[a]:p" strings.
std::set<std::string> elements(const Netns& ns, const std::string& fam, const std::string& set) {
  auto r = ns.exec({"nft", "list", "set", fam, "probe", set});
  std::set<std::string> out;
  size_t b = r.out.find("elements = {");
  if (b == std::string::npos) return out;
  size_t e = r.out.find('}', b);
  std::string body = r.out.substr(b + 12, e - b - 12);
  for (auto part : split(body, ',')) {
    std::string w(trim(part));
    if (w.empty()) continue;
    size_t dot = w.find(" . ");
    if (dot == std::string::npos) {
      out.insert(w);
      continue;
    }
    auto a = IPAddr::parse(w.substr(0, dot));
    out.insert(a ? verifier::trace::host_port(*a, static_cast<uint16_t>(std::stoi(w.substr(dot + 3))))
                 : w.substr(0, dot) + ":" + w.substr(dot + 3));
  }
  return out;
}

bool sh(const Netns& ns, const std::string& cmd) {
  auto r = ns.exec({"sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  return r.exit_code == 0;
}

class NftTraceKernel : public testing::TestWithParam<const char*> {};

TEST_P(NftTraceKernel, FlowsMatchTheKernel) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root to create network namespaces";
  if (run({"nft", "--version"}).exit_code != 0) GTEST_SKIP() << "nft is not installed";
  if (run({"python3", "-c", "pass"}).exit_code != 0) GTEST_SKIP() << "python3 is not installed";
  const std::string fixture = source_path(std::string("fixtures/") + GetParam());
  const bool v6 = YAML::LoadFile(fixture + "/case.yaml")["family"].as<std::string>() == "ipv6";
  const IPFamily family = v6 ? IPFamily::V6 : IPFamily::V4;
  const std::string fam = v6 ? "ip6" : "ip", host = v6 ? "/128" : "/32", nodad = v6 ? " nodad" : "";
  const std::string node_ip = v6 ? "2001:db8::1" : "192.168.0.2", gw = v6 ? "2001:db8::ff" : "192.168.0.1",
                    plen = v6 ? "/64" : "/24";

  // kpc's program: a full sync of the fixture's snapshot.
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  ASSERT_TRUE(load_snapshot({fixture + "/snapshot.yaml"}, LoadOptions{}, sm, &snap, diags)) << diags.render(sm);
  auto compiled = compile_nftables(snap, family, NftOptions{}, diags);
  ASSERT_TRUE(compiled) << diags.render(sm);

  YAML::Node flows = YAML::LoadFile(fixture + "/kubeproxy/packet-flows.yaml");
  std::vector<std::string> node_ips;
  for (const auto& ip : flows["localIPs"])
    if ((ip.as<std::string>().find(':') != std::string::npos) == v6) node_ips.push_back(ip.as<std::string>());

  Netns node, client;
  ASSERT_TRUE(node.ok() && client.ok());
  ASSERT_TRUE(sh(node, "ip link add eth0 type veth peer name c0 && ip link set c0 netns " + client.name()));
  std::string setup = "ip link set lo up && ip link set eth0 up && ip addr add " + node_ip + plen + " dev eth0" + nodad;
  for (const auto& ip : node_ips)
    if (ip != node_ip) setup += " && ip addr add " + ip + host + " dev eth0" + nodad;
  setup += " && ip route add default via " + gw + " dev eth0 src " + node_ip;
  // Forwarding on, no reverse-path filter, every reject answered (no per-peer ICMP rate limit).
  setup += v6 ? " && sysctl -qw net.ipv6.conf.all.forwarding=1 net.ipv6.icmp.ratelimit=0"
              : " && sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.eth0.rp_filter=0"
                " net.ipv4.icmp_ratelimit=0";
  ASSERT_TRUE(sh(node, setup));
  std::string csetup = "ip link set lo up && ip link set c0 up && ip addr add " + gw + plen + " dev c0" + nodad;
  std::set<std::string> sources;
  for (const auto& t : flows["tests"])
    for (const auto& fl : t["flows"]) sources.insert(fl["sourceIP"].as<std::string>());
  std::set<std::string> dests, client_addrs, sources_as_dst;
  for (const auto& t : flows["tests"])
    for (const auto& fl : t["flows"]) dests.insert(fl["destIP"].as<std::string>());
  for (const auto& src : sources) {
    if (std::find(node_ips.begin(), node_ips.end(), src) != node_ips.end() || src == gw) continue;
    if (dests.count(src)) {
      sources_as_dst.insert(src);
      continue;
    }
    client_addrs.insert(src);
    csetup += " && ip addr add " + src + host + " dev c0" + nodad;
  }
  csetup += " && ip route add default via " + node_ip + " dev c0";
  if (!v6) csetup += " && sysctl -qw net.ipv4.conf.all.rp_filter=0";
  ASSERT_TRUE(sh(client, csetup));
  auto load = node.exec({"nft", "-f", "-"}, compiled->text);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  auto probe = node.exec({"nft", "-f", "-"}, probe_for(v6));
  ASSERT_EQ(probe.exit_code, 0) << probe.err;

  // The tracer over the model of the same program, with the node's addresses.
  verifier::nft::NftState state;
  auto applied = verifier::nft::apply_script(state, compiled->text, "sync.nft");
  ASSERT_TRUE(applied.ok) << applied.error->render();
  nt::TraceOptions topt;
  for (const auto& ip : node_ips) topt.local_addresses.push_back(*IPAddr::parse(ip));
  nt::Tracer tracer(state, topt);
  auto pod_cidr = CIDR::parse(v6 ? "fd00:10::/64" : "10.0.0.0/8");

  size_t compared = 0, agreed = 0, skipped = 0;
  for (const auto& t : flows["tests"]) {
    for (const auto& fl : t["flows"]) {
      std::string name = fl["name"].as<std::string>(), src = fl["sourceIP"].as<std::string>(),
                  dst = fl["destIP"].as<std::string>();
      int port = fl["destPort"].as<int>();
      std::string proto = fl["protocol"].as<std::string>();
      if (proto != "TCP" && proto != "UDP") {  // the probe reads tcp/udp ports only
        ++skipped;
        continue;
      }
      // A destination the client namespace holds never reaches the node (kube-proxy's test
      // gives some flows a load-balancer IP as source to stand for the node itself).
      if (client_addrs.count(dst) || sources_as_dst.count(src)) {
        ++skipped;
        continue;
      }
      nt::Packet p;
      p.proto = proto == "TCP" ? verifier::trace::kProtoTCP : verifier::trace::kProtoUDP;
      p.src = *IPAddr::parse(src);
      p.dst = *IPAddr::parse(dst);
      p.dport = static_cast<uint16_t>(port);
      p.sport = 40000;
      p.origin = tracer.is_local(p.src) ? nt::Origin::Node
                 : pod_cidr->contains(p.src) ? nt::Origin::Pod
                                             : nt::Origin::External;
      if (p.origin != nt::Origin::Node) p.in_iface = "eth0";
      p.out_iface = "eth0";
      auto r = tracer.trace(p);
      std::set<std::string> want_seen;
      std::set<std::string> verdicts;
      bool want_masq = false, want_local = false;
      for (const auto& o : r.outcomes) {
        verdicts.insert(nt::verdict_name(o.verdict));
        want_masq = want_masq || o.masquerade;
        if (o.verdict != nt::Verdict::Accept) continue;
        if (o.route == "local") want_local = true;
        else want_seen.insert(o.dnat ? o.dnat_text : verifier::trace::host_port(p.dst, p.dport));
      }

      ASSERT_TRUE(sh(node, "nft flush set " + fam + " probe seen && nft flush set " + fam + " probe masq && nft flush set " +
                               fam + " probe local && nft flush set " + fam + " probe rej"));
      const Netns& from = p.origin == nt::Origin::Node ? node : client;
      auto sent = from.exec({"python3", "-c", kSender, src, dst, std::to_string(port), "40", proto,
                              std::to_string(20000 + 40 * compared)});
      ASSERT_EQ(sent.exit_code, 0) << sent.err;
      std::set<std::string> seen = elements(node, fam, "seen"), masq = elements(node, fam, "masq"),
                            local = elements(node, fam, "local"), rej = elements(node, fam, "rej");
      if (want_local) seen.clear();  // node -> local also leaves through postrouting (lo)
      ++compared;
      std::string why;
      if (verdicts.size() != 1) why = "the tracer's outcomes have several verdicts";
      else if (*verdicts.begin() == "REJECT" && (rej.empty() || !seen.empty())) why = "REJECT not seen";
      else if (*verdicts.begin() == "DROP" && (!rej.empty() || !seen.empty() || !local.empty())) why = "not dropped";
      else if (*verdicts.begin() == "ACCEPT" && (seen != want_seen || want_local != !local.empty()))
        why = "destinations differ";
      else if (*verdicts.begin() == "ACCEPT" && !want_local && want_masq != !masq.empty()) why = "masquerade differs";
      if (why.empty()) {
        ++agreed;
        continue;
      }
      std::string got;
      for (const auto& s : seen) got += " " + s;
      ADD_FAILURE() << name << " (" << src << " -> " << dst << ":" << port << "): " << why << "; kernel: seen" << got
                    << ", masq " << masq.size() << ", local " << local.size() << ", reject " << rej.size() << "\n"
                    << nt::format_text(p, topt, r);
    }
  }
  std::printf("[ nft trace vs kernel ] %s: %zu of %zu flows: the tracer predicts what the kernel does (%zu not "
              "sent: not TCP/UDP, or an address both source and destination)\n",
              GetParam(), agreed, compared, skipped);
  EXPECT_GT(compared, 0u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NftTraceKernel,
                         testing::Values("kp-nft-internal-external-masquerade-base", "kp-nft-load-balancer",
                                         "kp-nft-no-endpoints-reject", "kp-nft-cluster-ip-general",
                                         "kp-nft-external-traffic-policy-local", "kp-nft-node-ports-ipv4",
                                         "kp-nft-node-ports-ipv6"),
                         [](const testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace kpc::test
