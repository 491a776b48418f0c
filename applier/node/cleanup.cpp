#include "applier/node/cleanup.h"

#include <map>
#include <set>

#include "applier/node/kernel_dataplane.h"
#include "applier/node/process.h"

namespace kpc::applier {

bool is_kube_proxy_chain(std::string_view c) {
  if (!c.starts_with("KUBE-")) return false;
  // kubelet's (v1.27+: it creates only these two); KUBE-FIREWALL is kube-proxy's since kubelet
  // stopped creating it, and kube-proxy's full program declares it.
  static const std::set<std::string_view> kKubelet = {"KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"};
  return !kKubelet.count(c);
}

static bool builtin(std::string_view c) {
  return c == "PREROUTING" || c == "INPUT" || c == "FORWARD" || c == "OUTPUT" || c == "POSTROUTING";
}

// The -j/-g target of a save rule line ("" when none).
static std::string target_of(std::string_view line) {
  for (std::string_view flag : {" -j ", " -g ", " --jump ", " --goto "}) {
    size_t p = line.find(flag);
    if (p == std::string_view::npos) continue;
    size_t b = p + flag.size();
    size_t e = line.find(' ', b);
    return std::string(line.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
  }
  return "";
}

IptablesCleanupPlan plan_iptables_cleanup(const std::string& save) {
  struct Table {
    std::vector<std::string> chains;
    std::vector<std::pair<std::string, std::string>> rules;  // chain, full line
  };
  std::vector<std::pair<std::string, Table>> tables;
  for (size_t pos = 0; pos < save.size();) {
    size_t nl = save.find('\n', pos);
    if (nl == std::string::npos) nl = save.size();
    std::string l = save.substr(pos, nl - pos);
    pos = nl + 1;
    if (l.empty() || l[0] == '#') continue;
    if (l[0] == '*') tables.push_back({l.substr(1), {}});
    else if (tables.empty()) continue;
    else if (l[0] == ':') tables.back().second.chains.push_back(l.substr(1, l.find(' ') - 1));
    else if (l.starts_with("-A ")) {
      size_t e = l.find(' ', 3);
      tables.back().second.rules.push_back({l.substr(3, e == std::string::npos ? std::string::npos : e - 3), l});
    }
  }
  IptablesCleanupPlan plan;
  for (auto& [name, t] : tables) {
    std::set<std::string> kube;
    for (const auto& c : t.chains)
      if (is_kube_proxy_chain(c)) kube.insert(c);
    if (kube.empty()) continue;
    // Kept: kube chains a foreign user chain jumps to, and everything they reach.
    std::set<std::string> kept;
    for (const auto& [chain, line] : t.rules)
      if (!builtin(chain) && !is_kube_proxy_chain(chain)) {
        std::string to = target_of(line);
        if (kube.count(to)) kept.insert(to);
      }
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& [chain, line] : t.rules)
        if (kept.count(chain)) {
          std::string to = target_of(line);
          if (kube.count(to) && kept.insert(to).second) grew = true;
        }
    }
    std::string block;
    for (const auto& [chain, line] : t.rules) {
      if (!builtin(chain)) continue;
      std::string to = target_of(line);
      if (!kube.count(to) || kept.count(to)) continue;
      block += "-D" + line.substr(2) + "\n";
      plan.removes.push_back(name + ": rule " + line);
    }
    std::string flush, del;
    for (const auto& c : t.chains) {
      if (!kube.count(c)) continue;
      if (kept.count(c)) {
        plan.kept.push_back(name + ": chain " + c + " (a foreign chain jumps to it)");
        continue;
      }
      flush += ":" + c + " - [0:0]\n";
      del += "-X " + c + "\n";
      plan.removes.push_back(name + ": chain " + c);
    }
    if (block.empty() && flush.empty()) continue;
    plan.program += "*" + name + "\n" + block + flush + del + "COMMIT\n";
  }
  return plan;
}

std::vector<std::string> plan_nft_cleanup(const std::string& list) {
  std::vector<std::string> out;
  for (const char* t : {"ip kube-proxy", "ip6 kube-proxy", "inet kube-proxy-fastpath"}) {
    std::string line = std::string("table ") + t;
    for (size_t pos = 0; pos < list.size();) {
      size_t nl = list.find('\n', pos);
      if (nl == std::string::npos) nl = list.size();
      if (list.compare(pos, nl - pos, line) == 0) {
        out.push_back(t);
        break;
      }
      pos = nl + 1;
    }
  }
  return out;
}

CleanupResult run_cleanup(const CleanupOptions& opts) {
  CleanupResult r;
  const char* verb = opts.dry_run ? "would remove" : "removed";
  for (auto flavor : {verifier::Flavor::Legacy, verifier::Flavor::Nft})
    for (auto family : {IPFamily::V4, IPFamily::V6}) {
      std::string save = iptables_binary(flavor, family, "save");
      if (!program_exists(save)) continue;
      auto s = run_process({save});
      if (s.exit_code != 0) {
        // No such tables on this kernel (e.g. no legacy modules): nothing of ours there.
        continue;
      }
      auto plan = plan_iptables_cleanup(s.out);
      std::string tool = iptables_binary(flavor, family, "");
      for (const auto& k : plan.kept) r.lines.push_back(tool + ": kept " + k);
      if (plan.program.empty()) continue;
      if (!opts.dry_run) {
        std::vector<std::string> argv{iptables_binary(flavor, family, "restore"), "--noflush"};
        if (opts.wait) argv.push_back("-w");
        auto a = run_process(argv, plan.program);
        if (a.exit_code != 0) {
          r.ok = false;
          r.errors.push_back(tool + ": " + a.err);
          continue;
        }
      }
      for (const auto& x : plan.removes) r.lines.push_back(tool + ": " + verb + " " + x);
      if (!plan.kept.empty()) r.ok = false;
    }
  if (program_exists(opts.nft)) {
    auto l = run_process({opts.nft, "list", "tables"});
    if (l.exit_code == 0)
      for (const auto& t : plan_nft_cleanup(l.out)) {
        if (!opts.dry_run) {
          auto d = run_process({opts.nft, "delete", "table", t.substr(0, t.find(' ')), t.substr(t.find(' ') + 1)});
          if (d.exit_code != 0) {
            r.ok = false;
            r.errors.push_back("nft: delete table " + t + ": " + d.err);
            continue;
          }
        }
        r.lines.push_back(std::string("nft: ") + verb + " table " + t);
      }
  }
  return r;
}

}  // namespace kpc::applier
