#include "tests/support/netns.h"

#include <unistd.h>

#include <atomic>

namespace kpc::test {

Netns::Netns() {
  static std::atomic<int> counter{0};
  name_ = "kpc-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  ok_ = run({"ip", "netns", "add", name_}).exit_code == 0;
}

Netns::~Netns() {
  if (ok_) run({"ip", "netns", "del", name_});
}

CommandResult Netns::exec(const std::vector<std::string>& argv, const std::string& stdin_text) const {
  std::vector<std::string> full = {"ip", "netns", "exec", name_};
  full.insert(full.end(), argv.begin(), argv.end());
  return run(full, stdin_text);
}

bool Netns::add_kube_proxy_nfacct() const {
  return exec({"nfacct", "add", "ct_state_invalid_dropped_pkts"}).exit_code == 0 &&
         exec({"nfacct", "add", "localhost_nps_accepted_pkts"}).exit_code == 0;
}

std::string legacy_save_without_counters(const Netns& ns, bool ipv6) {
  auto r = ns.exec({ipv6 ? "ip6tables-legacy-save" : "iptables-legacy-save"});
  std::string out;
  for (size_t pos = 0; pos < r.out.size();) {
    size_t nl = r.out.find('\n', pos);
    if (nl == std::string::npos) nl = r.out.size();
    std::string l = r.out.substr(pos, nl - pos);
    pos = nl + 1;
    if (l.empty() || l[0] == '#') continue;
    if (l[0] == ':') l = l.substr(0, l.rfind(' '));
    out += l + "\n";
  }
  return out;
}

std::string save_with_zero_counters(const std::string& save_text) {
  std::string out;
  for (size_t pos = 0; pos < save_text.size();) {
    size_t nl = save_text.find('\n', pos);
    if (nl == std::string::npos) nl = save_text.size();
    std::string l = save_text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!l.empty() && l[0] == '#') continue;
    if (!l.empty() && l[0] == ':') {
      size_t b = l.rfind(" [");
      if (b != std::string::npos) l = l.substr(0, b) + " [0:0]";
    }
    out += l + "\n";
  }
  return out;
}

bool add_foreign_rules(const Netns& ns, bool nft_table, std::string* error) {
  std::vector<std::vector<std::string>> cmds = {
      {"iptables-legacy", "-N", "USER-CHAIN"},
      {"iptables-legacy", "-A", "USER-CHAIN", "-s", "192.0.2.1/32", "-j", "ACCEPT"},
      {"iptables-legacy", "-A", "INPUT", "-s", "198.51.100.9/32", "-j", "DROP"},
      {"iptables-legacy", "-t", "nat", "-N", "USER-NAT"},
      {"iptables-legacy", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", "9999", "-j", "USER-NAT"}};
  if (nft_table) {
    cmds.push_back({"nft", "add", "table", "inet", "mine"});
    cmds.push_back({"nft", "add", "chain", "inet", "mine", "input", "{ type filter hook input priority 0 ; }"});
    cmds.push_back({"nft", "add", "rule", "inet", "mine", "input", "tcp", "dport", "2222", "drop"});
  }
  for (const auto& argv : cmds) {
    auto r = ns.exec(argv);
    if (r.exit_code != 0) {
      *error = argv[0] + " " + argv[1] + ": " + r.err;
      return false;
    }
  }
  return true;
}

bool can_use_netns() {
  static int cached = -1;
  if (cached < 0) {
    Netns probe;
    cached = probe.ok() ? 1 : 0;
  }
  return cached == 1;
}

IptablesTools iptables_tools(const std::string& flavor, bool ipv6) {
  std::string base = ipv6 ? "ip6tables-" : "iptables-";
  return {base + flavor + "-restore", base + flavor + "-save"};
}

}  // namespace kpc::test
