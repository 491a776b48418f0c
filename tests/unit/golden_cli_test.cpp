// `kpc golden` through the CLI (issue 13, section 4): exit codes (0 all equal, 1 a file
// differs or is missing, 2 error and nothing written), --update (new / changed /
// unchanged), the report by Service (iptables and nftables by behaviour, the fast path by object) with a byte
// diff, --node all, nftables and fastpath files, Markdown, --help.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

// The example cluster (KubeProxyConfiguration naming node-a) in a directory of its own.
std::string example_copy(const std::string& dir, bool with_config = true) {
  std::string c = dir + "/cluster";
  fs::create_directories(c);
  for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml", "kube-proxy.yaml"})
    if (with_config || std::string(f) != "kube-proxy.yaml")
      fs::copy_file(source_path(std::string("fixtures/example/") + f), c + "/" + f);
  return c;
}

// shop/web loses its endpoint 10.244.2.6 (the slice's second endpoint).
void drop_web_endpoint(const std::string& cluster) {
  std::string s = read_file(cluster + "/endpointslices.json");
  size_t at = s.find("{\"addresses\": [\"10.244.2.6\"]");
  ASSERT_NE(at, std::string::npos);
  s.erase(at, s.find('\n', at) + 1 - at);
  write_file(cluster + "/endpointslices.json", s);
}

CommandResult golden(const std::vector<std::string>& args) {
  std::vector<std::string> argv{bin_path("kpc"), "golden"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

TEST(GoldenCli, UpdateWritesWhatCompileWritesThenEqualIsZero) {
  std::string dir = temp_dir("golden");
  std::string cluster = example_copy(dir), expect = dir + "/golden";
  auto u = golden({cluster, "--expect", expect, "--update"});
  ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_TRUE(has(u.out, "new " + expect + "/node-a/iptables-ipv4.restore")) << u.out;
  EXPECT_TRUE(has(u.out, "new " + expect + "/node-a/iptables-ipv6.restore")) << u.out;
  // The snapshot's mode (iptables) and both families of its node: kpc compile's programs.
  EXPECT_EQ(read_file(expect + "/node-a/iptables-ipv4.restore"), read_file(source_path("fixtures/example/expected/iptables.restore")));
  EXPECT_EQ(read_file(expect + "/node-a/iptables-ipv6.restore"), read_file(source_path("fixtures/example/expected/ip6tables.restore")));
  auto r = golden({cluster, "--expect", expect});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "2 files: 2 equal")) << r.out;
  auto again = golden({cluster, "--expect", expect + "/", "--update"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_TRUE(has(again.out, "unchanged " + expect + "/node-a/iptables-ipv4.restore")) << again.out;
}

TEST(GoldenCli, AChangedSnapshotIsOneAndNamesTheService) {
  std::string dir = temp_dir("golden");
  std::string cluster = example_copy(dir), expect = dir + "/golden";
  ASSERT_EQ(golden({cluster, "--expect", expect, "--update"}).exit_code, 0);
  drop_web_endpoint(cluster);
  auto r = golden({cluster, "--expect", expect});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, expect + "/node-a/iptables-ipv4.restore: differs")) << r.out;
  EXPECT_TRUE(has(r.out, "by behaviour")) << r.out;
  EXPECT_TRUE(has(r.out, "shop/web:http: endpoint removed 10.244.2.6:8080")) << r.out;
  // The byte diff: unified, with the endpoint's chain gone.
  EXPECT_TRUE(has(r.out, "@@ -36,7 +36,6 @@")) << r.out;
  EXPECT_TRUE(has(r.out, "-:KUBE-SEP-6VCK77QPODAJLWFH - [0:0]")) << r.out;
  EXPECT_TRUE(has(r.out, expect + "/node-a/iptables-ipv6.restore: equal")) << r.out;
  // Capped: --diff-lines 3 shows three lines and counts the rest.
  auto capped = golden({cluster, "--expect", expect, "--diff-lines", "3"});
  EXPECT_EQ(capped.exit_code, 1);
  EXPECT_TRUE(has(capped.out, "more changed lines not shown")) << capped.out;
  // Markdown: a table by file and Service.
  auto md = golden({cluster, "--expect", expect, "--format", "markdown"});
  EXPECT_EQ(md.exit_code, 1);
  EXPECT_TRUE(has(md.out, "| file | status | Service | change |")) << md.out;
  EXPECT_TRUE(has(md.out, "| `node-a/iptables-ipv4.restore` | differs | shop/web:http | endpoint removed 10.244.2.6:8080"))
      << md.out;
  EXPECT_TRUE(has(md.out, "```diff")) << md.out;
  // --update rewrites the changed file only, then the check passes.
  auto u = golden({cluster, "--expect", expect, "--update"});
  EXPECT_EQ(u.exit_code, 0) << u.err;
  EXPECT_TRUE(has(u.out, "changed " + expect + "/node-a/iptables-ipv4.restore")) << u.out;
  EXPECT_TRUE(has(u.out, "unchanged " + expect + "/node-a/iptables-ipv6.restore")) << u.out;
  EXPECT_EQ(golden({cluster, "--expect", expect}).exit_code, 0);
}

