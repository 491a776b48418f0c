// Issue 12, soundness: every option the rule parser reads is either in the packet
// semantics or makes a verdict "cannot prove" — never silently equal.
//
// The test enumerates the parser's own list (known_options) and the target
// extensions it recognises; each needs a row in symbolic/option_semantics.cpp and a
// case here: two rule sets that differ only in that option. The behavioural
// comparison must then say what the class says: Modelled -> proven differences,
// NoOp -> equivalent, Unknown -> undecided classes whose reason names the option.
// A parser option added without a case here fails the test.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "verifier/parse/parser.h"
#include "verifier/state/state.h"
#include "verifier/symbolic/compare.h"
#include "verifier/symbolic/option_semantics.h"

namespace kpc::verifier::symbolic {
namespace {

enum class Expect { Differs, Equivalent, Undecided, NotEquivalent };

struct Case {
  std::string a, b;
  Expect expect;
  IPFamily family = IPFamily::V4;
  std::string names;  ///< text the undecided reason must contain (default: the option)
};

std::string fwd(const std::string& rule) {
  return "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD " + rule + "\nCOMMIT\n";
}
std::string drop_if(const std::string& m) { return fwd(m + " -j DROP"); }
std::string nat(const std::string& chain, const std::string& rule) {
  return "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n-A " +
         chain + " " + rule + "\nCOMMIT\n";
}
Case pair(const std::string& ma, const std::string& mb, Expect e, std::string names = {}) {
  return Case{drop_if(ma), drop_if(mb), e, IPFamily::V4, std::move(names)};
}

// One case per (owner, option) of known_options().
std::map<std::string, Case> cases() {
  const auto D = Expect::Differs, E = Expect::Equivalent, U = Expect::Undecided;
  std::map<std::string, Case> c;
  c[" -s"] = pair("-s 10.0.0.0/8", "-s 10.0.0.0/9", D);
  c[" -d"] = pair("-d 10.0.0.0/8", "-d 10.0.0.0/9", D);
  c[" -p"] = pair("-p tcp", "-p udp", D);
  c[" -i"] = pair("-i eth0", "-i eth1", D);
  c[" -o"] = pair("-o eth0", "-o eth1", D);
  c[" -f"] = pair("-f", "! -f", D);
  c["comment comment"] = pair("-m comment --comment one", "-m comment --comment two", E);
  for (const char* proto : {"tcp", "udp", "sctp"}) {
    std::string p = std::string("-p ") + proto + " -m " + proto;
    for (const char* o : {"sport", "source-port", "dport", "destination-port"})
      c[std::string(proto) + " " + o] = pair(p + " --" + o + " 1000", p + " --" + o + " 1001", D);
  }
  c["tcp tcp-flags"] = pair("-p tcp -m tcp --tcp-flags SYN SYN", "-p tcp -m tcp --tcp-flags ACK ACK", U);
  c["tcp syn"] = pair("-p tcp -m tcp --syn", "-p tcp -m tcp ! --syn", U);
  c["tcp tcp-option"] = pair("-p tcp -m tcp --tcp-option 2", "-p tcp -m tcp --tcp-option 3", U);
  c["sctp chunk-types"] = pair("-p sctp -m sctp --chunk-types any INIT", "-p sctp -m sctp --chunk-types any DATA", U);
  c["addrtype src-type"] = pair("-m addrtype --src-type LOCAL", "-m addrtype ! --src-type LOCAL", D);
  c["addrtype dst-type"] = pair("-m addrtype --dst-type LOCAL", "-m addrtype ! --dst-type LOCAL", D);
  c["addrtype limit-iface-in"] =
      Case{fwd("-m addrtype --dst-type LOCAL --limit-iface-in -j DROP"), fwd("-m addrtype --dst-type LOCAL -j DROP"), U};
  c["addrtype limit-iface-out"] =
      Case{fwd("-m addrtype --dst-type LOCAL --limit-iface-out -j DROP"), fwd("-m addrtype --dst-type LOCAL -j DROP"), U};
  c["conntrack ctstate"] = pair("-m conntrack --ctstate NEW", "-m conntrack --ctstate ESTABLISHED", D);
  for (auto [o, v1, v2] : {std::tuple{"ctproto", "tcp", "udp"}, {"ctorigsrc", "10.0.0.1", "10.0.0.2"},
                           {"ctorigdst", "10.0.0.1", "10.0.0.2"}, {"ctreplsrc", "10.0.0.1", "10.0.0.2"},
                           {"ctrepldst", "10.0.0.1", "10.0.0.2"}, {"ctorigsrcport", "1", "2"},
                           {"ctorigdstport", "1", "2"}, {"ctreplsrcport", "1", "2"}, {"ctrepldstport", "1", "2"},
                           {"ctstatus", "ASSURED", "SEEN_REPLY"}, {"ctexpire", "10", "20"},
                           {"ctdir", "ORIGINAL", "REPLY"}})
    c[std::string("conntrack ") + o] = pair(std::string("-m conntrack --") + o + " " + v1,
                                            std::string("-m conntrack --") + o + " " + v2, U);
  c["state state"] = pair("-m state --state NEW", "-m state --state ESTABLISHED", D);
  c["mark mark"] = pair("-m mark --mark 0x1", "-m mark --mark 0x2", D);
  c["statistic mode"] = pair("-m statistic --mode random --probability 0.5",
                             "-m statistic --mode nth --every 2 --packet 1", Expect::NotEquivalent);
  c["statistic probability"] =
      pair("-m statistic --mode random --probability 0.5", "-m statistic --mode random --probability 0.25", D);
  c["statistic every"] = pair("-m statistic --mode nth --every 2 --packet 0",
                              "-m statistic --mode nth --every 3 --packet 0", U, "--mode nth");
  c["statistic packet"] = pair("-m statistic --mode nth --every 3 --packet 0",
                               "-m statistic --mode nth --every 3 --packet 1", U, "--mode nth");
  c["recent set"] = pair("-m recent --set --name L", "-m recent --rcheck --name L", D);
  c["recent rcheck"] = pair("-m recent --rcheck --name L", "-m recent --update --name L", D);
  c["recent update"] = pair("-m recent --update --name L", "-m recent --remove --name L", D);
  c["recent remove"] = pair("-m recent --remove --name L", "-m recent --rcheck --name L", D);
  c["recent seconds"] = pair("-m recent --rcheck --seconds 600 --name L", "-m recent --rcheck --seconds 5 --name L", D);
  c["recent reap"] = pair("-m recent --rcheck --seconds 600 --reap --name L", "-m recent --rcheck --seconds 600 --name L", E);
  c["recent hitcount"] =
      pair("-m recent --rcheck --hitcount 2 --name L", "-m recent --rcheck --hitcount 3 --name L", U, "--hitcount");
  c["recent rttl"] = pair("-m recent --rcheck --rttl --name L", "-m recent --rcheck --name L", U, "--rttl");
  c["recent name"] = pair("-m recent --set --name L", "-m recent --set --name M", D);
  c["recent mask"] = pair("-m recent --set --name L --mask 255.255.255.0", "-m recent --set --name L", D);
  c["recent rsource"] = pair("-m recent --set --name L --rsource", "-m recent --set --name L --rdest", D);
  c["recent rdest"] = pair("-m recent --set --name L --rdest", "-m recent --set --name L", D);
  c["nfacct nfacct-name"] = pair("-m nfacct --nfacct-name a", "-m nfacct --nfacct-name b", E);
  c["set match-set"] = pair("-m set --match-set A src", "-m set --match-set B src", U, "--match-set");
  c["set set"] = pair("-m set --set A src", "-m set --set B src", U, "--match-set");
  c["set return-nomatch"] = pair("-m set --match-set A src --return-nomatch", "-m set --match-set A src", U, "--match-set");
  c["set update-counters"] = pair("-m set --match-set A src ! --update-counters", "-m set --match-set A src", U, "--match-set");
  c["set update-subcounters"] =
      pair("-m set --match-set A src ! --update-subcounters", "-m set --match-set A src", U, "--match-set");
  for (const char* o : {"packets-eq", "packets-lt", "packets-gt", "bytes-eq", "bytes-lt", "bytes-gt"})
    c[std::string("set ") + o] = pair(std::string("-m set --match-set A src --") + o + " 1",
                                      std::string("-m set --match-set A src --") + o + " 2", U);
  for (const char* o : {"dports", "destination-ports", "sports", "source-ports", "ports"})
    c[std::string("multiport ") + o] = pair(std::string("-p tcp -m multiport --") + o + " 80,443",
                                            std::string("-p tcp -m multiport --") + o + " 80,444", D);
  // Bridge ports (issue 12 §3): FORWARD sees the in port and, for bridged packets, the out port.
  c["physdev physdev-in"] = pair("-m physdev --physdev-in veth0", "-m physdev --physdev-in veth1", D);
  c["physdev physdev-out"] = pair("-m physdev --physdev-out veth0", "-m physdev --physdev-out veth1", D);
  for (const char* o : {"physdev-is-in", "physdev-is-out", "physdev-is-bridged"})
    c[std::string("physdev ") + o] = pair(std::string("-m physdev --") + o, std::string("-m physdev ! --") + o, D);
  c["icmp icmp-type"] = pair("-p icmp -m icmp --icmp-type 8", "-p icmp -m icmp --icmp-type 0", U);
  c["icmp6 icmpv6-type"] = Case{drop_if("-p ipv6-icmp -m icmp6 --icmpv6-type 128"),
                                drop_if("-p ipv6-icmp -m icmp6 --icmpv6-type 129"), U, IPFamily::V6};
  // Targets.
  const std::string svc = "-d 10.96.0.1/32 -p tcp -j DNAT --to-destination ";
  c["DNAT to-destination"] = Case{nat("PREROUTING", svc + "10.0.0.1:80"), nat("PREROUTING", svc + "10.0.0.1:81"), D};
  c["DNAT random"] = Case{nat("PREROUTING", svc + "10.0.0.1:80 --random"), nat("PREROUTING", svc + "10.0.0.1:80"), D};
  c["DNAT persistent"] =
      Case{nat("PREROUTING", svc + "10.0.0.1:80 --persistent"), nat("PREROUTING", svc + "10.0.0.1:80"), D};
  c["SNAT to-source"] =
      Case{nat("POSTROUTING", "-p tcp -j SNAT --to-source 10.0.0.1:1000-2000"),
           nat("POSTROUTING", "-p tcp -j SNAT --to-source 10.0.0.1:1000-2001"), D};
  for (const char* o : {"random", "random-fully", "persistent"})
    c[std::string("SNAT ") + o] = Case{nat("POSTROUTING", std::string("-p tcp -j SNAT --to-source 10.0.0.1 --") + o),
                                       nat("POSTROUTING", "-p tcp -j SNAT --to-source 10.0.0.1"), D};
  c["MASQUERADE to-ports"] = Case{nat("POSTROUTING", "-p tcp -j MASQUERADE --to-ports 1000-2000"),
                                  nat("POSTROUTING", "-p tcp -j MASQUERADE --to-ports 1000-2001"), D};
  for (const char* o : {"random", "random-fully"})
    c[std::string("MASQUERADE ") + o] =
        Case{nat("POSTROUTING", std::string("-j MASQUERADE --") + o), nat("POSTROUTING", "-j MASQUERADE"), D};
  c["REJECT reject-with"] =
      Case{fwd("-p tcp -j REJECT --reject-with tcp-reset"), fwd("-p tcp -j REJECT --reject-with icmp-port-unreachable"), D};
  for (const char* o : {"set-xmark", "set-mark", "and-mark", "or-mark", "xor-mark"})
    c[std::string("MARK ") + o] =
        Case{fwd(std::string("-j MARK --") + o + " 0x1"), fwd(std::string("-j MARK --") + o + " 0x2"), D};
  return c;
}

RulesetState load(const std::string& program, IPFamily family) {
  RulesetState st = RulesetState::empty(family);
  ParseError pe;
  auto r = apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe);
  EXPECT_TRUE(r.ok()) << program << "\n" << (r.error ? r.error->reason : "") << " " << pe.message;
  return st;
}

sem::CompareResult compare(const std::string& a, const std::string& b, IPFamily f) {
  sem::CompareOptions co;
  co.local_addresses = {*IPAddr::parse(f == IPFamily::V4 ? "192.168.0.2" : "2001:db8::2")};
  return compare_states(load(a, f), load(b, f), co);
}

std::string verdict(const sem::CompareResult& r) {
  return std::to_string(r.differing_classes) + " differing, " + std::to_string(r.undecided_classes) + " undecided";
}

void check(const Case& k, Expect e, const std::string& label, const std::string& names) {
  for (int dir = 0; dir < 2; ++dir) {  // both directions
    sem::CompareResult r = dir == 0 ? compare(k.a, k.b, k.family) : compare(k.b, k.a, k.family);
    EXPECT_TRUE(r.self_check_failures.empty()) << label << ": " << r.self_check_failures.front();
    switch (e) {
      case Expect::Equivalent:
        EXPECT_TRUE(r.equivalent()) << label << ": " << verdict(r);
        break;
      case Expect::Differs:
        EXPECT_GT(r.differing_classes, 0u) << label << ": " << verdict(r);
        break;
      case Expect::NotEquivalent:
        EXPECT_FALSE(r.equivalent()) << label;
        break;
      case Expect::Undecided: {
        EXPECT_GT(r.undecided_classes, 0u) << label << ": " << verdict(r);
        bool named = false;
        for (const auto& d : r.differences) {
          for (const auto* side : {&d.before, &d.after})
            for (const auto& s : *side) named |= s.unknown.find(names) != std::string::npos;
          for (const auto& a : d.assumptions) named |= a.find(names) != std::string::npos;
        }
        EXPECT_TRUE(named) << label << ": no undecided class names \"" << names << "\"";
        break;
      }
    }
  }
}

TEST(OptionAudit, EveryParserOptionIsModelledOrNeverEqual) {
  auto all = cases();
  size_t checked = 0;
  for (const KnownOption& o : known_options()) {
    std::string key = std::string(o.owner) + " " + std::string(o.option);
    auto cls = option_class(o.owner, o.option);
    ASSERT_TRUE(cls.has_value()) << key << ": no row in symbolic/option_semantics.cpp";
    auto it = all.find(key);
    ASSERT_NE(it, all.end()) << key << ": no case in this test";
    const Case& k = it->second;
    // The case's expectation must be what the class promises.
    switch (cls->meaning) {
      case OptionMeaning::NoOp: EXPECT_EQ(k.expect, Expect::Equivalent) << key; break;
      case OptionMeaning::Unknown: EXPECT_EQ(k.expect, Expect::Undecided) << key; break;
      case OptionMeaning::Modelled:
        EXPECT_TRUE(k.expect == Expect::Differs || k.expect == Expect::NotEquivalent) << key;
        break;
    }
    std::string names = k.names.empty() ? (o.owner.empty() ? std::string(o.option) : "--" + std::string(o.option))
                                        : k.names;
    check(k, k.expect, key, names);
    ++checked;
  }
  EXPECT_EQ(checked, all.size()) << "cases for options the parser no longer knows";
}

TEST(OptionAudit, TargetExtensionsAreModelledNoOpsOrUnknown) {
  for (std::string_view name : target_extension_names()) {
    std::string n(name);
    OptionClass cls = target_class(name);
    if (cls.meaning == OptionMeaning::Modelled || n == "standard") continue;  // typed targets: cases above
    bool v6_only = n == "DNPT" || n == "HL" || n == "SNPT";
    IPFamily f = v6_only ? IPFamily::V6 : IPFamily::V4;
    std::string table_head = n == "CHECKSUM"
                                 ? "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
                                   ":OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
                                 : "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n";
    std::string tail = "-A FORWARD -p tcp -j DROP\nCOMMIT\n";
    std::string with_a = table_head + "-A FORWARD -p tcp -j " + n + " --x one\n" + tail;
    std::string with_b = table_head + "-A FORWARD -p tcp -j " + n + " --x two\n" + tail;
    std::string without = table_head + tail;
    if (cls.meaning == OptionMeaning::NoOp) {
      // Logging and the like: the packet continues, whatever the options say.
      check(Case{with_a, without, Expect::Equivalent, f}, Expect::Equivalent, n + " vs none", "");
      check(Case{with_a, with_b, Expect::Equivalent, f}, Expect::Equivalent, n + " options", "");
    } else {
      check(Case{with_a, with_b, Expect::Undecided, f}, Expect::Undecided, n, "target " + n);
    }
  }
}

// CT and NOTRACK are "modelled" for --notrack only: checked here by behaviour, both ways.
TEST(OptionAudit, NotrackIsModelledOtherCtOptionsAreUnknown) {
  auto raw = [](const std::string& r) {
    return "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + r + "COMMIT\n";
  };
  EXPECT_EQ(target_class("CT").meaning, OptionMeaning::Modelled);
  EXPECT_EQ(target_class("NOTRACK").meaning, OptionMeaning::Modelled);
  check(Case{raw("-A PREROUTING -p tcp -j CT --notrack\n"), raw(""), Expect::Differs}, Expect::Differs, "CT --notrack", "");
  check(Case{raw("-A OUTPUT -p tcp -j NOTRACK\n"), raw(""), Expect::Differs}, Expect::Differs, "NOTRACK", "");
  check(Case{raw("-A PREROUTING -p tcp -j NOTRACK\n"), raw("-A PREROUTING -p tcp -j CT --notrack\n"), Expect::Equivalent},
        Expect::Equivalent, "NOTRACK = CT --notrack", "");
  check(Case{raw("-A PREROUTING -p tcp -j CT --zone 1\n"), raw("-A PREROUTING -p tcp -j CT --zone 2\n"), Expect::Undecided},
        Expect::Undecided, "CT --zone", "target CT");
}

TEST(OptionAudit, RejectWithTheDefaultTypeIsTheSameAsNone) {
  auto r = compare(fwd("-p tcp -j REJECT"), fwd("-p tcp -j REJECT --reject-with icmp-port-unreachable"), IPFamily::V4);
  EXPECT_TRUE(r.equivalent()) << verdict(r);
  auto r6 = compare(fwd("-p tcp -j REJECT"), fwd("-p tcp -j REJECT --reject-with icmp6-port-unreachable"), IPFamily::V6);
  EXPECT_TRUE(r6.equivalent()) << verdict(r6);
}

}  // namespace
}  // namespace kpc::verifier::symbolic
