// A throw-away network namespace for tests against the real kernel: created on
// construction, deleted on destruction (also when the test fails). Commands run
// inside it with `ip netns exec`. Needs root (CI runs as root).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <string>
#include <thread>
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

/// `iptables-legacy-save` (or ip6tables) of the namespace without comment lines and counters: what
/// the applier tests compare with kpc's programs.
std::string legacy_save_without_counters(const Netns& ns, bool ipv6 = false);

/// An iptables-save text (either flavour) without comment lines and with every chain's
/// counters shown as [0:0]: the form kpc's print_save() compares with.
std::string save_with_zero_counters(const std::string& save_text);
/// A node's foreign rules the applier must never touch: a user's chain and rules in INPUT and nat
/// PREROUTING (iptables legacy), and with nft_table also a foreign `inet mine` table. False, with
/// the failing command in *error, when one does not load.
bool add_foreign_rules(const Netns& ns, bool nft_table, std::string* error);

/// True when this process can create network namespaces (root with CAP_SYS_ADMIN).
bool can_use_netns();

/// Runs f on a thread of its own inside the namespace: setns is per thread, and what f opens
/// there (a netlink socket, libnftables' context) or spawns (the tools) belongs to it.
template <class F>
void in_netns(const Netns& ns, F f) {
  std::thread t([&] {
    int fd = open(("/var/run/netns/" + ns.name()).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(setns(fd, CLONE_NEWNET), 0);
    close(fd);
    f();
  });
  t.join();
}

/// The restore/save binaries of one flavour and family ("iptables-legacy-restore", ...).
struct IptablesTools {
  std::string restore, save;
};
IptablesTools iptables_tools(const std::string& flavor /*legacy|nft*/, bool ipv6);

}  // namespace kpc::test
