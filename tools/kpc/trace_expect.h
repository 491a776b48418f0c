// What `kpc trace` does the same for every back end (cmd_trace.cpp for iptables, cmd_trace_nft.cpp
// for nft): the CI assertions `--expect-dnat/--expect-verdict/--expect-masquerade` on a traced packet
// (each tracer reduces its outcomes to OutcomeFacts and this decides and reports), and the packet
// option values both read and print (marks).
#pragma once

#include <cstdint>
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

/// A 32-bit value as strtoul reads it (decimal, 0x hex, 0 octal), the whole text; false otherwise.
bool parse_u32(const std::string& s, uint32_t* v);
/// A mark as the tracers print it ("0x4000").
std::string hex(uint32_t v);

}  // namespace kpc::cli
