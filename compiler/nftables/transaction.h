// The nftables back end's program: a transaction, i.e. the ordered operations kube-proxy's
// nftables proxier queues on a knftables.Transaction and hands to `nft -f -` in one run.
// Operations name objects of one table (family + name fixed per transaction); rule bodies
// are nft statement text built from validated values only (addresses, ports, DNS-label
// names, kube-proxy's own words), so no object can inject syntax (see lower.cpp).
#pragma once

#include <cstdint>
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
  std::string type;  ///< "filter", "nat"
  std::string hook;  ///< "prerouting", ...
  int priority = 0;
};

/// One operation. Which fields matter depends on the kind:
///  Table:   comment
///  Chain:   name, base, comment
///  Rule:    name (the chain), body (statements), comment
///  Set/Map: name, body (type), flags, timeout_seconds, comment
///  Element: name (set or map), body (key, parts joined by " . "), value (maps), comment
///  Flowtable: name, body (hook spec, e.g. "hook ingress priority 0 ; devices = { eth0 }")
struct Operation {
  Verb verb = Verb::Add;
  ObjectKind kind = ObjectKind::Table;
  std::string name;
  std::string body;
  std::string value;
  std::optional<std::string> comment;
  std::optional<BaseChainSpec> base;
  std::string flags;                      ///< "dynamic,timeout"
  std::optional<int64_t> timeout_seconds;
};

enum class TableFamily : uint8_t { Ip, Ip6, Inet };
const char* table_family_name(TableFamily f);  ///< "ip", "ip6", "inet"
inline TableFamily table_family_of(IPFamily f) { return f == IPFamily::V4 ? TableFamily::Ip : TableFamily::Ip6; }

struct Transaction {
  TableFamily family = TableFamily::Ip;
  std::string table = "kube-proxy";
  std::vector<Operation> ops;

  /// knftables' Transaction.NumOperations().
  size_t num_operations() const { return ops.size(); }
  bool empty() const { return ops.empty(); }

  // Builders, named after knftables' calls.
  void add_table(std::optional<std::string> comment);
  void delete_table();
  void add_chain(std::string name, std::optional<BaseChainSpec> base = std::nullopt,
                 std::optional<std::string> comment = std::nullopt);
  void flush_chain(std::string name);
  void delete_chain(std::string name);
  void add_rule(std::string chain, std::string body, std::optional<std::string> comment = std::nullopt);
  /// Sets and maps share the spec; `is_map` picks the keyword.
  void add_set(bool is_map, std::string name, std::string type, std::string flags = {},
               std::optional<int64_t> timeout_seconds = std::nullopt, std::optional<std::string> comment = std::nullopt);
  void flush_set(bool is_map, std::string name);
  void delete_set(bool is_map, std::string name);
  void add_element(bool is_map, std::string container, std::string key, std::string value = {},
                   std::optional<std::string> comment = std::nullopt);
  void delete_element(bool is_map, std::string container, std::string key);
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
