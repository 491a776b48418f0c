// Snapshots with many Nodes (issue 13, section 3): `--node NAME` picks the node as kube-proxy's
// --hostname-override does (LoadOptions::node_name, validated against the snapshot's Nodes) on
// every command that compiles a snapshot; `kpc compile --node all -o DIR` writes one program per
// Node and family.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_util.h"
#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {
namespace fs = std::filesystem;
using loadtest::load_files;
using test::bin_path;
using test::read_file;
using test::run;
using test::source_path;
using test::write_file;

// The example cluster as `kubectl get svc,endpointslices,nodes -A` gives it: two Nodes and no
// KubeProxyConfiguration (so no hostnameOverride). node-a is dual-stack, node-b IPv4 only.
std::string multi_node_dir() {
  std::string dir = test::temp_dir("nodes");
  for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml"})
    fs::copy_file(source_path(std::string("fixtures/example/") + f), dir + "/" + f);
  return dir;
}

// The same cluster with a KubeProxyConfiguration that names the node.
std::string with_override_dir(const std::string& node) {
  std::string dir = multi_node_dir();
  write_file(dir + "/kube-proxy.yaml",
             "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: " + node +
                 "\n");
  return dir;
}

std::vector<std::pair<std::string, std::string>> snapshot_files(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml"})
    out.emplace_back(f, read_file(dir + "/" + f));
  return out;
}

TEST(NodeSelect, LoaderOverrideActsLikeHostnameOverride) {
  LoadOptions lo;
  lo.node_name = " Node-B ";  // trimmed and lower-cased, as kube-proxy treats --hostname-override
  auto l = load_files(snapshot_files(multi_node_dir()), lo);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.config.hostname_override, "node-b");
}

TEST(NodeSelect, UnknownNodeIsAnErrorListingTheNodes) {
  LoadOptions lo;
  lo.node_name = "node-c";
  auto l = load_files(snapshot_files(multi_node_dir()), lo);
  EXPECT_FALSE(l.ok);
  const Diagnostic* d = l.first(DiagCode::NodeUnknown);
  ASSERT_NE(d, nullptr) << l.rendered();
  EXPECT_EQ(d->message, "--node \"node-c\": the snapshot has no such Node; its 2 Nodes: node-a, node-b");
  ASSERT_EQ(d->notes.size(), 2u);
  EXPECT_EQ(d->notes[0], "Node node-a is at nodes.yaml:4:3");
  EXPECT_EQ(d->notes[1], "Node node-b is at nodes.yaml:18:3");
}

TEST(NodeSelect, InvalidNameIsRefusedAndNodelessSnapshotsTakeAnyName) {
  LoadOptions lo;
  lo.node_name = "a \"b\"";
  auto bad = load_files(snapshot_files(multi_node_dir()), lo);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.first(DiagCode::InvalidName), nullptr) << bad.rendered();

  lo.node_name = "elsewhere";
  auto l = load_files({{"svc.yaml", read_file(source_path("fixtures/example/services.yaml"))}}, lo);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_EQ(l.snap.config.hostname_override, "elsewhere");
}