TEST(GoldenCli, AMissingExpectedFileIsOneAndSaidSo) {
  std::string dir = temp_dir("golden");
  std::string cluster = example_copy(dir), expect = dir + "/golden";
  ASSERT_EQ(golden({cluster, "--expect", expect, "--update"}).exit_code, 0);
  fs::remove(expect + "/node-a/iptables-ipv6.restore");
  auto r = golden({cluster, "--expect", expect});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, expect + "/node-a/iptables-ipv6.restore: missing")) << r.out;
  EXPECT_TRUE(has(r.out, "1 equal, 1 missing")) << r.out;
  // A directory that does not exist at all: every file missing, nothing created.
  auto none = golden({cluster, "--expect", dir + "/nowhere"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_FALSE(fs::exists(dir + "/nowhere"));
}

TEST(GoldenCli, NodeAllWritesAndChecksEveryNodeAndItsFamilies) {
  // No KubeProxyConfiguration: two Nodes, node-a dual-stack, node-b IPv4 only.
  std::string dir = temp_dir("golden");
  std::string cluster = example_copy(dir, false), expect = dir + "/golden";
  auto none = golden({cluster, "--expect", expect});
  EXPECT_EQ(none.exit_code, 2) << none.out;  // which node? (E0700, as compile)
  EXPECT_TRUE(has(none.err, "E0700")) << none.err;
  auto u = golden({cluster, "--expect", expect, "--node", "all", "--update"});
  ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_TRUE(fs::exists(expect + "/node-a/iptables-ipv4.restore"));
  EXPECT_TRUE(fs::exists(expect + "/node-a/iptables-ipv6.restore"));
  EXPECT_TRUE(fs::exists(expect + "/node-b/iptables-ipv4.restore"));
  EXPECT_FALSE(fs::exists(expect + "/node-b/iptables-ipv6.restore"));  // node-b has no IPv6 address
  EXPECT_TRUE(has(u.out, "3 files: 3 new")) << u.out;
  EXPECT_EQ(golden({cluster, "--expect", expect, "--node", "all"}).exit_code, 0);
  // One node named: its directory only.
  auto b = golden({cluster, "--expect", expect, "--node", "node-b"});
  EXPECT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_TRUE(has(b.out, "1 file: 1 equal")) << b.out;
  // The change shows on both nodes.
  drop_web_endpoint(cluster);
  auto r = golden({cluster, "--expect", expect, "--node", "all"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.out, expect + "/node-a/iptables-ipv4.restore: differs")) << r.out;
  EXPECT_TRUE(has(r.out, expect + "/node-b/iptables-ipv4.restore: differs")) << r.out;
}

TEST(GoldenCli, NftablesAndFastpathFilesAreComparedByObject) {
  std::string dir = temp_dir("golden");
  std::string cluster = example_copy(dir), expect = dir + "/golden";
  auto u = golden({cluster, "--expect", expect, "--backend", "nftables", "--backend", "fastpath", "--update"});
  ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(read_file(expect + "/node-a/nftables-ipv4.nft"), read_file(source_path("fixtures/example/expected/nftables-ipv4.nft")));
  EXPECT_EQ(read_file(expect + "/node-a/nftables-ipv6.nft"), read_file(source_path("fixtures/example/expected/nftables-ipv6.nft")));
  EXPECT_EQ(read_file(expect + "/node-a/fastpath.nft"), read_file(source_path("fixtures/example/expected/fastpath.nft")));
  EXPECT_FALSE(fs::exists(expect + "/node-a/iptables-ipv4.restore"));
  // One family asked for: that family's nftables file (and the one fast-path file).
  auto v4 = golden({cluster, "--expect", expect, "--backend", "nftables", "--backend", "fastpath", "--family", "ipv4"});
  EXPECT_EQ(v4.exit_code, 0) << v4.out << v4.err;
  EXPECT_TRUE(has(v4.out, "2 files: 2 equal")) << v4.out;

  drop_web_endpoint(cluster);
  std::string svc = read_file(cluster + "/services.yaml");
  write_file(cluster + "/services.yaml", replace(svc, "nodePort: 30080", "nodePort: 30081"));
  auto r = golden({cluster, "--expect", expect, "--backend", "nftables", "--backend", "fastpath", "--family", "ipv4"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, expect + "/node-a/nftables-ipv4.nft: differs")) << r.out;
  // The nftables file by behaviour (the nft model and its symbolic front end), the fast-path
  // table by object (it holds no Service dataplane).
  EXPECT_TRUE(has(r.out, "by Service, by behaviour")) << r.out;
  EXPECT_TRUE(has(r.out, "shop/web:http: endpoint removed 10.244.2.6:8080")) << r.out;
  EXPECT_TRUE(has(r.out, "by object (the fast-path table")) << r.out;
  EXPECT_TRUE(has(r.out, "-add chain ip kube-proxy endpoint-NEDU63VM-shop/web/tcp/http__10.244.2.6/8080")) << r.out;
  EXPECT_TRUE(has(r.out, expect + "/node-a/fastpath.nft: differs")) << r.out;
  EXPECT_TRUE(has(r.out, "+add element inet kube-proxy-fastpath service-nodeports { tcp . 30081 }")) << r.out;
}

TEST(GoldenCli, ABadSnapshotIsTwoAndWritesNothing) {
  std::string dir = temp_dir("golden");
  std::string cluster = example_copy(dir), expect = dir + "/golden";
  std::string svc = read_file(cluster + "/services.yaml");
  write_file(cluster + "/services.yaml", replace(svc, "port: 80,", "port: 70000,"));
  auto r = golden({cluster, "--expect", expect, "--update"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(has(r.err, "services.yaml:17:")) << r.err;  // located
  EXPECT_TRUE(has(r.err, "error[E0300]")) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(expect));
  auto check = golden({cluster, "--expect", expect});
  EXPECT_EQ(check.exit_code, 2);
  // A family the node lacks, asked for by name, is an error too (as compile).
  std::string plain = example_copy(temp_dir("golden"), false);
  auto v6 = golden({plain, "--expect", expect, "--node", "node-b", "--family", "ipv6", "--update"});
  EXPECT_EQ(v6.exit_code, 2) << v6.out;
  EXPECT_TRUE(has(v6.err, "E0701")) << v6.err;
  EXPECT_FALSE(fs::exists(expect));
}

TEST(GoldenCli, WithoutBackendTheConfiguredModeDecides) {
  std::string dir = temp_dir("golden");
  std::string cluster = example_copy(dir), expect = dir + "/golden";
  std::string cfg = read_file(cluster + "/kube-proxy.yaml");
  write_file(cluster + "/kube-proxy.yaml", replace(cfg, "mode: iptables", "mode: nftables"));
  auto u = golden({cluster, "--expect", expect, "--update"});
  EXPECT_EQ(u.exit_code, 0) << u.err;
  EXPECT_TRUE(has(u.out, "new " + expect + "/node-a/nftables-ipv4.nft")) << u.out;
  EXPECT_TRUE(has(u.out, "new " + expect + "/node-a/nftables-ipv6.nft")) << u.out;
  EXPECT_TRUE(has(u.out, "2 files: 2 new")) << u.out;
  write_file(cluster + "/kube-proxy.yaml", replace(cfg, "mode: iptables", "mode: ipvs"));
  auto ipvs = golden({cluster, "--expect", dir + "/other", "--update"});
  EXPECT_EQ(ipvs.exit_code, 2);
  EXPECT_TRUE(has(ipvs.err, "error[E0704]: kpc golden: ipvs, snapshot directory: IPVS mode is four files")) << ipvs.err;
  EXPECT_FALSE(fs::exists(dir + "/other"));
}

TEST(GoldenCli, HelpHasExamplesAndExitCodes) {
  auto h = golden({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_TRUE(has(h.out, "Examples:")) << h.out;
  EXPECT_TRUE(has(h.out, "Exit codes: 0 all equal")) << h.out;
  auto typo = golden({"x", "--expct", "y"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_TRUE(has(typo.err, "did you mean '--expect'")) << typo.err;
}

}  // namespace
}  // namespace kpc::test
