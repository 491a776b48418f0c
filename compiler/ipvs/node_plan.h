// What kube-proxy's IPVS proxier does to the host besides the IPVS table, the ipsets and
// the iptables chains: the dummy device kube-ipvs0 with every bound virtual-server address,
// and the sysctls and IPVS timeouts it sets when it starts (NewProxier). Which sysctls
// depends on the node's kernel: conn_reuse_mode is set to 0 only on kernels >= 4.1 and
// < 5.9 (seed 004_098315146610bdd0.txt: the port-reuse failure that setting trades for).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/ipvs/program.h"

namespace kpc::ipvs {

inline constexpr const char* kSeed = "004_098315146610bdd0.txt";

struct KernelVersion {
  int major = 0, minor = 0, patch = 0;
  friend auto operator<=>(const KernelVersion&, const KernelVersion&) = default;
};
/// The leading "X.Y[.Z]" of a kernel release ("5.4.0-150-generic" -> 5.4.0), as
/// utilversion.ParseGeneric reads /proc/sys/kernel/osrelease; nullopt when there is none.
std::optional<KernelVersion> parse_kernel_version(std::string_view release);
/// Whether a kernel release string is safe to print and parses (NodeEnvironment kernel.version).
bool valid_kernel_release(std::string_view release);

struct PlanLine {
  std::string reason;  ///< the "# ..." line before it (without "# ")
  std::string line;    ///< a command or a sysctl.conf line; empty: the reason stands alone
};

struct NodePlan {
  std::vector<PlanLine> device;   ///< ip link / ip addr lines
  std::vector<PlanLine> sysctls;  ///< sysctl.conf lines (and what is deliberately left alone)
  std::vector<PlanLine> timeouts; ///< ipvsadm --set, when the configuration sets a timeout
};

struct PlanInput {
  std::string kernel_release;  ///< NodeEnvironment kernel.version
  bool strict_arp = false;
  int64_t tcp_timeout_s = 0, tcp_fin_timeout_s = 0, udp_timeout_s = 0;
};

NodePlan node_plan(const Program& prog, const PlanInput& in);

}  // namespace kpc::ipvs
