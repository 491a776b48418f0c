// Issue 12, section 2: exactly what the real tool accepts and refuses in NAT targets
// and mark values. Every expectation below was recorded from iptables 1.8.9 (legacy;
// nft reads them with the same code) in a network namespace; the differential test
// (tests/kernel/verifier_diff_test.cpp) generates these shapes against the real tools.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "tests/support/test_util.h"
#include "tests/support/rule_save.h"
#include "verifier/parse/parser.h"

namespace kpc::verifier {
namespace {

std::string save(std::string_view text, IPFamily f = IPFamily::V4) { return test::rule_save(text, f); }

std::string dnat(const std::string& to, IPFamily f = IPFamily::V4) {
  return save("-A PREROUTING -p tcp -j DNAT --to-destination " + to, f);
}

TEST(NatValues, PortZeroAndOtherAcceptedSpellingsReprintAsTheRealTool) {
  const std::string p = "-A PREROUTING -p tcp -j DNAT --to-destination ";
  for (auto [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"0.0.0.0:0", "0.0.0.0:0"},     {":0", ":0"},
           {"10.0.0.1:0", "10.0.0.1:0"},   {":0-0", ":0"},
           {"10.0.0.1:0-100", "10.0.0.1:0-100"}, {"0.0.0.0", "0.0.0.0"},
           {"10.0.0.1:5-5", "10.0.0.1:5"}, {"10.0.0.1:00", "10.0.0.1:0"},
           {"10.0.0.1:0x10", "10.0.0.1:16"}, {"10.0.0.1:+5", "10.0.0.1:5"},
           {"10.0.0.1:65535", "10.0.0.1:65535"}, {":65535", ":65535"}})
    EXPECT_EQ(dnat(in), p + out) << in;
  for (auto [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"[fd00::1]:0", "[fd00::1]:0"}, {"[::]:0", "[::]:0"}, {"[fd00::1]:0-0", "[fd00::1]:0"},
           {":0", ":0"}, {":80", ":80"}, {"::", "::"}, {"[fd00::1]", "fd00::1"}, {"[fd00::1]x", "fd00::1"},
           {"[fd00::1]:0-100", "[fd00::1]:0-100"}})
    EXPECT_EQ(dnat(in, IPFamily::V6), p + out) << in;
  EXPECT_EQ(save("-A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:0"),
            "-A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:0");
}

TEST(NatValues, RefusedValuesCarryTheRealToolsMessage) {
  for (auto [in, msg] : std::vector<std::pair<std::string, std::string>>{
           {"--random", "Bad IP address \"\""}, {"-5", "Bad IP address \"\""},
           {"10.0.0.1-", "Bad IP address \"\""}, {"abc-10.0.0.2", "Bad IP address \"abc\""},
           {"10.0.0.1-abc", "Bad IP address \"abc\""}, {"1.2.3.4:5:6", "Bad IP address \"1.2.3.4:5:6\""},
           {"[1.2.3.4]:5", "Invalid address format"}, {"10.0.0.1:-5", "Port `-5' not valid"},
           {"10.0.0.1:5-", "Port `' not valid"}, {"1.2.3.4:", "Port `' not valid"},
           {"10.0.0.1:70000", "Port `70000' not valid"}, {"10.0.0.1:5-3", "Port range `3' funky"},
           {"10.0.0.1:5-0", "Port range `0' funky"}, {"10.0.0.1:1x", "Garbage after port value: `x'"},
           {"10.0.0.1:-", "Port `-' not valid"}, {"10.0.0.1:x-5", "Port `x-5' not valid"},
           {"10.0.0.1:5-x", "Port `x' not valid"}})
    EXPECT_EQ(dnat(in), "ERROR: " + msg) << in;
  EXPECT_EQ(dnat("[fd00::1", IPFamily::V6), "ERROR: Invalid address format");
  EXPECT_EQ(dnat(":", IPFamily::V6), "ERROR: Port `' not valid");
  // A port needs a port protocol before anything else is read.
  EXPECT_EQ(save("-A PREROUTING -j DNAT --to-destination 10.0.0.1:x"),
            "ERROR: Need TCP, UDP, SCTP or DCCP with port specification");
}

