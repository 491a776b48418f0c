#include "compiler/support/diag.h"

#include <algorithm>
#include <tuple>

#include "compiler/support/text.h"

namespace kpc {

const std::vector<DiagInfo>& diag_catalog() {
  static const std::vector<DiagInfo> catalog = {
#define KPC_DIAG(id, code, name, meaning) {DiagCode::id, code, name, meaning},
#include "compiler/support/diag_codes.def"
#undef KPC_DIAG
  };
  return catalog;
}

const DiagInfo& diag_info(DiagCode id) { return diag_catalog()[static_cast<size_t>(id)]; }

bool DiagSink::has_errors() const { return error_count() > 0; }

size_t DiagSink::error_count() const {
  return static_cast<size_t>(
      std::count_if(diags_.begin(), diags_.end(), [](const Diagnostic& d) { return !is_warning(d.code); }));
}

void DiagSink::sort_and_dedup() {
  auto key = [](const Diagnostic& d) {
    return std::tie(d.pos.file, d.pos.line, d.pos.col, d.code, d.object, d.path, d.message);
  };
  std::stable_sort(diags_.begin(), diags_.end(),
                   [&](const Diagnostic& a, const Diagnostic& b) { return key(a) < key(b); });
  diags_.erase(std::unique(diags_.begin(), diags_.end(),
                           [&](const Diagnostic& a, const Diagnostic& b) { return key(a) == key(b); }),
               diags_.end());
}

std::string render(const Diagnostic& d, const SourceManager& sm) {
  // File names (any byte but '/' and NUL), object names, paths and messages can all quote
  // hostile input: never let them break the line, and never let one value flood it.
  auto safe = [](std::string_view s) { return printable_capped(s, kMaxDiagFieldBytes); };
  std::string out;
  if (d.pos.known()) {
    out += safe(sm.name(d.pos.file)) + ":" + std::to_string(d.pos.line) + ":" + std::to_string(d.pos.col) + ": ";
  }
  const DiagInfo& info = diag_info(d.code);
  out += is_warning(d.code) ? "warning[" : "error[";
  out += info.code;
  out += "]: ";
  if (!d.object.empty()) out += safe(d.object) + ": ";
  if (!d.path.empty()) out += safe(d.path) + ": ";
  out += safe(d.message);
  for (const auto& n : d.notes) out += "\n  note: " + safe(n);
  return out;
}

std::string DiagSink::render(const SourceManager& sm) const {
  std::string out;
  for (const auto& d : diags_) out += kpc::render(d, sm) + "\n";
  return out;
}

}  // namespace kpc
