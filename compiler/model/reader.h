// ObjectReader: typed, located access to one object's DocNode tree. Each
// accessor checks the type, records the field's position in the object's
// FieldPositions and reports a located diagnostic on mismatch, so decoders read
// like a list of fields and never lose an error. Internal to the model module.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/model/doc.h"
#include "compiler/model/objects.h"
#include "compiler/support/diag.h"
#include "compiler/support/net.h"

namespace kpc {

/// "spec" + "ports" -> "spec.ports"; "" + "spec" -> "spec".
std::string join_path(std::string_view parent, std::string_view key);
/// "spec.ports" + 1 -> "spec.ports[1]".
std::string index_path(std::string_view parent, size_t i);

class ObjectReader {
 public:
  ObjectReader(std::string object, FieldPositions* fields, DiagSink& diags)
      : object_(std::move(object)), fields_(fields), diags_(diags) {}

  const std::string& object() const { return object_; }
  void set_object(std::string object) { object_ = std::move(object); }
  void error(DiagCode code, Pos pos, std::string path, std::string message);
  /// Records a field position the document does not spell out (e.g. the defaulted
  /// "spec.clusterIPs[0]" when only spec.clusterIP is written).
  void record(std::string path, Pos pos) {
    if (fields_) fields_->set(std::move(path), pos);
  }
  size_t errors() const { return errors_; }

  /// The child node of a map, or nullptr when absent or explicitly null.
  const DocNode* child(const DocNode* map, std::string_view key, const std::string& path);
  /// A child that must be a map / list (reports wrong-type otherwise and returns nullptr).
  const DocNode* map(const DocNode* parent, std::string_view key, const std::string& path);
  const DocNode* seq(const DocNode* parent, std::string_view key, const std::string& path);
  bool expect_map(const DocNode& n, const std::string& path);

  std::optional<std::string> str(const DocNode* parent, std::string_view key, const std::string& path);
  std::optional<int64_t> integer(const DocNode* parent, std::string_view key, const std::string& path,
                                 int64_t min, int64_t max, DiagCode range_code = DiagCode::InvalidEnum);
  std::optional<bool> boolean(const DocNode* parent, std::string_view key, const std::string& path);
  /// One string entry of a list, with its index in the list as written (non-string
  /// entries are reported and skipped, but never shift the index of later entries).
  struct ListEntry {
    size_t index;
    Pos pos;
    std::string value;
  };
  std::vector<ListEntry> str_list(const DocNode* parent, std::string_view key, const std::string& path);
  std::map<std::string, std::string> str_map(const DocNode* parent, std::string_view key, const std::string& path);

  /// Scalar conversions of a node already in hand (lists of strings, ...).
  std::optional<std::string> as_str(const DocNode& n, const std::string& path);

  /// Parses an IP; leading-zero IPv4 is accepted with a warning (kube-proxy reads it as decimal).
  std::optional<IPAddr> ip(const DocNode& n, const std::string& path);
  std::optional<IPAddr> ip_text(std::string_view text, Pos pos, const std::string& path);
  std::optional<CIDR> cidr_text(std::string_view text, Pos pos, const std::string& path);
  /// One value of an enumeration ("TCP", "UDP", "SCTP"), returned as its index.
  std::optional<size_t> enumeration(const DocNode* parent, std::string_view key, const std::string& path,
                                    std::initializer_list<const char*> values, DiagCode code);

  /// Strict decoding: reports every key of map not in known.
  void reject_unknown(const DocNode& map, const std::string& path, std::initializer_list<const char*> known);

 private:
  void wrong_type(const DocNode& n, const std::string& path, const char* expected);

  std::string object_;
  FieldPositions* fields_;
  DiagSink& diags_;
  size_t errors_ = 0;
};

}  // namespace kpc
