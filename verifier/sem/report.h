// Reports of a behavioural comparison, whatever the modes compared: `kpc diff`'s text,
// JSON and Markdown, grouped by service ("ns/name:port", named on the witnesses' paths:
// iptables rule comments, nft chain names and element comments), and the pieces
// `kpc verify` reuses for iptables and nft alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "verifier/sem/compare.h"

namespace kpc::verifier::sem {

/// The one JSON shape of a probability in every kpc document (docs/schemas.md, schemas/output/
/// common.schema.json#/$defs/probability): {"percent": 33.3333 (rounded to 4 decimals, for
/// people), "fraction": "1431655765/4294967296" (exact, lowest terms; "N/2^K" past 2^1024),
/// "numerator": "1431655765" (decimal string: may exceed 64 bits), "denominator_log2": 32,
/// "decimal": "0.3333333333" (10 digits, truncated)}.
nlohmann::ordered_json probability_json(const Probability& p);
nlohmann::ordered_json share_json(const OutcomeShare& s);
nlohmann::ordered_json difference_json(const Difference& d, const char* before_name, const char* after_name);

struct ReportOptions {
  const char* before_name = "before";
  const char* after_name = "after";
  size_t max_per_service = 4;  ///< text only; JSON lists every difference kept
  bool paths = true;           ///< the most likely path on each side, first class of each service (text)
  /// Text: also the comparison's own words (destination atoms, start classes, leaves), each
  /// class's description and the paths. Off, the text is for a reviewer: by Service, witnesses
  /// and outcomes (`--verbose` of diff, verify and drift).
  bool verbose = false;
};
std::string diff_text(const CompareResult& r, const ReportOptions& o = {});
/// `kpc verify`'s packet-level part of its text (iptables and nft alike): the count of classes
/// treated differently, the service summary, up to ten witnesses with the full program's and the
/// partial's outcomes, and any self-check failure.
std::string verify_behaviour_text(const CompareResult& b, bool verbose);
/// What changed for each Service, in words (endpoints added/removed, shares before -> after, verdict,
/// masquerading, affinity), from its first decided class; the start of diff_text.
std::string service_summary(const CompareResult& r, const ReportOptions& o = {});
/// The same, one entry per Service in service_summary's order (`kpc golden`'s tables).
struct ServiceChange {
  std::string service;  ///< "ns/name:port", or "(no service)"
  size_t classes = 0, undecided = 0;
  std::string words;  ///< "endpoint removed 10.244.2.6:8080; shares 50.0% 50.0% -> 100.0%"
};
std::vector<ServiceChange> service_changes(const CompareResult& r, const ReportOptions& o = {});
std::string diff_json(const CompareResult& r, const ReportOptions& o = {});
nlohmann::ordered_json diff_json_object(const CompareResult& r, const ReportOptions& o = {});
/// A PR-comment-sized Markdown report: a table by service (classes, an example packet, its
/// outcomes before and after with percentages), the text report in a collapsible block.
std::string diff_markdown(const CompareResult& r, const ReportOptions& o = {});
/// The differences grouped by the first service each is filed under, in order of appearance.
std::vector<std::pair<std::string, std::vector<const Difference*>>> differences_by_service(const CompareResult& r);

}  // namespace kpc::verifier::sem
