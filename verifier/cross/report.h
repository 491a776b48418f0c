// The cross-mode report (compare.h) as text (a reviewer's: by Service, then the known
// differences), JSON (schemas/output/diff-cross.schema.json, without the "schema" and
// "diagnostics" keys the tool adds) and Markdown (a PR-comment-sized table by Service).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "verifier/cross/compare.h"

namespace kpc::verifier::cross {

struct ReportOptions {
  std::string name_a = "A", name_b = "B";  ///< the inputs as the user named them
  bool show_known = false;  ///< list every known difference, with its count, source and an example
  bool verbose = false;     ///< every differing packet, and what the check covers
  size_t max_examples = 5;  ///< surprises shown per Service (text/markdown) unless verbose
};

std::string cross_text(const CrossResult& r, const ReportOptions& o);
std::string cross_markdown(const CrossResult& r, const ReportOptions& o);
nlohmann::ordered_json cross_json(const CrossResult& r, const ReportOptions& o);

/// What the check covers, in one paragraph (text and docs use the same words).
extern const char* const kCoverageNote;
/// What the by-class engine (by_class.h, CrossResult::per_class) covers.
extern const char* const kClassCoverageNote;
/// Added when the space held first packets only (an IPVS side: PacketSpace::first_packets_only).
extern const char* const kFirstPacketsNote;

}  // namespace kpc::verifier::cross
