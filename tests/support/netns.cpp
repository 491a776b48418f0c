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
