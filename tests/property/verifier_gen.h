// Random iptables-restore programs for the verifier's property and kernel
// differential tests: kube-proxy-shaped rules plus random chains, every command
// (-A -I -D -R -N -X -F -Z -P -E, ":CHAIN"), dangling jumps, deletion of
// referenced chains, several tables, missing COMMIT, comments, counters, quoting,
// and a few lines the real tool rejects while reading. Rules are chosen so that
// the kernel's own checks (target hooks/tables, ipsets) never fire: those are
// outside the simulator's model (docs/verifier.md).
#pragma once

#include <rapidcheck.h>

#include <string>
#include <vector>

namespace kpc::test::vgen {

struct RestoreCase {
  bool ipv6 = false;
  bool noflush = true;
  std::string init;     ///< loaded first with --noflush (kube-proxy-shaped, usually valid)
  std::string program;  ///< the program under test
};

inline int pct() { return *rc::gen::inRange(0, 100); }
inline bool chance(int p) { return pct() < p; }
template <typename T>
T pick(const std::vector<T>& v) {
  return *rc::gen::elementOf(v);
}

inline const std::vector<std::string>& user_chains() {
  static const std::vector<std::string> c = {"KUBE-SERVICES", "KUBE-SVC-AAAA", "KUBE-SEP-BBBB", "KUBE-MARK-MASQ",
                                             "KUBE-POSTROUTING", "A", "b", "KUBE-SVC-AAAA2"};
  return c;
}

inline std::vector<std::string> builtins(const std::string& table) {
  if (table == "filter" || table == "security") return {"INPUT", "FORWARD", "OUTPUT"};
  if (table == "nat") return {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"};
  if (table == "mangle") return {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"};
  return {"PREROUTING", "OUTPUT"};
}

inline std::string ip(bool v6, int a, int b) {
  return v6 ? "fd00:" + std::to_string(a) + "::" + std::to_string(b) : "10." + std::to_string(a) + ".0." + std::to_string(b);
}

/// Match part of a kube-proxy-shaped rule (no target). chain decides -i/-o validity.
inline std::string gen_matches(bool v6, const std::string& chain) {
  std::string m;
  int n = *rc::gen::inRange(0, 4);
  bool proto_done = false;
  for (int k = 0; k < n; ++k) {
    switch (*rc::gen::inRange(0, 18)) {
      case 0: m += " -m comment --comment \"ns1/svc" + std::to_string(*rc::gen::inRange(1, 4)) + ":p80 cluster IP\""; break;
      case 1: m += " -m comment --comment ns1/svc1:p" + std::to_string(*rc::gen::inRange(1, 4)); break;
      case 2:
        if (!proto_done) {
          std::string p = pick<std::string>({"tcp", "udp", "sctp"});
          m += " -m " + p + " -p " + p + " -d " + ip(v6, 96, *rc::gen::inRange(1, 4)) + " --dport " +
               std::to_string(*rc::gen::inRange(79, 82));
          proto_done = true;
        }
        break;
      case 3: m += std::string(chance(30) ? " !" : "") + " -s " + ip(v6, 180, *rc::gen::inRange(1, 4)); break;
      case 4: {
        static const std::vector<std::string> probs = {"0.5000000000", "0.3333333333", "0.2500000000", "0.1666666667",
                                                       "0.0000099999", "1", "0.33333333349"};
        m += " -m statistic --mode random --probability " + pick(probs);
        break;
      }
      case 5: m += " -m recent --name KUBE-SEP-X" + std::to_string(*rc::gen::inRange(1, 3)) + " --rcheck --seconds 10800 --reap"; break;
      case 6: m += " -m recent --name KUBE-SEP-X1 --set"; break;
      case 7: m += std::string(" -m mark") + (chance(50) ? " !" : "") + " --mark 0x00004000/0x00004000"; break;
      case 8: m += pick<std::string>({" -m conntrack --ctstate INVALID", " -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT",
                                      " -m conntrack --ctstate RELATED,ESTABLISHED", " -m state --state NEW"});
        break;
      case 9: m += pick<std::string>({" -m addrtype --dst-type LOCAL", " -m addrtype --src-type LOCAL",
                                      " -m addrtype ! --dst-type LOCAL"});
        break;
      case 10: m += v6 ? " ! -d ::1/128" : " ! -d 127.0.0.0/8"; break;
      case 11: m += pick<std::string>({" -m nfacct --nfacct-name localhost_nps_accepted_pkts",
                                       " -m nfacct --nfacct-name ct_state_invalid_dropped_pkts"});
        break;
      case 12:
        if (!proto_done) {
          m += pick<std::string>({" -p udp --dport 53", " -p tcp --sport 1000:2000", " -p tcp ! --dport 22"});
          proto_done = true;
        }
        break;
      case 13:
        if (chain != "POSTROUTING" && chain != "OUTPUT") m += pick<std::string>({" -i eth0", " ! -i veth+", " -i +"});
        break;
      case 14:
        if (chain != "PREROUTING" && chain != "INPUT") m += pick<std::string>({" -o eth1", " ! -o lo"});
        break;
      case 15: m += std::string(" ! -s ") + (v6 ? "fd00:10::/64" : "10.0.0.0/8"); break;
      case 16:
        if (!proto_done) {
          m += " -p tcp -m multiport --dports 80,443,8000:8080";
          proto_done = true;
        }
        break;
      case 17:
        // Issue 12 §3: bridge-port matches. The kernel refuses --physdev-out/--physdev-is-out
        // where OUTPUT can reach them (unless --physdev-is-bridged): only in FORWARD/POSTROUTING here.
        if (chain == "FORWARD" || chain == "POSTROUTING")
          m += pick<std::string>({" -m physdev --physdev-out vethwe-bridge --physdev-is-bridged",
                                  " -m physdev ! --physdev-out veth+ --physdev-is-bridged",
                                  " -m physdev --physdev-is-out", " -m physdev ! --physdev-is-bridged",
                                  " -m physdev --physdev-in veth+ --physdev-out cni0x --physdev-is-bridged"});
        else
          m += pick<std::string>({" -m physdev --physdev-in veth+", " -m physdev ! --physdev-is-in",
                                  " -m physdev --physdev-is-in ! --physdev-in vethwe-datapath",
                                  " -m physdev --physdev-is-bridged", " -m physdev ! --physdev-in +"});
        break;
      default: break;
    }
  }
  return m;
}

/// A target valid for that table and chain (kernel hook/table restrictions respected).
inline std::string gen_target(bool v6, const std::string& table, const std::string& chain, bool allow_dangling) {
  bool builtin_sink = table == "nat" && (chain == "POSTROUTING" || chain == "INPUT");
  std::vector<std::string> t = {"", " -j ACCEPT", " -j RETURN"};
  if (!builtin_sink) {
    std::string target_chain = pick(user_chains());
    if (allow_dangling && chance(15)) target_chain = "KUBE-MISSING";
    t.push_back(" -j " + target_chain);
    t.push_back(" -j " + target_chain);
    t.push_back(" -g " + target_chain);
  }
  if (table == "filter") {
    t.push_back(" -j DROP");
    t.push_back(" -j REJECT");
  }
  if (table == "mangle" || table == "filter") t.push_back(" -j MARK --or-mark 0x00004000");
  if (table == "nat") {
    t.push_back(" -j MARK --xor-mark 0x00004000");
    if (chain == "POSTROUTING") t.push_back(" -j MASQUERADE --random-fully");
    if (chain != "POSTROUTING" && chain != "INPUT")
      t.push_back(v6 ? " -p tcp -j DNAT --to-destination [fd00:10:180::1]:80" : " -p tcp -j DNAT --to-destination 10.180.0.1:80");
    // Issue 12: NAT targets as real nodes and hand edits write them: ports 0 and 65535,
    // port ranges, repeated options, and option arguments that start with '-'.
    if (chance(25)) {
      std::string a = v6 ? "[fd00:10:180::1]" : "10.180.0.1";
      if (chain != "POSTROUTING" && chain != "INPUT")
        t.push_back(" -p tcp -j DNAT --to-destination " +
                    pick<std::string>({a + ":0", ":0", a + ":65535", ":0-0", a + ":0-100", a + ":1000-2000", a + ":5-3",
                                       a + ":-", "--random", "-5", a + ":80 --random --random", a + ":1x",
                                       a + ":80 --to-destination " + a, a + ":0x10", a + ":+5", v6 ? "::" : "0.0.0.0"}));
      if (chain == "POSTROUTING" || chain == "INPUT")
        t.push_back(" -p udp -j SNAT --to-source " +
                    pick<std::string>({a + ":0", a + ":65535", a + ":1024-65535", "--random", a + " --random-fully",
                                       a + " --persistent --persistent"}));
      if (chain == "POSTROUTING")
        t.push_back(" -p tcp -j MASQUERADE " + pick<std::string>({"--to-ports 0", "--to-ports 65535", "--to-ports 1-2",
                                                                  "--to-ports --random", "--random --random",
                                                                  "--to-ports 5-3"}));
    }
  }
  if ((table == "mangle" || table == "filter") && chance(15))
    t.push_back(pick<std::string>({" -j MARK --or-mark --x", " -j MARK --set-xmark 0x1/", " -j MARK --set-mark 0xZZ",
                                   " -j MARK --or-mark 1 --or-mark 2", " -j MARK --or-mark 1 --and-mark 2",
                                   " -j MARK --set-xmark 4294967295/0xffffffff", " -m mark --mark -1 -j ACCEPT",
                                   " -m mark --mark 1/2/3 -j ACCEPT", " -m comment --comment --x -j ACCEPT"}));
  if (table == "filter" && chance(15))
    t.push_back(pick<std::string>({" -j REJECT --reject-with --x", " -j REJECT --reject-with tcp-reset -p tcp",
                                   " -j REJECT --reject-with icmp-port-unreachable --reject-with tcp-reset"}));
  return pick(t);
}

/// Chains a rule may be written to in a table. nat user chains can hold DNAT, so only
/// PREROUTING/OUTPUT may jump to them: the generator keeps jumps out of POSTROUTING/INPUT.
inline std::string gen_rule_chain(const std::string& table) {
  if (chance(65)) return pick(user_chains());
  return pick(builtins(table));
}

inline std::string gen_rule_body(bool v6, const std::string& table, const std::string& chain, bool dangling) {
  std::string m = gen_matches(v6, chain);
  std::string t = gen_target(v6, table, chain, dangling);
  if (t.find("-p tcp") != std::string::npos && m.find(" -p ") != std::string::npos) t = " -j ACCEPT";
  if (table == "nat" && chain != "POSTROUTING" && chain != "INPUT" && t.find(" -j DNAT") == std::string::npos &&
      t.find(" -g ") == std::string::npos && t.find(" -j KUBE") == std::string::npos && m.find("DNAT") != std::string::npos)
    t = " -j RETURN";
  return m + t;
}

inline const std::vector<std::string>& tables() {
  static const std::vector<std::string> t = {"filter", "nat", "mangle", "raw", "security"};
  return t;
}

/// A kube-proxy-shaped table block: declarations first, then rules, then stale "-X".
inline std::string gen_kube_block(bool v6, const std::string& table) {
  std::string out = "*" + table + "\n";
  std::vector<std::string> decl;
  for (const auto& c : user_chains())
    if (chance(60)) decl.push_back(c);
  for (const auto& c : decl) out += ":" + c + " - [0:0]\n";
  int rules = *rc::gen::inRange(0, 10);
  for (int k = 0; k < rules && !decl.empty(); ++k) {
    std::string chain = chance(80) ? pick(decl) : pick(builtins(table));
    std::string target = gen_target(v6, table, chain, false);
    // Only jump to declared chains in the kube-proxy-shaped part.
    if ((target.find(" -j KUBE") == 0 || target.find(" -j A") == 0 || target.find(" -j b") == 0 || target.find(" -g ") == 0))
      target = " -j " + pick(decl);
    if (table == "nat" && (chain == "POSTROUTING" || chain == "INPUT") && target.find(" -j KUBE") != std::string::npos) target = " -j RETURN";
    if (table == "nat" && (chain == "POSTROUTING" || chain == "INPUT") &&
        (target == " -j A" || target == " -j b"))
      target = " -j RETURN";
    std::string m = gen_matches(v6, chain);
    if (target.find("-p tcp") != std::string::npos && m.find(" -p ") != std::string::npos) target = " -j ACCEPT";
    out += "-A " + chain + m + target + "\n";
  }
  if (chance(30) && !decl.empty()) {
    std::string c = pick(decl);
    out += ":" + c + " - [0:0]\n-X " + c + "\n";
  }
  out += "COMMIT\n";
  return out;
}

/// One random command line for a table.
inline std::string gen_command(bool v6, const std::string& table) {
  const std::string uc = pick(user_chains());
  switch (*rc::gen::inRange(0, 26)) {
    case 0:
    case 1:
    case 2: return ":" + uc + " - [0:0]";
    case 3: {
      std::string c = gen_rule_chain(table);
      return "-A " + c + gen_rule_body(v6, table, c, true);
    }
    case 4:
    case 5: {
      std::string c = gen_rule_chain(table);
      return "-A " + c + gen_rule_body(v6, table, c, false);
    }
    case 6: {
      std::string c = gen_rule_chain(table);
      std::string n = chance(50) ? " " + std::to_string(*rc::gen::inRange(1, 4)) : "";
      return "-I " + c + n + gen_rule_body(v6, table, c, false);
    }
    case 7: {
      std::string c = gen_rule_chain(table);
      return "-D " + c + gen_rule_body(v6, table, c, false);
    }
    case 8: return "-D " + gen_rule_chain(table) + " " + std::to_string(*rc::gen::inRange(1, 3));
    case 9: {
      std::string c = gen_rule_chain(table);
      return "-R " + c + " " + std::to_string(*rc::gen::inRange(1, 3)) + gen_rule_body(v6, table, c, false);
    }
    case 10: return "-N " + uc;
    case 11:
    case 12: return "-X " + uc;
    case 13: return chance(30) ? "-X" : "-X " + pick(builtins(table));
    case 14: return chance(30) ? "-F" : "-F " + (chance(50) ? uc : pick(builtins(table)));
    case 15: return chance(30) ? "-Z" : "-Z " + (chance(50) ? uc : pick(builtins(table)));
    case 16: return "-P " + (chance(85) ? pick(builtins(table)) : uc) + " " + pick<std::string>({"ACCEPT", "DROP", "DROP", "RETURN"});
    case 17: return ":" + pick(builtins(table)) + " " + pick<std::string>({"ACCEPT", "DROP", "-", "ACCEPT"}) + " [0:0]";
    case 18: return "-E " + uc + " " + pick(user_chains());
    case 24: return "-E " + uc + " " + pick<std::string>({"KUBE-NEW", "KUBE-SVC-AAAA2", "Z"});
    case 19: return "# a comment";
    case 20: return "";
    case 21: {
      std::string c = gen_rule_chain(table);
      return "[12:345] -A " + c + gen_rule_body(v6, table, c, false);
    }
    case 22:
      return pick<std::string>({"-A " + uc + " --bogus", "-A " + uc + " -s not-an-ip", ":" + uc, "-A OUTPUT -i eth0 -j ACCEPT",
                                "-N ACCEPT", "-A " + uc + " -m comment --comment \"unterminated -j ACCEPT", "COMMIT extra"});
    case 23: {
      std::string c = gen_rule_chain(table);
      return "-A " + c + " -m comment --comment \"quoted \\\"x\\\" 'y'\" -j RETURN";
    }
    default: {
      // jumps between user chains (loops when they close a cycle)
      std::string c = pick(user_chains());
      return "-A " + c + (chance(50) ? " -j " : " -g ") + pick(user_chains());
    }
  }
}

inline std::string gen_chaos_block(bool v6, const std::string& table, bool allow_missing_commit) {
  std::string out = "*" + table + "\n";
  if (chance(60)) {
    int decls = *rc::gen::inRange(1, 5);
    for (int k = 0; k < decls; ++k) out += ":" + pick(user_chains()) + " - [0:0]\n";
  }
  int n = *rc::gen::inRange(0, 12);
  for (int k = 0; k < n; ++k) out += gen_command(v6, table) + "\n";
  if (!(allow_missing_commit && chance(20))) out += "COMMIT\n";
  return out;
}

inline rc::Gen<RestoreCase> gen_restore_case() {
  return rc::gen::exec([] {
    RestoreCase c;
    c.ipv6 = chance(35);
    c.noflush = chance(80);
    int init_tables = *rc::gen::inRange(0, 3);
    for (int k = 0; k < init_tables; ++k) c.init += gen_kube_block(c.ipv6, pick(tables()));
    int blocks = *rc::gen::inRange(1, 4);
    for (int k = 0; k < blocks; ++k) {
      std::string t = chance(10) ? pick(tables()) : pick<std::string>({"filter", "nat", "nat", "mangle", "raw"});
      bool last = k + 1 == blocks;
      if (chance(35)) c.program += gen_kube_block(c.ipv6, t);
      else c.program += gen_chaos_block(c.ipv6, t, last);
      if (chance(3)) c.program += pick<std::string>({"*bogus\nCOMMIT\n", "garbage outside\n", "\n# comment\n"});
    }
    return c;
  });
}

}  // namespace kpc::test::vgen
