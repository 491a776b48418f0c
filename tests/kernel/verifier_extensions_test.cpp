// Verifier findings V1 and V2 (docs/reliability.md) against the real tools: which
// `-m NAME` loads, which `-N NAME` clashes with a target, and which `:NAME - [0:0]`
// declarations iptables-restore 1.8.9 refuses, for every extension file the installed
// iptables package has (/usr/lib/x86_64-linux-gnu/xtables, libxt_* / libipt_* /
// libip6t_*) plus names that no extension has. The verifier's embedded lists
// (verifier/parse/rule_parser.cpp) must give the same verdict as the real tool, for
// both flavours and both families, and the same message, line and exit status where
// the tool refuses a name.
//
// Kernel modules are not part of the verdict: an extension whose kernel module is
// missing still loads in userspace (with a "Warning: ... missing kernel module?" line,
// dropped here) and still clashes with chain names.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "tests/support/netns.h"
#include "tests/support/test_util.h"
#include "verifier/state/state.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;
using verifier::Flavor;

constexpr const char* kXtablesDir = "/usr/lib/x86_64-linux-gnu/xtables";

/// Extension names from the file names (libxt_NAME.so, libipt_NAME.so, libip6t_NAME.so),
/// plus names no file has.
std::vector<std::string> candidate_names() {
  std::set<std::string> names = {"NAT", "QUEUE", "ACCEPT", "DROP", "RETURN", "TCP", "Tcp", "foo", "udplite", "ipv6",
                                 "icmpv6", "ipv6-icmp", "no such match", "comment)", "x\"y", "-x", "!y"};
  for (const auto& e : fs::directory_iterator(kXtablesDir)) {
    std::string f = e.path().filename().string();
    if (f.size() < 4 || f.substr(f.size() - 3) != ".so") continue;
    for (const char* prefix : {"libxt_", "libipt_", "libip6t_"})
      if (f.rfind(prefix, 0) == 0) names.insert(f.substr(std::strlen(prefix), f.size() - 3 - std::strlen(prefix)));
  }
  return {names.begin(), names.end()};
}

std::string quoted(const std::string& name) {
  std::string q = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

/// stderr without the kernel-module warnings.
std::string without_warnings(const std::string& err) {
  std::istringstream in(err);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("Warning: ", 0) != 0) out += line + "\n";
  return out;
}

struct Verdict {
  bool ok = true;
  int exit_code = 0;
  std::string err;
};

Verdict real(const Netns& ns, Flavor f, bool v6, const std::string& program) {
  auto tools = iptables_tools(f == Flavor::Legacy ? "legacy" : "nft", v6);
  auto r = ns.exec({tools.restore}, program);  // without --noflush: every run starts from empty tables
  return {r.exit_code == 0, r.exit_code, without_warnings(r.err)};
}

Verdict sim(Flavor f, bool v6, const std::string& program) {
  verifier::RulesetState st = verifier::RulesetState::empty(v6 ? IPFamily::V6 : IPFamily::V4);
  verifier::ParseOptions po;
  po.family = st.family;
  auto r = verifier::apply(st, verifier::parse_restore(program, po), verifier::ApplyOptions{false, f});
  if (r.ok()) return {};
  return {false, r.error->exit_code, r.error->message};
}

TEST(KernelVerifierExtensions, SameVerdictsAsTheRealTools) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  if (!fs::is_directory(kXtablesDir)) GTEST_SKIP() << kXtablesDir << " missing (iptables not installed)";
  Netns ns;
  ASSERT_TRUE(ns.ok());
  auto names = candidate_names();
  ASSERT_GT(names.size(), 100u);
  size_t checks = 0, refused = 0;
  for (bool v6 : {false, true}) {
    for (Flavor f : {Flavor::Legacy, Flavor::Nft}) {
      for (const auto& n : names) {
        SCOPED_TRACE(n + (v6 ? " ip6tables " : " iptables ") + verifier::flavor_name(f));
        // V1: the match loads, or both refuse it with the same message, line and status.
        std::string m = "*filter\n-A INPUT -m " + quoted(n) + "\nCOMMIT\n";
        Verdict rm = real(ns, f, v6, m), sm = sim(f, v6, m);
        bool real_refused = rm.err.find("Couldn't load match") != std::string::npos;
        bool sim_refused = sm.err.find("Couldn't load match") != std::string::npos;
        EXPECT_EQ(sim_refused, real_refused) << "real: " << rm.err << "sim: " << sm.err;
        if (real_refused && sim_refused) {
          EXPECT_EQ(sm.err, rm.err);
          EXPECT_EQ(sm.exit_code, rm.exit_code);
        }
        refused += real_refused;
        // Target extensions: "-N NAME" clashes exactly for them.
        std::string t = "*filter\n-N " + quoted(n) + "\nCOMMIT\n";
        Verdict rt = real(ns, f, v6, t), st = sim(f, v6, t);
        bool real_clash = rt.err.find("may not clash") != std::string::npos;
        EXPECT_EQ(st.err.find("may not clash") != std::string::npos, real_clash) << "real: " << rt.err << "sim: " << st.err;
        // V2: a declaration ":NAME - [0:0]" of a user chain: accepted, or refused alike.
        if (n.find_first_of(" \"") == std::string::npos) {
          std::string d = "*filter\n:" + n + " - [0:0]\nCOMMIT\n";
          Verdict rd = real(ns, f, v6, d), sd = sim(f, v6, d);
          EXPECT_EQ(sd.ok, rd.ok) << "real: " << rd.err << "sim: " << sd.err;
          if (!rd.ok && !sd.ok) {
            EXPECT_EQ(sd.err, rd.err);
            EXPECT_EQ(sd.exit_code, rd.exit_code);
          }
        }
        checks += 3;
      }
    }
  }
  RecordProperty("checks", static_cast<int>(checks));
  std::printf("%zu names, %zu checks, %zu refused matches\n", names.size(), checks, refused);
}

}  // namespace
}  // namespace kpc::test
