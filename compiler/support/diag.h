// Diagnostics: located, coded, sorted. Library code never prints; it records
// Diagnostic values in a DiagSink, and the tool prints them once, sorted by
// location, in the form
//   FILE:LINE:COL: error[E0300]: Service ns/name: spec.ports[1].port: 70000 is out of range 1-65535
// The code catalog lives in diag_codes.def (and docs/diagnostics.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/source.h"

namespace kpc {

enum class DiagCode {
#define KPC_DIAG(id, code, name, meaning) id,
#include "compiler/support/diag_codes.def"
#undef KPC_DIAG
};

struct DiagInfo {
  DiagCode id;
  std::string_view code;     ///< "E0300"
  std::string_view name;     ///< "port-out-of-range"
  std::string_view meaning;  ///< one line for docs
};

/// The whole catalog, in declaration order.
const std::vector<DiagInfo>& diag_catalog();
const DiagInfo& diag_info(DiagCode id);
inline bool is_warning(DiagCode id) { return diag_info(id).code[0] == 'W'; }

struct Diagnostic {
  DiagCode code;
  Pos pos;              ///< where; may be unknown
  std::string object;   ///< "Service default/web" (empty if not about one object)
  std::string path;     ///< "spec.ports[1].port" (empty if the whole object/file)
  std::string message;  ///< "70000 is out of range 1-65535"
  std::vector<std::string> notes;  ///< extra lines ("note: first defined at ...")
};

/// Collects diagnostics. Cheap to pass by reference through every stage.
class DiagSink {
 public:
  void report(Diagnostic d) { diags_.push_back(std::move(d)); }
  void report(DiagCode code, Pos pos, std::string object, std::string path, std::string message) {
    report(Diagnostic{code, pos, std::move(object), std::move(path), std::move(message), {}});
  }
  bool has_errors() const;
  size_t error_count() const;
  const std::vector<Diagnostic>& all() const { return diags_; }
  /// Sorts by (file, line, col, code, path) and removes exact duplicates.
  void sort_and_dedup();
  /// Renders every diagnostic, one per line (plus note lines).
  std::string render(const SourceManager& sm) const;

 private:
  std::vector<Diagnostic> diags_;
};

/// Renders one diagnostic without a trailing newline.
std::string render(const Diagnostic& d, const SourceManager& sm);

}  // namespace kpc
