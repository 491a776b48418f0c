#include "applier/node/kernel_dataplane.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "applier/node/nft_library.h"
#include "applier/node/nft_netlink.h"
#include "applier/node/process.h"
#include "verifier/trace/tracer.h"

namespace kpc::applier {

std::optional<IptablesFlavorChoice> parse_flavor_choice(std::string_view s) {
  if (s == "legacy") return IptablesFlavorChoice::Legacy;
  if (s == "nft") return IptablesFlavorChoice::Nft;
  if (s == "auto") return IptablesFlavorChoice::Auto;
  return std::nullopt;
}

std::optional<ApplyWith> parse_apply_with(std::string_view s) {
  if (s == "tools") return ApplyWith::Tools;
  if (s == "in-process") return ApplyWith::InProcess;
  return std::nullopt;
}

std::string iptables_binary(verifier::Flavor flavor, IPFamily family, const std::string& tool) {
  std::string b = family == IPFamily::V4 ? "iptables" : "ip6tables";
  b += flavor == verifier::Flavor::Legacy ? "-legacy" : "-nft";
  if (!tool.empty()) b += "-" + tool;
  return b;
}

size_t count_kube_chains(const std::string& save_text) {
  size_t n = 0;
  for (size_t pos = 0; pos < save_text.size();) {
    size_t nl = save_text.find('\n', pos);
    if (nl == std::string::npos) nl = save_text.size();
    if (save_text.compare(pos, 6, ":KUBE-") == 0) ++n;
    pos = nl + 1;
  }
  return n;
}

verifier::Flavor detect_flavor(size_t* legacy_chains, size_t* nft_chains) {
  size_t counts[2] = {0, 0};
  for (auto flavor : {verifier::Flavor::Legacy, verifier::Flavor::Nft})
    for (auto family : {IPFamily::V4, IPFamily::V6}) {
      std::string bin = iptables_binary(flavor, family, "save");
      if (!program_exists(bin)) continue;
      auto r = run_process({bin});
      if (r.exit_code == 0) counts[flavor == verifier::Flavor::Legacy ? 0 : 1] += count_kube_chains(r.out);
    }
  if (legacy_chains) *legacy_chains = counts[0];
  if (nft_chains) *nft_chains = counts[1];
  return counts[0] > counts[1] ? verifier::Flavor::Legacy : verifier::Flavor::Nft;
}

static const char* nft_family(IPFamily f) { return f == IPFamily::V4 ? "ip" : "ip6"; }

// `nft ARGS...` (stdin_text: `nft -f -`), with the tool or in-process: one result shape.
static ProcessResult run_nft(const KernelTools& t, const std::vector<std::string>& args,
                             const std::string& stdin_text = "") {
  if (t.apply_with == ApplyWith::InProcess) {
    NftLibResult l;
    if (args.size() == 2 && args[0] == "-f" && args[1] == "-") {
      l = nft_lib_apply(stdin_text);
    } else {
      std::string cmd;
      for (const auto& a : args) cmd += (cmd.empty() ? "" : " ") + a;
      l = nft_lib_command(cmd);
    }
    return ProcessResult{l.exit_code, std::move(l.out), std::move(l.err)};
  }
  std::vector<std::string> argv{t.nft};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, stdin_text);
}

DataplaneResult KernelDataplane::read(BackendKind kind, IPFamily family, std::string* out) {
  out->clear();
  if (kind == BackendKind::IPTables) {
    auto r = run_process({iptables_binary(t_.flavor, family, "save")});
    if (r.exit_code != 0) return DataplaneResult::failure(r.err.empty() ? "iptables-save failed" : r.err);
    *out = std::move(r.out);
    return {};
  }
  // `nft list tables` first: a missing table is not an error, it is "none".
  auto tables = run_nft(t_, {"list", "tables", nft_family(family)});
  if (tables.exit_code != 0) return DataplaneResult::failure(tables.err);
  if (tables.out.find(std::string("table ") + nft_family(family) + " kube-proxy\n") == std::string::npos) return {};
  auto r = run_nft(t_, {"list", "table", nft_family(family), "kube-proxy"});
  if (r.exit_code != 0) return DataplaneResult::failure(r.err);
  *out = std::move(r.out);
  return {};
}

