// A throw-away network namespace for tests against the real kernel: created on
// construction, deleted on destruction (also when the test fails). Commands run
// inside it with `ip netns exec`. Needs root (CI runs as root).
#pragma once

#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace kpc::test {

class Netns {
 public:
  Netns();
  ~Netns();
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;

  const std::string& name() const { return name_; }
  bool ok() const { return ok_; }
  /// Runs argv inside the namespace.
  CommandResult exec(const std::vector<std::string>& argv, const std::string& stdin_text = "") const;
  /// Creates kube-proxy's two nfacct counters, as kube-proxy does at start-up.
  bool add_kube_proxy_nfacct() const;

 private:
  std::string name_;
  bool ok_ = false;
};

/// True when this process can create network namespaces (root with CAP_SYS_ADMIN).
bool can_use_netns();

/// The restore/save binaries of one flavour and family ("iptables-legacy-restore", ...).
struct IptablesTools {
  std::string restore, save;
};
IptablesTools iptables_tools(const std::string& flavor /*legacy|nft*/, bool ipv6);

}  // namespace kpc::test
