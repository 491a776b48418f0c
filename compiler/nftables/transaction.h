// The nftables back end's program: a transaction, i.e. the ordered operations kube-proxy's
// nftables proxier queues on a knftables.Transaction and hands to `nft -f -` in one run.
// Operations name objects of one table (family + name fixed per transaction); rule bodies
// are nft statement text built from validated values only (addresses, ports, DNS-label
// names, kube-proxy's own words), so no object can inject syntax (see lower.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/net.h"

namespace kpc::nftables {

enum class Verb : uint8_t { Add, Create, Insert, Replace, Flush, Delete };
enum class ObjectKind : uint8_t { Table, Chain, Rule, Set, Map, Element, Flowtable };

const char* verb_name(Verb v);         ///< "add"
const char* object_kind_name(ObjectKind k);  ///< "chain"

/// A base chain's hook. The priority is a number, as knftables writes it (ParsePriority).
struct BaseChainSpec {
  std::string_view type;  ///< "filter", "nat"
  std::string_view hook;  ///< "prerouting", ...
  int priority = 0;
};

/// One operation. Which fields matter depends on the kind:
///  Table:     comment
///  Chain:     name, comment; base chains: body (type), value (hook), priority
///  Rule:      name (the chain), body (statements), comment
///  Set/Map:   name, body (type), value (flags, "dynamic,timeout"), timeout_seconds, comment
///  Element:   name (set or map), body (key, parts joined by " . "), value (maps), comment
///  Flowtable: name, body (hook spec, e.g. "hook ingress priority 0 ; devices = { eth0 }")
/// The text lives in the transaction's arena, and the fields are shared between kinds to
/// keep an operation at 80 bytes: a 10,000-Service sync has ~600,000 of them.
struct Operation {
  Verb verb = Verb::Add;
  ObjectKind kind = ObjectKind::Table;
  bool has_comment = false;
  bool has_base = false;
  int32_t priority = 0;          ///< base chains
  int64_t timeout_seconds = -1;  ///< sets: -1 none
  std::string_view name, body, value, comment;

  BaseChainSpec base() const { return {body, value, priority}; }
  std::string_view set_flags() const { return value; }
};

/// Stable storage for operation text (blocks never move).
class TextArena {
 public:
  TextArena() = default;
  TextArena(TextArena&&) noexcept = default;
  TextArena& operator=(TextArena&&) noexcept = default;
  TextArena(const TextArena&) = delete;
  TextArena& operator=(const TextArena&) = delete;
  /// A copy of s that lives as long as the arena (s itself when it already lives in the
  /// arena's current block, as a name stored once and used by several operations does).
  std::string_view store(std::string_view s);

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t used_ = 0, capacity_ = 0;
};

enum class TableFamily : uint8_t { Ip, Ip6, Inet };
const char* table_family_name(TableFamily f);  ///< "ip", "ip6", "inet"
inline TableFamily table_family_of(IPFamily f) { return f == IPFamily::V4 ? TableFamily::Ip : TableFamily::Ip6; }

class Transaction {
 public:
  TableFamily family = TableFamily::Ip;
  std::string table = "kube-proxy";
  std::vector<Operation> ops;

  Transaction() = default;
  Transaction(Transaction&&) noexcept = default;
  Transaction& operator=(Transaction&&) noexcept = default;
  Transaction(const Transaction& other);  ///< deep: the copy owns its text
  Transaction& operator=(const Transaction& other);

  /// knftables' Transaction.NumOperations().
  size_t num_operations() const { return ops.size(); }
  bool empty() const { return ops.empty(); }

  // Builders, named after knftables' calls. Every text argument is copied.
  void add_table(std::optional<std::string_view> comment);
  void delete_table();
  void add_chain(std::string_view name, std::optional<BaseChainSpec> base = std::nullopt,
                 std::optional<std::string_view> comment = std::nullopt);
  void flush_chain(std::string_view name);
  void delete_chain(std::string_view name);
  void add_rule(std::string_view chain, std::string_view body, std::optional<std::string_view> comment = std::nullopt);
  /// Sets and maps share the spec; `is_map` picks the keyword.
  void add_set(bool is_map, std::string_view name, std::string_view type, std::string_view flags = {},
               std::optional<int64_t> timeout_seconds = std::nullopt,
               std::optional<std::string_view> comment = std::nullopt);
  void flush_set(bool is_map, std::string_view name);
  void delete_set(bool is_map, std::string_view name);
  void add_element(bool is_map, std::string_view container, std::string_view key, std::string_view value = {},
                   std::optional<std::string_view> comment = std::nullopt);
  void delete_element(bool is_map, std::string_view container, std::string_view key);
  /// Appends a copy of an operation (its text copied into this transaction).
  void append(const Operation& op);
  /// Text that lives as long as the transaction: a name stored once here and passed to
  /// several builders is not copied again.
  std::string_view intern(std::string_view s) { return arena_.store(s); }

 private:
  Operation& push(Verb v, ObjectKind k, std::string_view name);
  TextArena arena_;
};

/// The transaction as knftables writes it for `nft -f -` (Transaction.String()): one command
/// per line, each ending in "\n".
std::string print_transaction(const Transaction& tx);
/// Appends one operation's line.
void print_operation(const Transaction& tx, const Operation& op, std::string& out);

/// Go's %q for the strings kube-proxy puts in comments (ASCII printable is copied, '"' and
/// '\\' escaped, anything else as Go escapes it), so a comment can never end early.
void append_go_quoted(std::string& out, std::string_view s);

/// Operation counts by kind and verb, for --stats.
struct TransactionStats {
  size_t operations = 0;
  size_t chains_added = 0, chains_flushed = 0, chains_deleted = 0;
  size_t rules = 0;
  size_t elements_added = 0, elements_deleted = 0;
  size_t sets_added = 0, sets_deleted = 0;
};
TransactionStats transaction_stats(const Transaction& tx);

}  // namespace kpc::nftables
