// Issue 12: CONNMARK and -m connmark (trace/effects.h) in the concrete tracer and the
// symbolic comparison: the connection mark as a function of the arriving mark and
// connmark, a new connection's mark 0, no conntrack entry in raw / INVALID / UNTRACKED.
#include <gtest/gtest.h>

#include "verifier/state/state.h"
#include "verifier/symbolic/compare.h"
#include "verifier/symbolic/option_semantics.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {
namespace {

RulesetState load(const std::string& program) {
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  auto r = apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->reason : "") << " " << pe.message << "\n" << program;
  return st;
}

std::string mangle_filter(const std::string& mangle, const std::string& filter) {
  return "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
         ":POSTROUTING ACCEPT [0:0]\n" + mangle + "COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
         ":OUTPUT ACCEPT [0:0]\n" + filter + "COMMIT\n";
}

Packet fwd(uint32_t ct = ir::kCtNew) {
  Packet p;
  p.src = *IPAddr::parse("10.244.1.5");
  p.dst = *IPAddr::parse("10.244.2.6");
  p.dport = 80;
  p.sport = 40000;
  p.origin = Origin::Pod;
  p.in_iface = "cni0";
  p.out_iface = "eth0";
  p.ctstate = ct;
  return p;
}

Outcome one(const std::string& prog, const Packet& p) {
  RulesetState st = load(prog);
  TraceOptions o;
  o.local_addresses = {*IPAddr::parse("192.168.0.2")};
  Tracer t(st, o);
  auto r = t.trace(p);
  EXPECT_EQ(r.outcomes.size(), 1u);
  return r.outcomes.empty() ? Outcome{} : r.outcomes[0];
}

TEST(Connmark, TracerSetAndTest) {
  std::string prog = mangle_filter("-A PREROUTING -j CONNMARK --set-xmark 0x1/0xff\n",
                                   "-A FORWARD -m connmark --mark 0x1/0xff -j DROP\n");
  Outcome o = one(prog, fwd());
  EXPECT_EQ(o.verdict, Verdict::Drop);
  EXPECT_EQ(o.options, "connmark 0x1/0xffffffff");  // a new connection's other bits are 0
  // An established connection: the bits the rule did not set are its earlier mark.
  Packet e = fwd(ir::kCtEstablished);
  o = one(prog, e);
  EXPECT_EQ(o.verdict, Verdict::Drop);
  EXPECT_EQ(o.options, "connmark 0x1/0xff");
  // Reading bits nobody set: unknown without --ctmark, decided with it.
  std::string read = mangle_filter("", "-A FORWARD -m connmark --mark 0x1/0xff -j DROP\n");
  EXPECT_EQ(one(read, e).verdict, Verdict::Unknown);
  e.ctmark = 0x101;
  EXPECT_EQ(one(read, e).verdict, Verdict::Drop);
  EXPECT_EQ(one(read, fwd()).verdict, Verdict::Accept);  // new: 0
}

TEST(Connmark, TracerSaveRestoreAndNoEntry) {
  std::string prog = mangle_filter(
      "-A PREROUTING -j MARK --set-xmark 0x40/0xff\n-A PREROUTING -j CONNMARK --save-mark --nfmask 0xff --ctmask 0xff\n"
      "-A PREROUTING -j MARK --set-xmark 0x0/0xffffffff\n"
      "-A PREROUTING -j CONNMARK --restore-mark --nfmask 0xff --ctmask 0xff\n",
      "-A FORWARD -m mark --mark 0x40/0xff -j DROP\n");
  EXPECT_EQ(one(prog, fwd()).verdict, Verdict::Drop);
  EXPECT_EQ(one(prog, fwd()).options, "connmark 0x40/0xffffffff");
  // INVALID and UNTRACKED packets have no entry: CONNMARK does nothing, -m connmark is false even negated.
  std::string neg = mangle_filter("-A PREROUTING -j CONNMARK --set-xmark 0x1/0x1\n",
                                  "-A FORWARD -m connmark ! --mark 0x1/0x1 -j DROP\n-A FORWARD -m connmark --mark 0x1/0x1 -j DROP\n");
  Outcome inv = one(neg, fwd(ir::kCtInvalid));
  EXPECT_EQ(inv.verdict, Verdict::Accept);
  EXPECT_EQ(inv.options, "");
  // The raw table runs before conntrack: no entry there.
  std::string raw = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -j CONNMARK --set-xmark 0x1/0x1\n"
                    "-A PREROUTING -m connmark ! --mark 0x5 -j DROP\nCOMMIT\n";
  Outcome r = one(raw, fwd());
  EXPECT_EQ(r.verdict, Verdict::Accept);
  EXPECT_EQ(r.options, "");
  // Restoring an established connection's unknown mark is Unknown.
  EXPECT_EQ(one(mangle_filter("-A PREROUTING -j CONNMARK --restore-mark\n", ""), fwd(ir::kCtEstablished)).verdict,
            Verdict::Unknown);
}

}  // namespace
}  // namespace kpc::verifier::trace

