// Issue 12, section 1: the behavioural diff on what real nodes contain is sound.
//  * a change kpc models only in part (the session-affinity timeout, `recent
//    --seconds`) is a difference, with a witness client of the right age;
//  * each class is filed under the Services its own paths name, also when several
//    Services' classes share one destination atom (NodePorts on the node's address)
//    and the comparison traces only a sample of witnesses;
//  * targets that change nothing the model tracks (CHECKSUM, LOG, NFLOG, TRACE) are
//    no-ops, not unknowns.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

std::string replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

// The default text is wrapped at 100 columns (tools/kpc/text_layout.h): a phrase may continue on
// the next line, after its indent. This joins continued lines back into one.
std::string unwrapped(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && i + 1 < text.size() && text[i + 1] == ' ') {
      while (i + 1 < text.size() && text[i + 1] == ' ') ++i;
      out += ' ';
    } else {
      out += text[i];
    }
  }
  return out;
}

// The bundled example with shop/cart's affinity timeout changed.
std::string example_with_timeout(const std::string& seconds) {
  std::string dir = temp_dir("affinity");
  std::filesystem::copy(source_path("fixtures/example"), dir + "/ex", std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(dir + "/ex/expected");
  std::string svc = read_file(dir + "/ex/services.yaml");
  write_file(dir + "/ex/services.yaml", replace(svc, "timeoutSeconds: 600", "timeoutSeconds: " + seconds));
  return dir + "/ex";
}

TEST(DiffSoundness, AffinityTimeoutChangeIsADifferenceWithAClientOfTheRightAge) {
  std::string changed = example_with_timeout("5");
  auto r = run({bin_path("kpc"), "diff", source_path("fixtures/example"), changed});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("shop/cart"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(last seen 5 s ago)"), std::string::npos) << r.out;  // the witness client's age
  // The class's age range is in its description, which --verbose prints.
  auto v = run({bin_path("kpc"), "diff", "--verbose", source_path("fixtures/example"), changed});
  EXPECT_NE(v.out.find("last seen 5 s to < 600 s ago"), std::string::npos) << v.out;
  auto j = run({bin_path("kpc"), "diff", "--format", "json", source_path("fixtures/example"), changed});
  ASSERT_EQ(j.exit_code, 1) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_GT(doc["differing_classes"].get<int>(), 0);
  EXPECT_EQ(doc["undecided_classes"].get<int>(), 0);
  for (const auto& g : doc["services"]) {
    EXPECT_EQ(g["service"], "shop/cart");
    for (const auto& d : g["differences"]) {
      // Every witness is a remembered client last seen 5 s ago: stuck before, load-balanced after.
      EXPECT_EQ(d["witness"]["remembered_age_seconds"], 5) << d.dump();
      EXPECT_EQ(d["old"].size(), 1u) << d.dump();
      EXPECT_EQ(d["new"].size(), 3u) << d.dump();
    }
  }
  // The same timeout written differently is no change at all; one second more is.
  EXPECT_EQ(run({bin_path("kpc"), "diff", source_path("fixtures/example"), example_with_timeout("600")}).exit_code, 0);
  EXPECT_EQ(run({bin_path("kpc"), "diff", source_path("fixtures/example"), example_with_timeout("601")}).exit_code, 1);
}

TEST(DiffSoundness, TraceTakesTheClientsAge) {
  std::string dir = temp_dir("affinity-trace");
  auto c = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "-o", dir + "/v4.restore"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto trace = [&](const std::string& age) {
    return run({bin_path("kpc"), "trace", dir + "/v4.restore", "--src", "10.244.0.5", "--dst", "10.96.30.30",
                "--dport", "9000", "--from", "pod", "--in-iface", "cbr0", "--affinity", "10.244.2.32:9000",
                "--affinity-age", age, "--format", "json"});
  };
  auto young = nlohmann::json::parse(trace("599").out), old = nlohmann::json::parse(trace("600").out);
  ASSERT_EQ(young["outcomes"].size(), 1u);
  EXPECT_EQ(young["outcomes"][0]["dnat"], "10.244.2.32:9000");
  EXPECT_EQ(old["outcomes"].size(), 3u);  // forgotten at 600 s: load-balanced again
  EXPECT_NE(young["outcomes"][0]["affinity"].get<std::string>().find("set KUBE-SEP-"), std::string::npos);
}

// Five NodePort Services on the node's address (one destination atom), each given a
// new endpoint: more classes per start class than the comparison traces.
std::string nodeports(int variant) {
  std::string s = "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n"
                  ":KUBE-NODEPORTS - [0:0]\n";
  for (int i = 1; i <= 5; ++i) s += ":KUBE-EXT-" + std::to_string(i) + " - [0:0]\n";
  s += "-A PREROUTING -j KUBE-SERVICES\n-A OUTPUT -j KUBE-SERVICES\n"
       "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n";
  for (int i = 1; i <= 5; ++i) {
    std::string n = std::to_string(i), svc = "ns/s" + n + ":http";
    s += "-A KUBE-NODEPORTS -p tcp -m comment --comment \"" + svc + "\" -m tcp --dport 3000" + n + " -j KUBE-EXT-" +
         n + "\n";
    s += "-A KUBE-EXT-" + n + " -p tcp -m comment --comment \"" + svc + " -> 10.1." + n + "." +
         std::to_string(variant) + ":80\" -j DNAT --to-destination 10.1." + n + "." + std::to_string(variant) +
         ":80\n";
  }
  return s + "COMMIT\n";
}

TEST(DiffSoundness, ClassesSharingADestinationAtomAreFiledUnderTheirOwnService) {
  std::string dir = temp_dir("attribution");
  write_file(dir + "/a.restore", nodeports(1));
  write_file(dir + "/b.restore", nodeports(2));
  auto j = run({bin_path("kpc"), "diff", "--format", "json", "--local-address", "192.168.0.10", dir + "/a.restore",
                dir + "/b.restore"});
  ASSERT_EQ(j.exit_code, 1) << j.out << j.err;
  auto doc = nlohmann::json::parse(j.out);
  std::set<std::string> seen;
  size_t classes = 0;
  for (const auto& g : doc["services"]) {
    for (const auto& d : g["differences"]) {
      // NodePort 3000N belongs to ns/sN:http, and to nothing else.
      int port = d["witness"]["dport"].get<int>();
      std::string want = "ns/s" + std::to_string(port - 30000) + ":http";
      ASSERT_EQ(d["services"].size(), 1u) << d.dump();
      EXPECT_EQ(d["services"][0], want) << d.dump();
      EXPECT_EQ(g["service"], want);
      seen.insert(want);
      ++classes;
    }
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_GT(classes, 5u);  // both origins: more than the 3 witnesses traced per start class
}

TEST(DiffSoundness, TargetsThatChangeNothingTrackedAreNoOps) {
  const std::string head = "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
                           ":OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n";
  std::string dir = temp_dir("noop");
  write_file(dir + "/a.save", head + "-A POSTROUTING -p udp -m udp --dport 68 -j CHECKSUM --checksum-fill\n"
                                     "-A FORWARD -j LOG --log-prefix \"fwd \"\n-A FORWARD -j NFLOG\n-A FORWARD -j TRACE\n"
                                     "-A FORWARD -p tcp -m tcp --dport 22 -j DROP\nCOMMIT\n");
  write_file(dir + "/b.save", head + "-A FORWARD -p tcp -m tcp --dport 22 -j DROP\nCOMMIT\n");
  auto r = run({bin_path("kpc"), "diff", dir + "/a.save", dir + "/b.save"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("equivalent"), std::string::npos) << r.out;
  // A real change next to them is still found, and decided.
  write_file(dir + "/c.save", head + "-A FORWARD -p tcp -m tcp --dport 23 -j DROP\nCOMMIT\n");
  auto j = run({bin_path("kpc"), "diff", "--format", "json", dir + "/a.save", dir + "/c.save"});
  EXPECT_EQ(j.exit_code, 1) << j.out << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_GT(doc["differing_classes"].get<int>(), 0);
  EXPECT_EQ(doc["undecided_classes"].get<int>(), 0);
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Two Services; an ipset test and a TCP-flags test (neither modelled) on every
// forwarded packet, after the nat table. Only ns/a's endpoint changes.
std::string with_unknowns(const std::string& a_endpoint, const std::string& extra_filter = "") {
  return "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n"
         "-A PREROUTING -j KUBE-SERVICES\n"
         "-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment \"ns/a:http\" -m tcp --dport 80 -j DNAT "
         "--to-destination " + a_endpoint + "\n"
         "-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m comment --comment \"ns/b:http\" -m tcp --dport 80 -j DNAT "
         "--to-destination 10.2.0.1:80\nCOMMIT\n"
         "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + extra_filter +
         "-A FORWARD -m set --match-set BLOCKED src -j DROP\n"
         "-A FORWARD -p tcp -m tcp --tcp-flags SYN,ACK SYN -j ACCEPT\nCOMMIT\n";
}

TEST(DiffSoundness, IdenticalUnknownsAreNotDifferences) {
  std::string dir = temp_dir("unknowns");
  write_file(dir + "/a.save", with_unknowns("10.1.0.1:80"));
  write_file(dir + "/same.save", with_unknowns("10.1.0.1:80"));
  // Textually different but the same tests in the same places: equivalent.
  auto same = run({bin_path("kpc"), "diff", "--jumps", "no", dir + "/a.save",
                   dir + "/same.save"});
  EXPECT_EQ(same.exit_code, 0) << same.out;
  // ns/a's endpoint changes: its classes differ whatever the ipset and the flags say
  // (decided), and ns/b's packets meet the same unknowns on both sides: no class at all.
  write_file(dir + "/b.save", with_unknowns("10.1.0.9:80"));
  auto j = run({bin_path("kpc"), "diff", "--jumps", "no", "--format", "json", dir + "/a.save", dir + "/b.save"});
  ASSERT_EQ(j.exit_code, 1) << j.out << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_GT(doc["differing_classes"].get<int>(), 0) << j.out;
  EXPECT_EQ(doc["undecided_classes"].get<int>(), 0) << j.out;
  for (const auto& g : doc["services"]) EXPECT_EQ(g["service"], "ns/a:http") << j.out;
  // A change that matters only for some answers of an unknown test is "may differ",
  // and says which answer.
  write_file(dir + "/c.save", with_unknowns("10.1.0.1:80", "-A FORWARD -m set --match-set TRUSTED src -j ACCEPT\n"));
  auto k = run({bin_path("kpc"), "diff", "--jumps", "no", "--format", "json", dir + "/a.save", dir + "/c.save"});
  ASSERT_EQ(k.exit_code, 1) << k.out << k.err;
  auto kd = nlohmann::json::parse(k.out);
  EXPECT_EQ(kd["differing_classes"].get<int>(), 0) << k.out;
  EXPECT_GT(kd["undecided_classes"].get<int>(), 0) << k.out;
  bool assumed = false;
  for (const auto& g : kd["services"])
    for (const auto& d : g["differences"])
      for (const auto& a : d.value("assumptions", nlohmann::json::array()))
        assumed |= a.get<std::string>().find("--match-set TRUSTED src") != std::string::npos;
  EXPECT_TRUE(assumed) << k.out;
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Issue 13, section 5: Markdown reports a reviewer can paste into a PR.
TEST(Reports, MarkdownForDiffAndVerify) {
  std::string changed = example_with_timeout("5");
  auto d = run({bin_path("kpc"), "diff", "--format", "markdown", source_path("fixtures/example"), changed});
  EXPECT_EQ(d.exit_code, 1) << d.err;
  EXPECT_NE(d.out.find("| Service | classes | example packet | old | new |"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("| shop/cart | "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("33.3% "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("<details>"), std::string::npos);
  auto v = run({bin_path("kpc"), "verify", changed, "--prior", source_path("fixtures/example"), "--format", "markdown"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out, "### kpc verify: identical\n\n");
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Issue 13, section 5: diff starts with what changed for each Service, in words.
TEST(Reports, DiffSummarisesEachServiceInWords) {
  std::string dir = temp_dir("summary");
  std::filesystem::copy(source_path("fixtures/example"), dir + "/next", std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(dir + "/next/expected");
  std::string slices = read_file(dir + "/next/endpointslices.json");
  const std::string anchor = "{\"addresses\": [\"10.244.1.5\"]";
  size_t p = slices.find(anchor);
  ASSERT_NE(p, std::string::npos);
  slices.insert(p, "{\"addresses\": [\"10.244.1.9\"], \"conditions\": {\"ready\": true}, \"nodeName\": \"node-a\"},\n        ");
  write_file(dir + "/next/endpointslices.json", slices);
  auto r = run({bin_path("kpc"), "diff", source_path("fixtures/example"), dir + "/next"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("shop/web:http ("), std::string::npos) << r.out;
  EXPECT_NE(unwrapped(r.out).find("endpoint added 10.244.1.9:8080; shares 50.0% 50.0% -> 33.3% 33.3% 33.3%"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Issue 13, section 5 (part): JSON outputs say what they are.
TEST(Reports, JsonOutputsNameTheirSchema) {
  std::string changed = example_with_timeout("5");
  auto d = run({bin_path("kpc"), "diff", "--format", "json", source_path("fixtures/example"), changed});
  EXPECT_EQ(nlohmann::json::parse(d.out)["schema"], "kpc.dev/diff/v1");
  auto v = run({bin_path("kpc"), "verify", changed, "--prior", source_path("fixtures/example"), "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(v.out)["schema"], "kpc.dev/verify/v1");
  auto t = run({bin_path("kpc"), "trace", source_path("fixtures/example"), "--src", "10.244.1.50", "--dst",
                "10.96.10.10", "--dport", "80", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(t.out)["schema"], "kpc.dev/trace/v1");
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// `kpc diff --max-classes N` lists at most N classes (0: every one); the counts of classes and
// of services are over every class whatever N is. iptables (masqueradeAll on: several
// Services) and nftables (the affinity timeout: one), and an error across back ends.
struct Listed {
  int exit_code = -1;
  size_t differing = 0, services_differing = 0, listed = 0;
};
Listed diff_json(const std::string& a, const std::string& b, const std::string& max_classes) {
  std::vector<std::string> argv = {bin_path("kpc"), "diff", "--format", "json", a, b};
  if (!max_classes.empty()) argv.insert(argv.end(), {"--max-classes", max_classes});
  auto r = run(argv);
  Listed l;
  l.exit_code = r.exit_code;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return l;
  l.differing = j["differing_classes"].get<size_t>() + j["undecided_classes"].get<size_t>();
  l.services_differing = j["services_differing"].get<size_t>();
  for (const auto& s : j["services"]) l.listed += s["differences"].size();
  return l;
}

TEST(Reports, MaxClassesListsAtMostNAndCountsEveryClass) {
  std::string dir = temp_dir("max-classes");
  std::filesystem::copy(source_path("fixtures/example"), dir + "/masq", std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(dir + "/masq/expected");
  const std::string cfg = read_file(dir + "/masq/kube-proxy.yaml");
  ASSERT_NE(cfg.find("\n  masqueradeBit: 14"), std::string::npos);
  write_file(dir + "/masq/kube-proxy.yaml", replace(cfg, "\n  masqueradeBit: 14", "\n  masqueradeAll: true\n  masqueradeBit: 14"));
  const std::string example = source_path("fixtures/example");

  Listed all = diff_json(example, dir + "/masq", "0");
  ASSERT_EQ(all.exit_code, 1);
  EXPECT_GT(all.services_differing, 2u);
  EXPECT_EQ(all.listed, all.differing);
  EXPECT_EQ(diff_json(example, dir + "/masq", "").listed, all.differing);  // the default (2000) lists them all here
  for (const char* n : {"1", "3"}) {
    Listed some = diff_json(example, dir + "/masq", n);
    EXPECT_EQ(some.exit_code, 1) << n;
    EXPECT_EQ(some.listed, std::stoul(n)) << n;
    EXPECT_EQ(some.differing, all.differing) << n;
    EXPECT_EQ(some.services_differing, all.services_differing) << n;
  }
  auto text = run({bin_path("kpc"), "diff", "--max-classes", "1", example, dir + "/masq"});
  EXPECT_NE(text.out.find("in " + std::to_string(all.services_differing) + " services\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("(showing the first 1 classes, of 1 service)"), std::string::npos) << text.out;

  // nftables: two transactions of the example, the affinity timeout changed in one.
  const std::string a = dir + "/a.nft", b = dir + "/b.nft";
  ASSERT_EQ(run({bin_path("kpc"), "compile", example, "--backend", "nftables", "-o", a}).exit_code, 0);
  ASSERT_EQ(run({bin_path("kpc"), "compile", example_with_timeout("5"), "--backend", "nftables", "-o", b}).exit_code, 0);
  Listed nft_all = diff_json(a, b, "0");
  ASSERT_EQ(nft_all.exit_code, 1);
  EXPECT_GT(nft_all.differing, 2u);
  EXPECT_EQ(nft_all.listed, nft_all.differing);
  Listed nft_two = diff_json(a, b, "2");
  EXPECT_EQ(nft_two.listed, 2u);
  EXPECT_EQ(nft_two.differing, nft_all.differing);
  EXPECT_EQ(nft_two.services_differing, nft_all.services_differing);

  // Across back ends every Service is reported: the option is refused.
  auto cross = run({bin_path("kpc"), "diff", "--max-classes", "3", source_path("fixtures/example/expected/iptables.restore"), a});
  EXPECT_EQ(cross.exit_code, 2);
  EXPECT_NE(cross.err.find("--max-classes is for a diff within one mode"), std::string::npos) << cross.err;
}

}  // namespace
}  // namespace kpc::test