TEST(NatValues, MarkValuesAndRepeatedOptionsCarryTheRealToolsMessage) {
  auto mark = [](const std::string& opt, const std::string& v) { return save("-A INPUT -j MARK --" + opt + " " + v); };
  EXPECT_EQ(mark("set-xmark", "--x"), "ERROR: MARK: bad integer value for option \"--set-xmark\", or out of range.\n");
  EXPECT_EQ(mark("set-xmark", "0xZZ"), "ERROR: MARK: trailing garbage after value for option \"--set-xmark\".\n");
  EXPECT_EQ(mark("set-xmark", "1/2/3"), "ERROR: MARK: trailing garbage after value for option \"--set-xmark\".\n");
  EXPECT_EQ(mark("set-xmark", "1/"), "ERROR: MARK: bad integer value for option \"--set-xmark\", or out of range.\n");
  EXPECT_EQ(mark("set-mark", "4294967296"), "ERROR: MARK: bad integer value for option \"--set-mark\", or out of range.\n");
  for (const char* o : {"and-mark", "or-mark", "xor-mark"})
    for (const char* v : {"--x", "0xZZ", "1/2", "-1"})
      EXPECT_EQ(mark(o, v), std::string("ERROR: MARK: bad value for option \"--") + o +
                                "\", or out of range (0-4294967295).\n")
          << o << " " << v;
  EXPECT_EQ(save("-A INPUT -m mark --mark -1 -j ACCEPT"),
            "ERROR: mark: bad integer value for option \"--mark\", or out of range.\n");
  EXPECT_EQ(save("-A INPUT -m mark --mark 1/2/3 -j ACCEPT"),
            "ERROR: mark: trailing garbage after value for option \"--mark\".\n");
  EXPECT_EQ(save("-A INPUT -j MARK --or-mark 1 --or-mark 2"), "ERROR: MARK: option \"--or-mark\" can only be used once.");
  EXPECT_EQ(save("-A INPUT -j MARK --or-mark 1 --and-mark 2"),
            "ERROR: MARK: option \"--and-mark\" cannot be used together with \"--or-mark\".");
  EXPECT_EQ(save("-A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.1:80 --random --random"),
            "ERROR: DNAT: option \"--random\" can only be used once.");
  EXPECT_EQ(save("-A INPUT -s 1.1.1.1 --source 2.2.2.2 -j ACCEPT"), "ERROR: multiple -s flags not allowed");
  // An argument that looks like an option is still the argument.
  EXPECT_EQ(save("-A INPUT -m comment --comment --x -j ACCEPT"), "-A INPUT -m comment --comment --x -j ACCEPT");
}

// The same failing program: simulate fails it (exit 1, the state committed so far
// printed, the real tool's message), diff and trace cannot read it (exit 2); all
// three name it with the same code and line.
TEST(NatValues, AFailedProgramCarriesTheSameCodeEverywhere) {
  std::string dir = test::temp_dir("natvalues");
  test::write_file(dir + "/bad.restore",
                   "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -s 1.1.1.1 -j ACCEPT\nCOMMIT\n"
                   "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -p tcp -j DNAT --to-destination --random\nCOMMIT\n");
  auto sim = test::run({test::bin_path("kpc"), "simulate", dir + "/bad.restore"});
  EXPECT_EQ(sim.exit_code, 1) << sim.err;
  EXPECT_NE(sim.out.find("-A INPUT -s 1.1.1.1/32 -j ACCEPT"), std::string::npos) << sim.out;  // filter committed
  EXPECT_NE(sim.err.find("iptables-restore v1.8.9 (legacy): Bad IP address \"\"\nError occurred at line: 7"),
            std::string::npos)
      << sim.err;
  const std::string located = "bad.restore:7: error[E0900]: Bad IP address \"\"";
  EXPECT_NE(sim.err.find(located), std::string::npos) << sim.err;
  auto diff = test::run({test::bin_path("kpc"), "diff", dir + "/bad.restore", dir + "/bad.restore"});
  EXPECT_EQ(diff.exit_code, 2);
  EXPECT_NE(diff.err.find(located), std::string::npos) << diff.err;
  auto trace = test::run({test::bin_path("kpc"), "trace", dir + "/bad.restore", "--src", "1.1.1.1", "--dst", "2.2.2.2",
                          "--dport", "80"});
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_NE(trace.err.find(located), std::string::npos) << trace.err;
}

}  // namespace
}  // namespace kpc::verifier