namespace kpc::verifier::symbolic {
namespace {

RulesetState load_state(const std::string& program) {
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  EXPECT_TRUE(apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe).ok()) << program;
  return st;
}

sem::CompareResult compare(const std::string& a, const std::string& b) {
  sem::CompareOptions co;
  co.local_addresses = {*IPAddr::parse("192.168.0.2")};
  return compare_states(load_state(a), load_state(b), co);
}

std::string mangle(const std::string& rules, const std::string& filter = "") {
  return "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
         ":POSTROUTING ACCEPT [0:0]\n" + rules + "COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
         ":OUTPUT ACCEPT [0:0]\n" + filter + "COMMIT\n";
}

std::string verdict(const sem::CompareResult& r) {
  return std::to_string(r.differing_classes) + " differing, " + std::to_string(r.undecided_classes) + " undecided" +
         (r.self_check_failures.empty() ? "" : ", self-check: " + r.self_check_failures.front());
}

TEST(ConnmarkCompare, WritesAreBehaviourAndSpellingsAgree) {
  EXPECT_EQ(target_class("CONNMARK").meaning, OptionMeaning::Modelled);
  auto d = compare(mangle("-A PREROUTING -j CONNMARK --set-xmark 0x1/0xff\n"),
                   mangle("-A PREROUTING -j CONNMARK --set-xmark 0x2/0xff\n"));
  EXPECT_GT(d.differing_classes, 0u) << verdict(d);
  EXPECT_EQ(d.undecided_classes, 0u) << verdict(d);
  EXPECT_TRUE(d.self_check_failures.empty()) << verdict(d);
  for (auto [a, b] : {std::pair{"--set-mark 0x1/0xff", "--set-xmark 0x1/0xff"}, {"--or-mark 0x4", "--set-xmark 0x4/0x4"},
                      {"--and-mark 0xff", "--set-xmark 0x0/0xffffff00"}, {"--xor-mark 0x3", "--set-xmark 0x3/0x0"},
                      {"--save-mark --mask 0xff", "--save-mark --nfmask 0xff --ctmask 0xff"}}) {
    auto e = compare(mangle(std::string("-A PREROUTING -j CONNMARK ") + a + "\n"),
                     mangle(std::string("-A PREROUTING -j CONNMARK ") + b + "\n"));
    EXPECT_TRUE(e.equivalent()) << a << " vs " << b << ": " << verdict(e);
  }
  // Saving the arriving mark: differs only for packets whose mark differs in the saved bits.
  auto s = compare(mangle("-A PREROUTING -j CONNMARK --save-mark --mask 0xff\n"),
                   mangle("-A PREROUTING -j CONNMARK --save-mark --mask 0xf\n"));
  EXPECT_GT(s.differing_classes, 0u) << verdict(s);
  EXPECT_EQ(s.undecided_classes, 0u) << verdict(s);
}

TEST(ConnmarkCompare, ASharedConnmarkNoLongerMakesAChangeUndecided) {
  std::string shared = "-A PREROUTING -j CONNMARK --save-mark\n-A PREROUTING -m connmark --mark 0x4000/0x4000 -j ACCEPT\n";
  auto r = compare(mangle(shared, "-A FORWARD -p tcp --dport 80 -j DROP\n"),
                   mangle(shared, "-A FORWARD -p tcp --dport 81 -j DROP\n"));
  EXPECT_GT(r.differing_classes, 0u) << verdict(r);
  EXPECT_EQ(r.undecided_classes, 0u) << verdict(r);
  EXPECT_TRUE(r.self_check_failures.empty()) << verdict(r);
  // Restoring a mark the rules wrote earlier in the same traversal is known, too.
  std::string rt = "-A PREROUTING -j CONNMARK --set-xmark 0x4000/0xffffffff\n-A PREROUTING -j CONNMARK --restore-mark\n";
  auto q = compare(mangle(rt, "-A FORWARD -m mark --mark 0x4000 -j DROP\n"), mangle(rt, ""));
  EXPECT_GT(q.differing_classes, 0u) << verdict(q);
  EXPECT_EQ(q.undecided_classes, 0u) << verdict(q);
}

}  // namespace
}  // namespace kpc::verifier::symbolic
