// The kpc binary's contract: exit codes (0 ok, 2 error; never a crash), located
// diagnostics on stderr, and no output file (not even a partial one) on error.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

const char* kBad = R"(apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.0.0.1
  ports:
  - {name: a, port: 80}
  - {name: b, port: 70000}
)";

TEST(CliCompile, BadInputExitsTwoWithLocationAndWritesNothing) {
  std::string dir = temp_dir("cli");
  write_file(dir + "/bad.yaml", kBad);
  std::string out = dir + "/out.restore";
  auto r = run({bin_path("kpc"), "compile", dir + "/bad.yaml", "-o", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.yaml:8:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error[E0300]: Service default/web: spec.ports[1].port: 70000 is out of range 1-65535"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // bad.yaml: no temp file
  EXPECT_TRUE(r.out.empty());
}

TEST(CliCompile, ExistingOutputIsLeftUntouchedOnError) {
  std::string dir = temp_dir("cli");
  write_file(dir + "/bad.yaml", kBad);
  write_file(dir + "/out.restore", "previous\n");
  auto r = run({bin_path("kpc"), "compile", dir + "/bad.yaml", "-o", dir + "/out.restore"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(read_file(dir + "/out.restore"), "previous\n");
}

TEST(CliCompile, ExampleCompilesForBothFamiliesAndMatchesGolden) {
  for (const char* backend : {"iptables", "ip6tables"}) {
    std::string dir = temp_dir("cli");
    auto r = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", backend, "-o",
                  dir + "/out.restore", "--stats"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(read_file(dir + "/out.restore"),
              read_file(source_path(std::string("fixtures/example/expected/") + backend + ".restore")));
    EXPECT_NE(r.err.find("chains written:"), std::string::npos);
  }
}

TEST(CliCompile, PriorGivesPartial) {
  auto r = run({bin_path("kpc"), "compile", source_path("fixtures/kp-sync-proxy-rules-repeated/steps/02/snapshot.yaml"), "--stats",
                "--prior", source_path("fixtures/kp-sync-proxy-rules-repeated/steps/01/snapshot.yaml")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(source_path(
                       "fixtures/kp-sync-proxy-rules-repeated/steps/02/expected/iptables.partial.restore")));
  EXPECT_NE(r.err.find("sync: partial, changed services: 1"), std::string::npos) << r.err;
}

TEST(CliValidate, ExitCodesAndVersion) {
  EXPECT_EQ(run({bin_path("kpc"), "validate", source_path("fixtures/example")}).exit_code, 0);
  EXPECT_EQ(run({bin_path("kpc"), "validate", "/nonexistent/file.yaml"}).exit_code, 2);
  EXPECT_EQ(run({bin_path("kpc"), "validate"}).exit_code, 2);  // missing argument: usage error
  EXPECT_EQ(run({bin_path("kpc"), "no-such-command"}).exit_code, 2);
  auto v = run({bin_path("kpc"), "--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("kpc "), std::string::npos);
  EXPECT_NE(v.out.find("source revision "), std::string::npos) << v.out;  // issue 13 §6: revision and build type
  EXPECT_NE(v.out.find(", build type "), std::string::npos) << v.out;
  // The fast allocator is the process's malloc, not only linked (docs/performance.md, "The
  // allocator"); a sanitizer build runs on the sanitizer's allocator instead.
#ifdef KPC_TEST_EXPECT_MIMALLOC
  EXPECT_NE(v.out.find("allocator mimalloc "), std::string::npos) << v.out;
  EXPECT_EQ(v.out.find("not in use"), std::string::npos) << v.out;
#else
  EXPECT_NE(v.out.find("allocator glibc malloc"), std::string::npos) << v.out;
#endif
  auto a = run({bin_path("kpc-applier"), "--version"});
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.out.find("not in use"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("allocator "), std::string::npos) << a.out;
  auto garbage = run({bin_path("kpc"), "validate", "-"}, std::string("\x00\x01\x02garbage", 10));
  EXPECT_EQ(garbage.exit_code, 2);
  EXPECT_NE(garbage.err.find("<stdin>:1:1: error[E0003]"), std::string::npos) << garbage.err;
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Issue 13: KubeProxyConfiguration.mode is honoured. `compile` follows mode: nftables (issue
// 14) compiles kube-proxy's nft transaction, ipvs (issue 17) its four IPVS files into -o DIR
// (without -o it is an error: they are not one text). Commands that read iptables programs
// only refuse both modes.
TEST(CliCompile, ConfiguredModeDecidesTheBackEnd) {
  std::string dir = temp_dir("mode");
  std::filesystem::copy(source_path("fixtures/example"), dir + "/ex", std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(dir + "/ex/expected");
  std::string cfg = read_file(dir + "/ex/kube-proxy.yaml");
  for (const char* mode : {"nftables", "ipvs"}) {
    std::string c = cfg;
    c.replace(c.find("mode: iptables"), 14, std::string("mode: ") + mode);
    write_file(dir + "/ex/kube-proxy.yaml", c);
    bool nft = std::string(mode) == "nftables";
    for (const char* sub : {"compile", "drift", "diff"}) {
      std::vector<std::string> argv = {bin_path("kpc"), sub, dir + "/ex"};
      if (std::string(sub) == "drift") argv.insert(argv.end(), {"--state", source_path("fixtures/example/expected/iptables.restore")});
      if (std::string(sub) == "diff") argv.push_back(source_path("fixtures/example"));
      auto r = run(argv);
      if (nft && std::string(sub) == "compile") {
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, read_file(source_path("fixtures/example/expected/nftables-ipv4.nft")));
        continue;
      }
      if (!nft && std::string(sub) == "compile") {
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find("error[E0702]"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("give -o DIR"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
        auto to_dir = run({bin_path("kpc"), "compile", dir + "/ex", "-o", dir + "/ipvs"});
        ASSERT_EQ(to_dir.exit_code, 0) << to_dir.err;
        for (const char* f : {"ipvs.rules", "ipset.rules", "iptables.rules", "node.plan"})
          EXPECT_EQ(read_file(dir + "/ipvs/" + f), read_file(source_path(std::string("fixtures/example/expected/ipvs-ipv4/") + f)))
              << f;
        continue;
      }
      // drift: the state is an iptables dump, and its content decides the mode (the configuration
      // comes last). diff: a snapshot configured for another mode than the other side's is a diff
      // across modes, and says so.
      EXPECT_NE(r.exit_code, 2) << sub << " " << mode << ": " << r.err;
      if (std::string(sub) == "diff") EXPECT_EQ(r.out.rfind("kpc diff across modes: ", 0), 0u) << r.out;
      if (std::string(sub) == "drift") EXPECT_NE(r.out.find("(iptables"), std::string::npos) << r.out;
    }
    auto named = run({bin_path("kpc"), "compile", dir + "/ex", "--backend", "iptables"});
    EXPECT_EQ(named.exit_code, 0) << named.err;
    EXPECT_EQ(named.out, read_file(source_path("fixtures/example/expected/iptables.restore")));
  }
}

TEST(CliCompile, FamilySwitchIsOneForEveryBackEnd) {
  std::string ex = source_path("fixtures/example");
  auto v6 = run({bin_path("kpc"), "compile", ex, "--backend", "iptables", "--family", "ipv6"});
  EXPECT_EQ(v6.exit_code, 0) << v6.err;
  EXPECT_EQ(v6.out, read_file(ex + "/expected/ip6tables.restore"));
  auto nft6 = run({bin_path("kpc"), "compile", ex, "--backend", "nftables", "--family", "ipv6"});
  EXPECT_EQ(nft6.exit_code, 0) << nft6.err;
  EXPECT_EQ(nft6.out, read_file(ex + "/expected/nftables-ipv6.nft"));
  EXPECT_EQ(nft6.out.rfind("add table ip6 kube-proxy", 0), 0u);
  auto clash = run({bin_path("kpc"), "compile", ex, "--backend", "ip6tables", "--family", "ipv4"});
  EXPECT_EQ(clash.exit_code, 2);
  EXPECT_NE(clash.err.find("contradicts --family ipv4"), std::string::npos) << clash.err;
  EXPECT_EQ(clash.out, "");
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Issue 13, section 6 (part): the CLI's conventions.
TEST(CliConventions, UsageDidYouMeanIgnoredFlagsAndHelp) {
  std::string k = bin_path("kpc");
  auto usage = run({k, "compile", "--help"});
  EXPECT_EQ(usage.exit_code, 0);
  EXPECT_NE(usage.out.find("Usage: kpc compile"), std::string::npos) << usage.out;  // not the binary's path
  EXPECT_NE(usage.out.find("Examples:"), std::string::npos);
  EXPECT_NE(usage.out.find("Exit codes:"), std::string::npos);
  for (const char* sub : {"validate", "verify", "diff", "drift", "simulate", "trace"}) {
    auto h = run({k, sub, "--help"});
    EXPECT_NE(h.out.find("Exit codes:"), std::string::npos) << sub;
    EXPECT_NE(h.out.find("Examples:"), std::string::npos) << sub;
  }
  auto typo = run({k, "comple", "x"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown command 'comple'; did you mean 'compile'?"), std::string::npos) << typo.err;
  auto flag = run({k, "compile", source_path("fixtures/example"), "--outptu", "x"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("did you mean '--output'?"), std::string::npos) << flag.err;
  // Flags that would be ignored are errors.
  auto full = run({k, "compile", source_path("fixtures/example"), "--full"});
  EXPECT_EQ(full.exit_code, 2);
  EXPECT_NE(full.err.find("--full requires --prior"), std::string::npos) << full.err;
  EXPECT_EQ(full.out, "");
  auto flavor = run({k, "compile", source_path("fixtures/example"), "--flavor", "nft"});
  EXPECT_EQ(flavor.exit_code, 2);
  auto mixed = run({k, "verify", source_path("fixtures/example"), "--prior", source_path("fixtures/example"), "--state",
                    source_path("fixtures/example/expected/iptables.restore")});
  EXPECT_EQ(mixed.exit_code, 2);
  // kpc-gen-cluster --help prints its usage and writes nothing (built with the benchmarks only).
  if (!std::filesystem::exists(bin_path("kpc-gen-cluster"))) return;
  std::string dir = temp_dir("gen");
  auto gen = run({"sh", "-c", "cd " + dir + " && " + bin_path("kpc-gen-cluster") + " --help"});
  EXPECT_EQ(gen.exit_code, 0);
  EXPECT_NE(gen.out.find("Usage: kpc-gen-cluster"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/--help.json"));
  EXPECT_EQ(run({bin_path("kpc-gen-cluster"), dir + "/x", "-5"}).exit_code, 2);
}

}  // namespace
}  // namespace kpc::test
