// A located document tree: what the YAML and JSON readers produce and the
// decoder consumes. It is the only generic tree in kpc; no yaml-cpp or nlohmann
// type leaves the readers. Every node and every mapping key carries its Pos so
// that any field can be reported as FILE:LINE:COL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/diag.h"
#include "compiler/support/source.h"

namespace kpc {

struct DocNode {
  enum class Kind : uint8_t { Null, Bool, Int, Float, String, Seq, Map };
  struct Key {
    std::string name;
    Pos pos;
  };

  Kind kind = Kind::Null;
  Pos pos;
  std::string text;             ///< scalars: the value (strings unescaped; numbers as written)
  std::vector<DocNode> items;   ///< Seq: elements; Map: values (parallel to keys)
  std::vector<Key> keys;        ///< Map only

  bool is_map() const { return kind == Kind::Map; }
  bool is_seq() const { return kind == Kind::Seq; }
  bool is_null() const { return kind == Kind::Null; }
  bool is_scalar() const { return kind != Kind::Seq && kind != Kind::Map; }
  /// Map lookup by key; nullptr when absent (or when this is not a map).
  const DocNode* get(std::string_view key) const;
  /// Position of a key in a map (the node's own position if absent).
  Pos key_pos(std::string_view key) const;
  /// Number of nodes in this subtree (used to bound alias expansion).
  size_t subtree_size() const;
};

const char* kind_name(DocNode::Kind k);

/// The second occurrence of a repeated key in a map, or nullptr. O(n log n).
const DocNode::Key* find_duplicate_key(const DocNode& map);

/// Limits that keep hostile input bounded (issue 2: alias bombs, deep nesting, huge files).
struct ReadLimits {
  size_t max_depth = 64;               ///< Kubernetes objects nest < 20 deep
  size_t max_nodes = 50'000'000;       ///< total nodes per file, after alias expansion
  size_t max_alias_nodes = 1'000'000;  ///< nodes created by alias expansion per file
  /// Text bytes (scalar values and mapping keys) created by alias expansion per file.
  /// The node limit alone lets one big scalar aliased many times expand a small file
  /// into gigabytes. The effective limit is the larger of this and
  /// kAliasBytesPerInputByte x the file's size: aliases may copy up to twice the file's
  /// own text, and always at least 16 MiB (E0013 when exceeded).
  size_t max_alias_bytes = size_t{16} << 20;
  static constexpr size_t kAliasBytesPerInputByte = 2;
};

/// Parses one JSON value. On error reports E0011/E0012 and returns false.
bool read_json(const SourceManager& sm, uint32_t file, const ReadLimits& limits, DocNode* out,
               DiagSink& diags);

/// Parses a YAML stream (one or more documents). On error reports E0010/E0012/E0013/E0014
/// and returns false. Empty documents are dropped.
bool read_yaml(const SourceManager& sm, uint32_t file, const ReadLimits& limits,
               std::vector<DocNode>* out, DiagSink& diags);

/// The yaml-cpp reader alone (read_yaml without its fast path): the reference that
/// read_yaml_fast is checked against, and its fallback. Same contract as read_yaml.
bool read_yaml_reference(const SourceManager& sm, uint32_t file, const ReadLimits& limits,
                         std::vector<DocNode>* out, DiagSink& diags);

/// Fast path for the YAML that kubectl prints and people write for Kubernetes (block
/// maps and sequences, single-line plain and quoted scalars, literal block scalars,
/// one-line flow collections; see doc_yaml_fast.cpp for the exact subset). Either produces exactly what
/// read_yaml_reference would (same trees, positions, diagnostics and return value) and
/// sets *declined = false, or meets something outside its subset, sets *declined = true
/// and leaves *out and diags untouched, so the caller can fall back to the reference.
bool read_yaml_fast(const SourceManager& sm, uint32_t file, const ReadLimits& limits,
                    std::vector<DocNode>* out, DiagSink& diags, bool* declined);

/// Why the last read_yaml_fast call on this thread declined ("LINE:COL: reason"), or "".
std::string yaml_fast_decline_reason();

/// Kind of an untagged plain scalar that is not null (YAML 1.1 as go-yaml v2 types it,
/// restricted to what the API can carry). Shared by both YAML readers.
DocNode::Kind resolve_plain_scalar(std::string_view v);

/// The plain-scalar spellings yaml-cpp reads as null: "", "~", "null", "Null", "NULL".
bool is_yaml_null_plain(std::string_view v);

}  // namespace kpc