DataplaneResult KernelDataplane::apply(BackendKind kind, IPFamily family, const std::string& program) {
  if (kind == BackendKind::IPTables) {
    const std::string& over = family == IPFamily::V4 ? t_.iptables_restore : t_.ip6tables_restore;
    std::vector<std::string> argv{over.empty() ? iptables_binary(t_.flavor, family, "restore") : over, "--noflush"};
    if (t_.wait) argv.push_back("-w");
    auto r = run_process(argv, program);
    if (r.exit_code != 0)
      return DataplaneResult::failure(r.err.empty() ? argv[0] + " exited with " + std::to_string(r.exit_code) : r.err);
    return {};
  }
  if (t_.apply_with == ApplyWith::InProcess) return apply_nft_in_process(program);
  auto r = run_nft(t_, {"-f", "-"}, program);
  if (r.exit_code != 0) return DataplaneResult::failure(r.err.empty() ? "nft failed" : r.err);
  return {};
}

void KernelDataplane::log(const std::string& line) const {
  if (t_.log) return t_.log(line);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

// The netlink batch first. What it does not cover goes to libnftables as before. What the
// kernel refuses (atomically: nothing changed) goes to libnftables too, so that the error
// reported is nft's own, byte for byte; if libnftables then applies it, the encoder wrote
// something nft would not have -- a bug, logged and counted, and the change is applied anyway.
DataplaneResult KernelDataplane::apply_nft_in_process(const std::string& program) {
  NetlinkApplyResult n = nft_netlink_apply(program);
  if (n.outcome == NetlinkOutcome::Applied) {
    ++counts_.netlink_applied;
    return {};
  }
  if (n.outcome == NetlinkOutcome::Unsupported) {
    ++counts_.unsupported;
    log(nlohmann::json{{"msg", "nft netlink batch not used"}, {"why", n.detail}, {"fallback", "libnftables"}}.dump());
  } else {
    ++counts_.refused;
  }
  NftLibResult l = nft_lib_apply(program);
  if (n.outcome == NetlinkOutcome::Refused && l.exit_code == 0) {
    ++counts_.encoder_bugs;
    log(nlohmann::json{{"msg", "nft netlink encoder bug"},
                       {"detail", "the kernel refused the batch, libnftables applied the same program"},
                       {"kernel_error", n.detail}}
            .dump());
  }
  if (l.exit_code != 0) return DataplaneResult::failure(l.err.empty() ? "nft failed" : l.err);
  return {};
}

std::vector<std::string> split_rule_args(std::string_view rule) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false, quoted = false;
  for (char c : rule) {
    if (quoted) {
      if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"') {
      quoted = in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(std::move(cur)), cur.clear(), in_word = false;
    } else {
      cur += c, in_word = true;
    }
  }
  if (in_word) out.push_back(std::move(cur));
  return out;
}

DataplaneResult KernelDataplane::ensure_jumps(IPFamily family, const ChainSet& targets,
                                              size_t* inserted) {
  if (inserted) *inserted = 0;
  const std::string bin = iptables_binary(t_.flavor, family, "");
  for (const auto& j : verifier::trace::kube_proxy_jumps()) {
    if (!targets.count({j.table, j.to})) continue;
    std::vector<std::string> base{bin};
    if (t_.wait) base.push_back("-w");
    base.insert(base.end(), {"-t", ir::table_name(j.table)});
    auto args = split_rule_args(j.rule_text());
    // The target chain: kube-proxy's ensureChain (-N, "exists" is fine).
    auto n = base;
    n.insert(n.end(), {"-N", j.to});
    run_process(n);
    auto check = base;
    check.insert(check.end(), {"-C", j.from});
    check.insert(check.end(), args.begin(), args.end());
    if (run_process(check).exit_code == 0) continue;
    auto ins = base;
    ins.insert(ins.end(), {"-I", j.from});
    ins.insert(ins.end(), args.begin(), args.end());
    auto r = run_process(ins);
    if (r.exit_code != 0) return DataplaneResult::failure(r.err);
    if (inserted) ++*inserted;
  }
  return {};
}

DataplaneResult KernelDataplane::ensure_nfacct(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (run_process({"nfacct", "get", n}).exit_code == 0) continue;
    auto r = run_process({"nfacct", "add", n});
    if (r.exit_code != 0) return DataplaneResult::failure("nfacct add " + n + ": " + (r.err.empty() ? "failed" : r.err));
  }
  return {};
}

}  // namespace kpc::applier
