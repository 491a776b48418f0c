// `kpc drift`'s reports: text (a summary by Service in words, then the chains, the
// jumps and the packet-level detail), JSON (schema kpc.dev/drift/v1) and Markdown (a
// PR-comment-sized table by Service, the detail in a collapsible block).
#pragma once

#include <string>

#include "applier/core/drift.h"

namespace kpc::applier {

struct DriftReportContext {
  std::string snapshot, state;  ///< what was compared (as the user named them)
  std::string backend, flavor;
  std::vector<IPAddr> local_addresses;
  /// Text: also every rule that differs and the comparison's own words (`kpc drift --verbose`);
  /// off, chains are listed with their counts.
  bool verbose = false;
};

std::string drift_text(const DriftReport& r, const DriftReportContext& c);
std::string drift_json(const DriftReport& r, const DriftReportContext& c);
std::string drift_markdown(const DriftReport& r, const DriftReportContext& c);

}  // namespace kpc::applier
