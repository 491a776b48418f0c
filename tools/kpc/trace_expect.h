// `kpc trace --expect-dnat/--expect-verdict/--expect-masquerade`: the CI assertions on a traced
// packet, the same for every back end (cmd_trace.cpp for iptables, cmd_trace_nft.cpp for nft):
// each tracer reduces its outcomes to OutcomeFacts and this decides and reports.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kpc::cli {

struct TraceExpectations {
  std::vector<std::string> dnat;  ///< the exact set of DNAT destinations ("ip:port")
  std::string verdict;            ///< every outcome's verdict (ACCEPT, DROP, REJECT)
  std::string masquerade;         ///< "yes" / "no", for every outcome
  bool any() const { return !dnat.empty() || !verdict.empty() || !masquerade.empty(); }
};

/// What the assertions look at in one outcome.
struct OutcomeFacts {
  std::string verdict;  ///< as printed (ACCEPT, DROP, REJECT, UNKNOWN)
  bool unknown = false;
  std::string unknown_reason;
  std::optional<std::string> dnat;  ///< "ip:port"
  bool masquerade = false;
  std::string probability;  ///< exact fraction, for the report
};

/// kExitOk when nothing is asserted or every assertion holds for every outcome (an Unknown outcome
/// meets none); otherwise prints each unmet one ("kpc trace: expectation not met: ...") and
/// returns kExitDifferent.
int check_expectations(const TraceExpectations& want, const std::vector<OutcomeFacts>& outcomes);

}  // namespace kpc::cli
