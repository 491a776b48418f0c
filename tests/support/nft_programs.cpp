#include "tests/support/nft_programs.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

std::optional<Snapshot> load(const std::string& path) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  if (!load_snapshot({path}, LoadOptions{}, sm, &snap, diags)) return std::nullopt;
  return snap;
}

}  // namespace

std::vector<NftProgramSequence> golden_nft_program_sequences() {
  std::vector<NftProgramSequence> out;
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(source_path("fixtures")))
    if (e.path().filename().string().rfind("kp-nft-", 0) == 0 && fs::exists(e.path() / "case.yaml")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  for (const auto& dir : cases) {
    // The snapshots of the case in step order (one when it has no steps).
    std::vector<std::string> snapshots;
    YAML::Node meta = YAML::LoadFile((dir / "case.yaml").string());
    if (meta["steps"]) {
      for (const auto& st : meta["steps"]) snapshots.push_back((dir / st["dir"].as<std::string>() / "snapshot.yaml").string());
    } else {
      snapshots.push_back((dir / "snapshot.yaml").string());
    }
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
      NftProgramSequence seq;
      seq.name = dir.filename().string() + (f == IPFamily::V4 ? "/ipv4" : "/ipv6");
      seq.family = f;
      std::optional<Snapshot> prior;
      for (const auto& path : snapshots) {
        if (!fs::exists(path)) break;
        std::optional<Snapshot> snap = load(path);
        if (!snap) break;  // a case of refused input
        DiagSink d;
        if (!prior) {
          auto full = compile_nftables(*snap, f, {}, d);
          if (!full) break;  // the node has no address of this family
          seq.programs.push_back(full->text);
        } else {
          auto partial = compile_nftables_from_prior(*snap, *prior, f, {}, d);
          if (!partial) break;
          if (!partial->cleanup_text.empty()) seq.programs.push_back(partial->cleanup_text);
          if (!partial->text.empty()) seq.programs.push_back(partial->text);
        }
        prior = std::move(snap);
      }
      if (!seq.programs.empty()) out.push_back(std::move(seq));
    }
  }
  for (const char* file : {"nftables-ipv4.nft", "nftables-ipv6.nft", "fastpath.nft"}) {
    NftProgramSequence seq;
    seq.name = std::string("example/") + file;
    seq.family = std::string(file).find("ipv6") != std::string::npos ? IPFamily::V6 : IPFamily::V4;
    seq.fastpath = std::string(file) == "fastpath.nft";
    seq.programs.push_back(read_file(source_path(std::string("fixtures/example/expected/") + file)));
    out.push_back(std::move(seq));
  }
  return out;
}

std::string sorted_set_elements(const std::string& listing) {
  std::istringstream in(listing);
  std::string out, line;
  std::vector<std::string> elements;
  auto flush = [&] {
    std::sort(elements.begin(), elements.end());
    for (const auto& e : elements) out += e + "\n";
    elements.clear();
  };
  while (std::getline(in, line)) {
    if (line.rfind("\telement ", 0) == 0) {
      elements.push_back(line);
      continue;
    }
    flush();
    out += line + "\n";
  }
  flush();
  return out;
}

}  // namespace kpc::test
