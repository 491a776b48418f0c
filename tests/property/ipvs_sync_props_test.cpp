// The IPVS sync from a node's state (issue 17 §2) against the verifier's model of ipvsadm:
// for random full programs and random node states (schedulers, persistence, flags, weights
// 0/1/3, forwarding methods, connection counts read for some real servers, an IPv6 virtual
// server of the other family), the change script must apply to the prior (every line is one
// ipvsadm and the kernel accept: nothing added twice, nothing missing deleted), and the state
// it leaves must be the full program's virtual and real servers -- apart from real servers at
// weight 0, which must be exactly the removed TCP ones whose connections are not known to be
// 0 (graceful termination); the other family's servers are untouched.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

#include "compiler/ipvs/print.h"
#include "compiler/ipvs/sync.h"
#include "tools/kpc/ipvs_state.h"
#include "verifier/ipvs/ipvsadm.h"

namespace kpc::test {
namespace {

namespace vi = verifier::ipvs;

struct Key {
  Protocol proto;
  int vip;
  uint16_t port;
};

std::vector<Key> keys() {
  std::vector<Key> out;
  for (Protocol p : {Protocol::TCP, Protocol::UDP, Protocol::SCTP})
    for (int v = 1; v <= 3; ++v)
      for (uint16_t port : {53, 80}) out.push_back({p, v, port});
  return out;
}

IPAddr vip(int i) { return IPAddr::v4(10, 96, 0, uint8_t(i)); }
IPAddr rip(int i) { return IPAddr::v4(10, 244, 0, uint8_t(i)); }
const char* opt(Protocol p) { return p == Protocol::TCP ? "-t" : p == Protocol::UDP ? "-u" : "--sctp-service"; }
const char* lname(Protocol p) { return p == Protocol::TCP ? "TCP" : p == Protocol::UDP ? "UDP" : "SCTP"; }

ipvs::Program gen_full() {
  ipvs::Program p;
  for (const auto& k : keys()) {
    if (!*rc::gen::arbitrary<bool>()) continue;
    ipvs::VirtualServer v;
    v.protocol = k.proto;
    v.address = vip(k.vip);
    v.port = k.port;
    v.scheduler = *rc::gen::element<std::string>("rr", "wrr", "mh");
    v.source_port_hash = v.scheduler == "mh";
    v.persistent = *rc::gen::arbitrary<bool>();
    if (v.persistent) v.timeout = *rc::gen::element<uint32_t>(60, 10800);
    for (int r = 1; r <= 4; ++r)
      if (*rc::gen::arbitrary<bool>()) v.real_servers.push_back({rip(r), 8080, 1});
    p.virtual_servers.push_back(std::move(v));
  }
  std::sort(p.virtual_servers.begin(), p.virtual_servers.end(), ipvs::ipvsadm_less);
  return p;
}

// A node state: `ipvsadm -S -n` text and `ipvsadm -Ln` text (counts for some servers).
void gen_prior(std::string* save, std::string* stats) {
  for (const auto& k : keys()) {
    if (!*rc::gen::arbitrary<bool>()) continue;
    std::string svc = std::string(opt(k.proto)) + " " + ipvs::host_port(vip(k.vip), k.port);
    *save += "-A " + svc + " -s " + *rc::gen::element<std::string>("rr", "wrr", "mh", "wlc");
    if (*rc::gen::arbitrary<bool>()) *save += " -p " + *rc::gen::element<std::string>("60", "10800", "300");
    if (*rc::gen::arbitrary<bool>()) *save += " -b mh-port";
    *save += "\n";
    *stats += std::string(lname(k.proto)) + "  " + ipvs::host_port(vip(k.vip), k.port) + " rr\n";
    for (int r = 1; r <= 4; ++r) {
      if (!*rc::gen::arbitrary<bool>()) continue;
      std::string weight = *rc::gen::element<std::string>("0", "1", "3");
      *save += "-a " + svc + " -r " + ipvs::host_port(rip(r), 8080) + " " + *rc::gen::element<std::string>("-m", "-g") +
               " -w " + weight + "\n";
      if (*rc::gen::inRange(0, 4) != 0)  // the counts of most servers are read
        *stats += "  -> " + ipvs::host_port(rip(r), 8080) + " Masq " + weight + " " +
                  *rc::gen::element<std::string>("0", "2") + " " + *rc::gen::element<std::string>("0", "1") + "\n";
    }
  }
  *save += "-A -t [fd00::1]:80 -s rr\n-a -t [fd00::1]:80 -r [fd00::2]:80 -m -w 0\n";  // the other family
}

RC_GTEST_PROP(IpvsSyncProps, ChangeScriptTurnsThePriorIntoTheFullProgram, ()) {
  auto full = gen_full();
  std::string save, stats;
  gen_prior(&save, &stats);
  bool have_stats = *rc::gen::inRange(0, 5) != 0;
  ipvs::PriorState prior;
  std::string e;
  RC_ASSERT(cli::ipvs_prior_from_text(save, stats, have_stats, &prior, &e));
  auto r = ipvs::sync_from_prior(full, prior);
  RC_ASSERT(r.error.empty());

  vi::Table before, after, want;
  RC_ASSERT(vi::parse_save(save, &before, &e));
  if (have_stats) RC_ASSERT(vi::read_counts(stats, &before, &e));
  after = before;
  if (!vi::apply_script(r.ipvs_rules, &after, &e)) RC_FAIL("script refused: " + e + "\n" + r.ipvs_rules);
  RC_ASSERT(vi::parse_save(ipvs::print_ipvsadm(full), &want, &e));

  size_t v6 = 0;
  for (const auto& [key, vs] : after.services) {
    if (key.vip.address.family == IPFamily::V6) {  // untouched
      RC_ASSERT(vs.real_servers.size() == 1u && vs.real_servers[0].weight == 0u);
      ++v6;
      continue;
    }
    auto w = want.services.find(key);
    RC_ASSERT(w != want.services.end());  // nothing the program does not have
    RC_ASSERT(vs.scheduler == w->second.scheduler);
    RC_ASSERT(vs.persistent == w->second.persistent);
    RC_ASSERT(vs.timeout == w->second.timeout);
    RC_ASSERT(vs.flags == w->second.flags);
    std::set<vi::HostPort> serving, draining, want_serving, want_draining;
    for (const auto& rs : vs.real_servers) {
      if (rs.weight == 0) {
        draining.insert(rs.dest);
      } else {
        RC_ASSERT(rs.weight == 1u && rs.forward == vi::Forward::Masq);
        serving.insert(rs.dest);
      }
    }
    for (const auto& rs : w->second.real_servers) want_serving.insert(rs.dest);
    auto b = before.services.find(key);
    if (b != before.services.end() && key.proto == vi::Proto::TCP)
      for (const auto& rs : b->second.real_servers)
        if (!want_serving.count(rs.dest) && rs.connections() != std::optional<uint64_t>(0))
          want_draining.insert(rs.dest);
    RC_ASSERT(serving == want_serving);
    RC_ASSERT(draining == want_draining);
  }
  RC_ASSERT(v6 == 1u);
  RC_ASSERT(after.services.size() == want.services.size() + 1);
  RC_TAG(r.stats.rs_draining > 0 ? "draining" : "none draining");
  RC_TAG(r.stats.rs_readded > 0 ? "re-added" : "none re-added");
}

}  // namespace
}  // namespace kpc::test
