#include "tests/support/nft_gen.h"

#include <algorithm>
#include <sstream>

namespace kpc::test {

namespace nft = verifier::nft;

int nft_chain_rank(const std::string& n, bool base) {
  if (base) return 0;
  if (n == "services" || n == "firewall-check" || n == "service-endpoints-check" || n == "nodeport-endpoints-check" ||
      n == "cluster-ips-check" || n == "masquerading")
    return 1;
  if (n.rfind("external-", 0) == 0 || n.rfind("firewall-", 0) == 0) return 2;
  if (n.rfind("service-", 0) == 0 || n.rfind("local-", 0) == 0) return 3;
  if (n.rfind("endpoint-", 0) == 0) return 4;
  return 5;  // mark-for-masquerade, reject-chain and anything else: leaves
}

namespace {

const char* kBase[][4] = {
    {"filter-prerouting-pre-dnat", "filter", "prerouting", "-110"},
    {"filter-output-pre-dnat", "filter", "output", "-110"},
    {"filter-forward", "filter", "forward", "0"},
    {"filter-input", "filter", "input", "0"},
    {"filter-output", "filter", "output", "0"},
    {"nat-output", "nat", "output", "-100"},
    {"nat-postrouting", "nat", "postrouting", "100"},
    {"nat-prerouting", "nat", "prerouting", "-100"},
};
const char* kHashes[] = {"ULMVA6XW", "42NFTM6N", "4AT6LBPK", "LAUZTJTB", "HVFWP5L3", "5OJB2KTY", "SGOXE6O3", "UEIP74TE"};

std::string tbl(bool v6) { return v6 ? "ip6 kube-proxy" : "ip kube-proxy"; }

}  // namespace

std::string NftGen::misspell(const std::string& s) {
  if (s.size() < 2) return s + "x";
  std::string o = s;
  switch (next(3)) {
    case 0: o[next(o.size())] = 'q'; break;               // substitution
    case 1: o.erase(next(o.size()), 1); break;            // deletion
    default: o.insert(next(o.size()), 1, 'z'); break;     // insertion
  }
  return o;
}

std::string NftGen::chain_name(int rank) {
  int i = static_cast<int>(next(8)) + 1;
  std::string h = kHashes[next(8)];
  std::string svc = "ns" + std::to_string(i) + "/svc" + std::to_string(i) + "/tcp/p80";
  switch (rank) {
    case 2: return (chance(50) ? "external-" : "firewall-") + h + "-" + svc;
    case 3: return "service-" + h + "-" + svc;
    case 4: return "endpoint-" + h + "-" + svc + "__10.180.0." + std::to_string(i) + "/80";
    default: return chance(50) ? "mark-for-masquerade" : "reject-chain";
  }
}

std::string NftGen::state_script() {
  std::ostringstream o;
  fam_.clear();
  std::vector<bool> fams = {false};
  if (chance(30)) fams.push_back(true);
  for (bool v6 : fams) {
    const std::string T = tbl(v6);
    const std::string addr = v6 ? "ipv6_addr" : "ipv4_addr";
    fam_.push_back(v6 ? "ip6" : "ip");
    o << "add table " << T << " { comment \"rules for kube-proxy\" ; }\n";
    bool cluster_ips = chance(80);
    if (cluster_ips) o << "add set " << T << " cluster-ips { type " << addr << " ; comment \"Active ClusterIPs\" ; }\n";
    if (chance(60)) o << "add set " << T << " nodeport-ips { type " << addr << " ; comment \"IPs that accept NodePort traffic\" ; }\n";
    o << "add map " << T << " firewall-ips { type " << addr << " . inet_proto . inet_service : verdict ; comment \"destinations that are subject to LoadBalancerSourceRanges\" ; }\n";
    o << "add map " << T << " no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment \"vmap to drop or reject packets to service nodeports with no endpoints\" ; }\n";
    o << "add map " << T << " no-endpoint-services { type " << addr << " . inet_proto . inet_service : verdict ; comment \"vmap to drop or reject packets to services with no endpoints\" ; }\n";
    o << "add map " << T << " service-ips { type " << addr << " . inet_proto . inet_service : verdict ; comment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\" ; }\n";
    o << "add map " << T << " service-nodeports { type inet_proto . inet_service : verdict ; comment \"NodePort traffic\" ; }\n";
    for (const char* fixed : {"cluster-ips-check", "firewall-check", "mark-for-masquerade", "masquerading",
                              "nodeport-endpoints-check", "services", "service-endpoints-check"})
      o << "add chain " << T << " " << fixed << "\n";
    o << "add chain " << T << " reject-chain { comment \"helper for @no-endpoint-services / @no-endpoint-nodeports\" ; }\n";
    for (const auto& b : kBase)
      if (chance(75)) o << "add chain " << T << " " << b[0] << " { type " << b[1] << " hook " << b[2] << " priority " << b[3] << " ; }\n";
    const std::string ip = v6 ? "ip6" : "ip";
    o << "add rule " << T << " mark-for-masquerade mark set mark or 0x4000\n";
    o << "add rule " << T << " masquerading mark and 0x4000 == 0 return\n";
    o << "add rule " << T << " masquerading mark set mark xor 0x4000\n";
    o << "add rule " << T << " masquerading masquerade fully-random\n";
    o << "add rule " << T << " reject-chain reject\n";
    o << "add rule " << T << " services " << ip << " daddr . meta l4proto . th dport vmap @service-ips\n";
    o << "add rule " << T << " firewall-check " << ip << " daddr . meta l4proto . th dport vmap @firewall-ips\n";
    o << "add rule " << T << " service-endpoints-check " << ip << " daddr . meta l4proto . th dport vmap @no-endpoint-services\n";
    if (v6) o << "add rule " << T << " nodeport-endpoints-check ip6 daddr != ::1 meta l4proto . th dport vmap @no-endpoint-nodeports\n";
    else o << "add rule " << T << " nodeport-endpoints-check ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports\n";
    if (chance(70)) o << "add rule " << T << " cluster-ips-check " << ip << " daddr " << (v6 ? "{ fd00:10:96::/112 }" : "{ 172.30.0.0/16 }") << " drop comment \"Drop traffic to unallocated ClusterIPs\"\n";
    int nsvc = static_cast<int>(next(5));
    for (int s = 0; s < nsvc; ++s) {
      std::string h = kHashes[s];
      std::string svc = "ns" + std::to_string(s + 1) + "/svc" + std::to_string(s + 1) + "/tcp/p80";
      std::string schain = "service-" + h + "-" + svc;
      std::string cip = v6 ? "fd00:10:96::" + std::to_string(s + 10) : "172.30.0." + std::to_string(41 + s);
      int neps = 1 + static_cast<int>(next(3));
      bool affinity = chance(25);
      std::vector<std::string> eps;
      for (int e = 0; e < neps; ++e) {
        std::string epip = v6 ? "fd00:10::" + std::to_string(s * 10 + e + 1) : "10.180." + std::to_string(s) + "." + std::to_string(e + 1);
        std::string base = h + "-" + svc + "__" + (v6 ? "fd00.10.." + std::to_string(s * 10 + e + 1) : epip) + "/80";
        std::string ep = "endpoint-" + base;
        eps.push_back(ep);
        if (affinity) o << "add set " << T << " affinity-" << base << " { type " << addr << " ; flags dynamic,timeout ; timeout 10800s ; }\n";
        o << "add chain " << T << " " << ep << "\n";
        o << "add rule " << T << " " << ep << " " << ip << " saddr " << epip << " jump mark-for-masquerade\n";
        if (affinity) o << "add rule " << T << " " << ep << " update @affinity-" << base << " { " << ip << " saddr }\n";
        o << "add rule " << T << " " << ep << " meta l4proto tcp dnat to " << (v6 ? "[" + epip + "]" : epip) << ":80\n";
      }
      o << "add chain " << T << " " << schain << "\n";
      o << "add rule " << T << " " << schain << " " << ip << " daddr " << cip << " " << ip << " saddr != " << (v6 ? "fd00:10::/64" : "10.0.0.0/8") << " jump mark-for-masquerade\n";
      if (affinity)
        for (size_t e = 0; e < eps.size(); ++e)
          o << "add rule " << T << " " << schain << " " << ip << " saddr @affinity-" << eps[e].substr(9) << " goto " << eps[e] << "\n";
      o << "add rule " << T << " " << schain << " numgen random mod " << neps << " vmap { ";
      for (int e = 0; e < neps; ++e) o << (e ? " , " : "") << e << " : goto " << eps[e];
      o << " }\n";
      if (cluster_ips && chance(60)) o << "add element " << T << " cluster-ips { " << cip << " }\n";
      o << "add element " << T << " service-ips { " << cip << " . tcp . 80 : goto " << schain << " }\n";
      if (chance(40)) {
        std::string ext = "external-" + h + "-" + svc;
        o << "add chain " << T << " " << ext << "\n";
        o << "add rule " << T << " " << ext << " jump mark-for-masquerade\n";
        o << "add rule " << T << " " << ext << " goto " << schain << "\n";
        o << "add element " << T << " service-nodeports { tcp . " << 30000 + s << " : goto " << ext << " }\n";
      }
      if (chance(30)) {
        std::string fw = "firewall-" + h + "-" + svc;
        o << "add chain " << T << " " << fw << "\n";
        o << "add rule " << T << " " << fw << " " << ip << " saddr != " << (v6 ? "{ 2001:db8::/64 , 2001:db9::1 }" : "{ 203.0.113.0/25 , 5.6.7.8 }") << " drop\n";
        o << "add element " << T << " firewall-ips { " << (v6 ? "2001:db8:1::" + std::to_string(s + 1) : "1.2.3." + std::to_string(s + 1)) << " . tcp . 80 : goto " << fw << " }\n";
      }
    }
    if (chance(50))
      o << "add element " << T << " no-endpoint-services { " << (v6 ? "fd00:10:96::99" : "172.30.0.99") << " . tcp . 80 comment \"ns9/svc9:p80\" : goto reject-chain }\n";
    // base chain dispatch rules, for the chains that exist (appended at the end: the chains exist)
  }
  std::string s = o.str();
  // jumps from base chains, only for base chains the script added
  std::ostringstream tail;
  for (bool v6 : fams) {
    const std::string T = tbl(v6);
    auto has = [&](const std::string& name) { return s.find("add chain " + T + " " + name + " {") != std::string::npos; };
    if (has("nat-prerouting")) tail << "add rule " << T << " nat-prerouting jump services\n";
    if (has("nat-output")) tail << "add rule " << T << " nat-output jump services\n";
    if (has("nat-postrouting")) tail << "add rule " << T << " nat-postrouting jump masquerading\n";
    if (has("filter-input")) tail << "add rule " << T << " filter-input ct state new jump service-endpoints-check\n";
    if (has("filter-forward")) tail << "add rule " << T << " filter-forward ct state new jump cluster-ips-check\n";
    if (has("filter-prerouting-pre-dnat")) tail << "add rule " << T << " filter-prerouting-pre-dnat ct state new jump firewall-check\n";
  }
  return s + tail.str();
}

std::string NftGen::rule_for(const std::string& chain, const nft::Table& t, bool v6) {
  const std::string ip = v6 ? "ip6" : "ip";
  int rank = 5;
  if (const nft::Chain* c = t.find_chain(chain)) rank = nft_chain_rank(chain, c->base);
  else rank = nft_chain_rank(chain, false);
  // a jump target of higher rank: existing, new, or misspelled
  auto target = [&]() -> std::string {
    std::vector<std::string> higher;
    for (const auto& c : t.chains)
      if (!c.base && nft_chain_rank(c.name, false) > rank) higher.push_back(c.name);
    int r = std::min(5, rank + 1 + static_cast<int>(next(2)));
    if (higher.empty() || chance(12)) return chain_name(std::max(r, 2));
    std::string n = pick(higher);
    if (chance(4)) n = misspell(n);
    return n;
  };
  auto set_ref = [&](bool want_map) -> std::string {
    std::vector<std::string> names;
    for (const auto& s : t.sets)
      if (s.is_map == want_map) names.push_back(s.name);
    std::string n = pick(names);
    if (chance(4)) n = misspell(n);
    return n;
  };
  std::string cip = v6 ? "fd00:10:96::" + std::to_string(next(50)) : "172.30.0." + std::to_string(next(250));
  std::string ep = v6 ? "fd00:10::" + std::to_string(next(50) + 1) : "10.180.0." + std::to_string(next(250) + 1);
  switch (next(16)) {
    case 0: return ip + " daddr " + cip + " " + ip + " saddr != " + (v6 ? "fd00:10::/64" : "10.0.0.0/8") + " jump " + target();
    case 1: {
      int n = 1 + static_cast<int>(next(3));
      std::string r = "numgen random mod " + std::to_string(n) + " vmap { ";
      for (int i = 0; i < n; ++i) r += (i ? " , " : "") + std::to_string(i) + " : goto " + target();
      return r + " }";
    }
    case 2: return ip + " saddr " + ep + " jump " + target();
    case 3: {  // the kernel takes dnat in nat prerouting/output only: kube-proxy's endpoint chains
      if (rank != 4) return "jump " + target();
      // nft takes a nat port only after a match that tells the transport protocol (kube-proxy
      // writes `meta l4proto tcp`); the other shapes are refused or taken as nft decides.
      const std::string to = (v6 ? "[" + ep + "]" : ep) + ":" + std::to_string(80 + next(3));
      switch (next(12)) {
        case 0: return "dnat to " + to;
        case 1: return "th dport 80 dnat to " + to;
        case 2: return "tcp dport 80 dnat to " + to;
        case 3: return "meta l4proto { tcp , udp } dnat to " + to;
        case 4: return std::string(v6 ? "meta l4proto" : "ip protocol") + " != udp dnat to " + to;
        case 5: return "dnat to " + ep;
        default: return "meta l4proto tcp dnat to " + to;
      }
    }
    case 4: {
      std::string s = set_ref(false);
      if (s.rfind("affinity-", 0) == 0 || chance(20)) return "update @" + s + " { " + ip + " saddr }";
      return ip + " saddr @" + s + " goto " + target();
    }
    case 5: return ip + " saddr != " + (v6 ? "{ 2001:db8::/64 , 2001:db9::1 }" : "{ 203.0.113.0/25 , 5.6.7.8 }") + " drop";
    case 6: return ip + " daddr " + (v6 ? "{ fd00:10:96::/112 }" : "{ 172.30.0.0/16 }") + " drop comment \"Drop traffic to unallocated ClusterIPs\"";
    case 7: return "fib saddr type local jump " + target() + " comment \"masquerade local traffic\"";
    case 8: return "ct state new jump " + target();
    case 9: return (chance(50) ? "jump " : "goto ") + target();
    case 10:
      if (rank <= 1) {
        std::string m = chance(90) ? std::string(chance(50) ? "service-ips" : "no-endpoint-services") : set_ref(true);
        if (m.find("nodeports") != std::string::npos) return "meta l4proto . th dport vmap @" + m;
        return ip + " daddr . meta l4proto . th dport vmap @" + m;
      }
      return "mark set mark or 0x4000";
    case 11: return chance(50) || chain != "masquerading" ? "mark and 0x4000 == 0 return" : "masquerade fully-random";
    case 12: return chance(50) && (chain == "reject-chain" || chain == "cluster-ips-check") ? "reject" : "drop";
    case 13: return "iifname != \"eth0\" jump " + target();
    case 14: return ip + " saddr " + (v6 ? "fd00:10::/64" : "10.0.0.0/8") + " goto " + target() + " comment \"short-circuit pod traffic\"";
    default:
      return ip + " daddr @" + set_ref(false) + (chain == "cluster-ips-check" ? " reject" : " drop") +
             " comment \"Reject traffic to invalid ports of ClusterIPs\"";
  }
}

std::string NftGen::transaction(const nft::NftState& st) {
  std::ostringstream o;
  int nops = 1 + static_cast<int>(next(6));
  for (int k = 0; k < nops; ++k) {
    const nft::Table* t = st.tables.empty() ? nullptr : &st.tables[next(st.tables.size())];
    bool v6 = t && t->family == nft::Family::Ip6;
    std::string T = t ? std::string(nft::family_name(t->family)) + " " + t->name : "ip kube-proxy";
    if (chance(3)) T = v6 ? "ip6 kube-prxy" : "ip kube-proxi";  // a misspelled table
    nft::Table empty;
    const nft::Table& tt = t ? *t : empty;
    std::vector<std::string> chains, regular, bases, sets, maps;
    for (const auto& c : tt.chains) {
      chains.push_back(c.name);
      (c.base ? bases : regular).push_back(c.name);
    }
    for (const auto& s : tt.sets) (s.is_map ? maps : sets).push_back(s.name);
    auto some_chain = [&]() {
      if (chains.empty() || chance(8)) return chain_name(2 + static_cast<int>(next(4)));
      std::string n = pick(chains);
      if (chance(4)) n = misspell(n);
      return n;
    };
    auto some_regular = [&]() {
      if (regular.empty() || chance(8)) return chain_name(2 + static_cast<int>(next(4)));
      std::string n = pick(regular);
      if (chance(4)) n = misspell(n);
      return n;
    };
    std::string ip = v6 ? "ip6" : "ip";
    std::string addr = v6 ? "ipv6_addr" : "ipv4_addr";
    std::string cip = v6 ? "fd00:10:96::" + std::to_string(next(60)) : "172.30.0." + std::to_string(next(60));
    switch (next(24)) {
      case 0: o << "add chain " << T << " " << some_regular() << "\n"; break;
      case 1: o << "create chain " << T << " " << some_regular() << "\n"; break;
      case 2: o << "flush chain " << T << " " << some_chain() << "\n"; break;
      case 3:
      case 4: o << "delete chain " << T << " " << some_regular() << "\n"; break;
      case 5:
      case 6:
      case 7: {
        std::string c = some_regular();
        o << "add rule " << T << " " << c << " " << rule_for(c, tt, v6) << "\n";
        break;
      }
      case 8: {
        // kube-proxy's element for a service: a chain of higher rank than the map's user
        std::string m = chance(70) ? "service-ips" : pick(maps);
        std::string target = chance(70) && !regular.empty() ? pick(regular) : chain_name(2 + static_cast<int>(next(3)));
        if (nft_chain_rank(target, false) < 2) target = chain_name(3);
        if (m.find("nodeport") != std::string::npos)
          o << "add element " << T << " " << m << " { tcp . " << 30000 + next(5) << " : goto " << target << " }\n";
        else
          o << "add element " << T << " " << m << " { " << cip << " . " << (chance(80) ? "tcp" : "udp") << " . 80"
            << (chance(30) ? " comment \"ns1/svc1:p80\"" : "") << " : " << (chance(80) ? "goto " + target : std::string("drop")) << " }\n";
        break;
      }
      case 9: {
        const nft::Set* s = tt.sets.empty() ? nullptr : &tt.sets[next(tt.sets.size())];
        if (s && !s->elements.empty() && chance(70)) {
          const auto& e = s->elements[next(s->elements.size())];
          o << "delete element " << T << " " << s->name << " { ";
          for (size_t i = 0; i < e.key.size(); ++i) o << (i ? " . " : "") << e.key[i];
          o << " }\n";
        } else {
          o << "delete element " << T << " service-ips { " << cip << " . tcp . 80 }\n";
        }
        break;
      }
      case 10: o << (chance(30) ? "create" : "add") << " element " << T << " " << (chance(80) ? "cluster-ips" : "nodeport-ips") << " { " << cip << " }\n"; break;
      case 11: {
        std::string n = chance(50) && !sets.empty() ? pick(sets) : "affinity-" + std::string(kHashes[next(8)]) + "-ns1/svc1/tcp/p80__10.180.0.1/80";
        if (chance(50)) o << (chance(20) ? "create" : "add") << " set " << T << " " << n << " { type " << addr << " ; flags dynamic,timeout ; timeout " << (chance(80) ? "10800s" : "3600s") << " ; }\n";
        else o << "delete set " << T << " " << (chance(10) ? misspell(n) : n) << "\n";
        break;
      }
      case 12: {
        // delete a rule by handle (existing or not)
        const nft::Chain* c = tt.chains.empty() ? nullptr : &tt.chains[next(tt.chains.size())];
        uint64_t h = c && !c->rules.empty() && chance(75) ? c->rules[next(c->rules.size())].handle : 9000 + next(9);
        o << "delete rule " << T << " " << (c ? c->name : some_chain()) << " handle " << h << "\n";
        break;
      }
      case 13: {
        const nft::Chain* c = tt.chains.empty() ? nullptr : &tt.chains[next(tt.chains.size())];
        std::string cn = c ? c->name : some_chain();
        size_t n = c ? c->rules.size() : 0;
        std::string verb = chance(50) ? "add" : "insert";
        std::string pos;
        if (chance(50)) pos = " index " + std::to_string(next(n + 2));
        else pos = " handle " + std::to_string(c && n && chance(75) ? c->rules[next(n)].handle : 9000 + next(9));
        if (chance(20)) {
          verb = "replace";
          pos = " handle " + std::to_string(c && n && chance(75) ? c->rules[next(n)].handle : 9000 + next(9));
        }
        o << verb << " rule " << T << " " << cn << pos << " " << rule_for(cn, tt, v6) << "\n";
        break;
      }
      case 14: {
        // kube-proxy's first sync: every base chain added, deleted and added again
        const auto& b = kBase[next(8)];
        std::string decl = std::string(" { type ") + b[1] + " hook " + b[2] + " priority " + b[3] + " ; }";
        o << "add chain " << T << " " << b[0] << decl << "\n";
        o << "delete chain " << T << " " << b[0] << "\n";
        o << "add chain " << T << " " << b[0] << decl << "\n";
        break;
      }
      case 15: {
        // a base chain with another priority, hook or type
        const auto& b = kBase[next(8)];
        std::string type = chance(70) ? b[1] : (std::string(b[1]) == "nat" ? "filter" : "nat");
        std::string hook = b[2];
        std::string prio = chance(60) ? b[3] : (chance(50) ? "-90" : "0");
        if (type == "nat" && hook == "forward") type = "filter";
        o << (chance(15) ? "create" : "add") << " chain " << T << " " << b[0] << " { type " << type << " hook " << hook << " priority " << prio << " ;" << (chance(20) ? " policy drop ;" : "") << " }\n";
        break;
      }
      case 16: o << (chance(50) ? "delete" : (chance(50) ? "create" : "add")) << " table " << (chance(70) ? T : std::string(v6 ? "ip other" : "ip6 kube-proxy")) << "\n"; break;
      case 17: o << "flush " << (chance(50) ? "set" : "map") << " " << T << " " << (chance(50) ? "service-ips" : "cluster-ips") << "\n"; break;
      case 18: {
        // kube-proxy's stale-chain cleanup: flush the chain, drop its element, delete it
        std::string c = some_regular();
        o << "flush chain " << T << " " << c << "\n";
        const nft::Set* m = tt.find_set("service-ips");
        if (m)
          for (const auto& e : m->elements)
            if (e.value && *e.value == "goto " + c) {
              o << "delete element " << T << " service-ips { " << e.key[0] << " . " << e.key[1] << " . " << e.key[2] << " }\n";
              break;
            }
        o << "delete chain " << T << " " << c << "\n";
        break;
      }
      case 19: o << "add map " << T << " " << (chance(50) ? "service-ips" : "no-endpoint-nodeports") << " { type " << (chance(70) ? addr + " . inet_proto . inet_service" : "inet_proto . inet_service") << " : verdict ; }\n"; break;
      case 20: {
        // a chain deleted, then re-added and filled
        std::string c = some_regular();
        o << "delete chain " << T << " " << c << "\n";
        o << "add chain " << T << " " << c << "\n";
        o << "add rule " << T << " " << c << " " << rule_for(c, tt, v6) << "\n";
        break;
      }
      case 21: o << "delete " << (chance(50) ? "map" : "set") << " " << T << " " << (chance(50) ? pick(maps) : pick(sets)) << "\n"; break;
      case 22: o << "add element " << T << " no-endpoint-nodeports { " << (chance(50) ? "tcp" : "udp") << " . " << 30000 + next(4) << " comment \"ns2/svc2:p80\" : " << (chance(50) ? "drop" : "goto reject-chain") << " }\n"; break;
      default: {
        std::string c = some_regular();
        o << "add chain " << T << " " << c << "\n";
        o << "add rule " << T << " " << c << " " << rule_for(c, tt, v6) << "\n";
        break;
      }
    }
  }
  return o.str();
}

std::string NftGen::rewrite(const nft::NftState& st) {
  if (st.tables.empty()) return transaction(st);
  const nft::Table& t = st.tables[next(st.tables.size())];
  const bool v6 = t.family == nft::Family::Ip6;
  const std::string T = std::string(nft::family_name(t.family)) + " " + t.name;
  std::vector<const nft::Chain*> filled;
  std::vector<std::string> regular, sets;
  for (const auto& c : t.chains) {
    if (!c.rules.empty()) filled.push_back(&c);
    if (!c.base) regular.push_back(c.name);
  }
  for (const auto& s : t.sets) sets.push_back(s.name);
  if (filled.empty()) return transaction(st);
  std::ostringstream o;
  auto rule_line = [&](const std::string& chain, const nft::Rule& r) {
    std::string l = "add rule " + T + " " + chain + " " + r.text();
    if (r.comment()) l += " comment \"" + *r.comment() + "\"";
    return l + "\n";
  };
  // A command between two re-adds.
  auto other = [&](const nft::Chain& self) {
    switch (next(7)) {
      case 0: {
        const nft::Chain* c = filled[next(filled.size())];
        o << "add rule " << T << " " << c->name << " " << rule_for(c->name, t, v6) << "\n";
        break;
      }
      case 1: o << "flush chain " << T << " " << filled[next(filled.size())]->name << "\n"; break;
      case 2: {
        // a chain the rewritten chain's rules may reference
        std::string n = pick(regular);
        for (const auto& r : self.rules)
          if (!r.refs().chains.empty() && chance(60)) n = r.refs().chains[next(r.refs().chains.size())];
        o << "delete chain " << T << " " << n << "\n";
        break;
      }
      case 3: {
        std::string n = pick(sets);
        for (const auto& r : self.rules)
          if (!r.refs().sets.empty() && chance(60)) n = r.refs().sets[next(r.refs().sets.size())];
        o << "delete " << (t.find_set(n) && t.find_set(n)->is_map ? "map" : "set") << " " << T << " " << n << "\n";
        break;
      }
      case 4: o << "insert rule " << T << " " << self.name << " " << rule_for(self.name, t, v6) << "\n"; break;
      case 5: o << "add chain " << T << " " << chain_name(2 + static_cast<int>(next(4))) << "\n"; break;
      default: o << transaction(st); break;
    }
  };
  std::vector<const nft::Chain*> chosen;
  for (int k = 1 + static_cast<int>(next(3)); k > 0; --k) {
    const nft::Chain* c = filled[next(filled.size())];
    if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
  }
  // kube-proxy flushes a service's chains first, then adds their rules; or chain by chain
  const bool flushes_first = chance(50);
  auto flush = [&](const nft::Chain& c) {
    if (!c.base) o << "add chain " << T << " " << c.name << "\n";
    o << "flush chain " << T << " " << c.name << "\n";
  };
  if (flushes_first)
    for (const auto* c : chosen) flush(*c);
  for (const auto* c : chosen) {
    if (!flushes_first) flush(*c);
    const auto& rules = c->rules;
    const int how = static_cast<int>(next(12));
    const size_t changed = next(rules.size());
    for (size_t j = 0; j < rules.size(); ++j) {
      if (chance(8)) other(*c);
      if (how == 6 && j + 1 == rules.size()) break;  // the last rule dropped
      if (how == 7 && j == changed) {
        o << "add rule " << T << " " << c->name << " " << rule_for(c->name, t, v6) << "\n";
        continue;
      }
      if (how == 8 && j == changed && j + 1 < rules.size()) {  // two rules swapped
        o << rule_line(c->name, rules[j + 1]) << rule_line(c->name, rules[j]);
        ++j;
        continue;
      }
      if (how == 9 && j == changed) {  // another comment
        nft::RuleBody b = *rules[j].body;
        b.comment = b.comment ? std::nullopt : std::optional<std::string>("rewritten");
        nft::Rule r = rules[j];
        r.body = std::make_shared<const nft::RuleBody>(std::move(b));
        o << rule_line(c->name, r);
        continue;
      }
      if (how == 10 && j == changed) {  // flushed again half-way, then written whole
        o << "flush chain " << T << " " << c->name << "\n";
        for (size_t i = 0; i < rules.size(); ++i) o << rule_line(c->name, rules[i]);
        break;
      }
      o << rule_line(c->name, rules[j]);
    }
    if (how == 11) o << "add rule " << T << " " << c->name << " " << rule_for(c->name, t, v6) << "\n";
  }
  return o.str();
}

}  // namespace kpc::test