TEST(NodeSelectCli, CompileWithoutNodeSaysHowToPickOne) {
  auto r = run({bin_path("kpc"), "compile", multi_node_dir()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0700]: the snapshot has 2 Nodes: pick one with --node NAME"), std::string::npos)
      << r.err;
}

TEST(NodeSelectCli, CompileNodeEqualsHostnameOverrideAndOverridesIt) {
  std::string dir = multi_node_dir();
  for (const char* node : {"node-a", "node-b"}) {
    auto by_flag = run({bin_path("kpc"), "compile", dir, "--node", node});
    auto by_config = run({bin_path("kpc"), "compile", with_override_dir(node)});
    ASSERT_EQ(by_flag.exit_code, 0) << by_flag.err;
    ASSERT_EQ(by_config.exit_code, 0) << by_config.err;
    EXPECT_EQ(by_flag.out, by_config.out) << node;
    // --node wins over the configuration's hostnameOverride, as the flag does in kube-proxy.
    auto over = run({bin_path("kpc"), "compile", with_override_dir(node == std::string("node-a") ? "node-b" : "node-a"),
                     "--node", node});
    ASSERT_EQ(over.exit_code, 0) << over.err;
    EXPECT_EQ(over.out, by_flag.out) << node;
  }
  // The two nodes' programs differ (node-a's local endpoints, node-b's zone).
  EXPECT_NE(run({bin_path("kpc"), "compile", dir, "--node", "node-a"}).out,
            run({bin_path("kpc"), "compile", dir, "--node", "node-b"}).out);
  auto unknown = run({bin_path("kpc"), "compile", dir, "--node", "node-c"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("error[E0700]: --node \"node-c\": the snapshot has no such Node; its 2 Nodes: node-a, "
                             "node-b\n  note: Node node-a is at "),
            std::string::npos)
      << unknown.err;
  EXPECT_TRUE(unknown.out.empty());
}

TEST(NodeSelectCli, AllNodesWritesOneProgramPerNodeAndFamily) {
  std::string dir = multi_node_dir();
  std::string out = test::temp_dir("nodes-out") + "/programs";
  auto r = run({bin_path("kpc"), "compile", dir, "--node", "all", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // node-b has no IPv6 address: no ip6tables program for it.
  EXPECT_TRUE(fs::exists(out + "/node-a/iptables.restore"));
  EXPECT_TRUE(fs::exists(out + "/node-a/ip6tables.restore"));
  EXPECT_TRUE(fs::exists(out + "/node-b/iptables.restore"));
  EXPECT_FALSE(fs::exists(out + "/node-b/ip6tables.restore"));
  for (const auto& [node, backend] : std::vector<std::pair<std::string, std::string>>{
           {"node-a", "iptables"}, {"node-a", "ip6tables"}, {"node-b", "iptables"}}) {
    auto one = run({bin_path("kpc"), "compile", dir, "--node", node, "--backend", backend});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_EQ(read_file(out + "/" + node + "/" + backend + ".restore"), one.out) << node << " " << backend;
  }
  // --backend: that family only.
  std::string v6 = test::temp_dir("nodes-out");
  r = run({bin_path("kpc"), "compile", dir, "--node", "all", "--backend", "ip6tables", "-o", v6});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(v6 + "/node-a/ip6tables.restore"));
  EXPECT_FALSE(fs::exists(v6 + "/node-a/iptables.restore"));
  EXPECT_FALSE(fs::exists(v6 + "/node-b"));
  EXPECT_NE(r.err.find("note: Node node-b has no IPv6 address: no ip6tables program"), std::string::npos) << r.err;
}

TEST(NodeSelectCli, AllNodesNeedsADirectoryAndWritesNothingOnError) {
  std::string dir = multi_node_dir();
  EXPECT_EQ(run({bin_path("kpc"), "compile", dir, "--node", "all"}).exit_code, 2);
  EXPECT_EQ(run({bin_path("kpc"), "compile", dir, "--node", "all", "-o", "-"}).exit_code, 2);
  // A prior without node-b: no program is written for any node.
  std::string prior = test::temp_dir("nodes-prior");
  write_file(prior + "/nodes.yaml",
             "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus:\n  addresses:\n"
             "  - {type: InternalIP, address: 192.168.0.10}\n  - {type: InternalIP, address: \"2001:db8::10\"}\n");
  std::string out = test::temp_dir("nodes-out") + "/programs";
  auto r = run({bin_path("kpc"), "compile", dir, "--node", "all", "--prior", prior, "-o", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--node \"node-b\": the snapshot has no such Node"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(NodeSelectCli, VerifyDiffTraceDriftTakeNode) {
  std::string dir = multi_node_dir();
  std::string tmp = test::temp_dir("nodes-cmds");
  auto v = run({bin_path("kpc"), "verify", dir, "--prior", dir, "--node", "node-b"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_EQ(run({bin_path("kpc"), "verify", dir, "--prior", dir}).exit_code, 2);

  auto c = run({bin_path("kpc"), "compile", dir, "--node", "node-b", "-o", tmp + "/b.restore"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto same = run({bin_path("kpc"), "diff", tmp + "/b.restore", dir, "--node", "node-b"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  auto other = run({bin_path("kpc"), "diff", tmp + "/b.restore", dir, "--node", "node-a"});
  EXPECT_EQ(other.exit_code, 1) << other.out << other.err;
  EXPECT_EQ(run({bin_path("kpc"), "diff", tmp + "/b.restore", dir}).exit_code, 2);

  std::vector<std::string> trace = {bin_path("kpc"), "trace", dir,   "--src",  "10.244.1.50", "--dst",
                                    "10.96.30.30",   "--proto", "tcp", "--dport", "9000",       "--from", "pod"};
  auto t = trace;
  t.insert(t.end(), {"--node", "node-b"});
  auto tr = run(t);
  EXPECT_EQ(tr.exit_code, 0) << tr.err;
  EXPECT_NE(tr.out.find("local addresses: 192.168.0.11"), std::string::npos) << tr.out;
  auto untraced = run(trace);
  EXPECT_EQ(untraced.exit_code, 2);
  EXPECT_NE(untraced.err.find("error[E0700]"), std::string::npos) << untraced.err;

  // drift: the node's own program (loaded on an empty node) against the snapshot for that node.
  auto s = run({bin_path("kpc"), "simulate", "--noflush", tmp + "/b.restore"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  write_file(tmp + "/b.save", s.out);
  auto d_b = run({bin_path("kpc"), "drift", dir, "--node", "node-b", "--state", tmp + "/b.save", "--format", "json"});
  auto d_a = run({bin_path("kpc"), "drift", dir, "--node", "node-a", "--state", tmp + "/b.save", "--format", "json"});
  EXPECT_NE(d_b.exit_code, 2) << d_b.err;
  EXPECT_NE(d_a.exit_code, 2) << d_a.err;
  EXPECT_NE(d_a.out, d_b.out);  // node-a's program differs from what node-b has
  auto d_none = run({bin_path("kpc"), "drift", dir, "--state", tmp + "/b.save"});
  EXPECT_EQ(d_none.exit_code, 2);
  EXPECT_NE(d_none.err.find("error[E0700]"), std::string::npos) << d_none.err;
  auto d_bad = run({bin_path("kpc"), "drift", dir, "--node", "nope", "--state", tmp + "/b.save"});
  EXPECT_EQ(d_bad.exit_code, 2);
  EXPECT_NE(d_bad.err.find("--node \"nope\""), std::string::npos) << d_bad.err;
}

}  // namespace
}  // namespace kpc
