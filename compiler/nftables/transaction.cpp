#include "compiler/nftables/transaction.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace kpc::nftables {

const char* verb_name(Verb v) {
  switch (v) {
    case Verb::Add: return "add";
    case Verb::Create: return "create";
    case Verb::Insert: return "insert";
    case Verb::Replace: return "replace";
    case Verb::Flush: return "flush";
    case Verb::Delete: return "delete";
  }
  return "?";
}

const char* object_kind_name(ObjectKind k) {
  switch (k) {
    case ObjectKind::Table: return "table";
    case ObjectKind::Chain: return "chain";
    case ObjectKind::Rule: return "rule";
    case ObjectKind::Set: return "set";
    case ObjectKind::Map: return "map";
    case ObjectKind::Element: return "element";
    case ObjectKind::Flowtable: return "flowtable";
  }
  return "?";
}

const char* table_family_name(TableFamily f) {
  switch (f) {
    case TableFamily::Ip: return "ip";
    case TableFamily::Ip6: return "ip6";
    case TableFamily::Inet: return "inet";
  }
  return "?";
}

std::string_view TextArena::store(std::string_view s) {
  if (s.empty()) return {};
  if (!blocks_.empty()) {
    const char* begin = blocks_.back().get();
    if (s.data() >= begin && s.data() + s.size() <= begin + used_) return s;
  }
  if (used_ + s.size() > capacity_) {
    size_t size = std::max<size_t>(s.size(), 64 * 1024);
    blocks_.push_back(std::make_unique<char[]>(size));
    used_ = 0;
    capacity_ = size;
  }
  char* p = blocks_.back().get() + used_;
  std::memcpy(p, s.data(), s.size());
  used_ += s.size();
  return {p, s.size()};
}

Transaction::Transaction(const Transaction& other) : family(other.family), table(other.table) {
  ops.reserve(other.ops.size());
  for (const auto& op : other.ops) append(op);
}

Transaction& Transaction::operator=(const Transaction& other) {
  if (this != &other) {
    Transaction copy(other);
    *this = std::move(copy);
  }
  return *this;
}

void Transaction::append(const Operation& op) {
  Operation o = op;
  o.name = arena_.store(op.name);
  o.body = arena_.store(op.body);
  o.value = arena_.store(op.value);
  o.comment = arena_.store(op.comment);
  ops.push_back(o);
}

Operation& Transaction::push(Verb v, ObjectKind k, std::string_view name) {
  Operation& op = ops.emplace_back();
  op.verb = v;
  op.kind = k;
  op.name = arena_.store(name);
  return op;
}

void Transaction::add_table(std::optional<std::string_view> comment) {
  Operation& op = push(Verb::Add, ObjectKind::Table, {});
  if (comment) {
    op.has_comment = true;
    op.comment = arena_.store(*comment);
  }
}

void Transaction::delete_table() { push(Verb::Delete, ObjectKind::Table, {}); }

void Transaction::add_chain(std::string_view name, std::optional<BaseChainSpec> base,
                            std::optional<std::string_view> comment) {
  Operation& op = push(Verb::Add, ObjectKind::Chain, name);
  if (base) {
    op.has_base = true;
    op.body = arena_.store(base->type);
    op.value = arena_.store(base->hook);
    op.priority = base->priority;
  }
  if (comment) {
    op.has_comment = true;
    op.comment = arena_.store(*comment);
  }
}

void Transaction::flush_chain(std::string_view name) { push(Verb::Flush, ObjectKind::Chain, name); }
void Transaction::delete_chain(std::string_view name) { push(Verb::Delete, ObjectKind::Chain, name); }

void Transaction::add_rule(std::string_view chain, std::string_view body, std::optional<std::string_view> comment) {
  Operation& op = push(Verb::Add, ObjectKind::Rule, chain);
  op.body = arena_.store(body);
  if (comment) {
    op.has_comment = true;
    op.comment = arena_.store(*comment);
  }
}

void Transaction::add_set(bool is_map, std::string_view name, std::string_view type, std::string_view flags,
                          std::optional<int64_t> timeout_seconds, std::optional<std::string_view> comment) {
  Operation& op = push(Verb::Add, is_map ? ObjectKind::Map : ObjectKind::Set, name);
  op.body = arena_.store(type);
  op.value = arena_.store(flags);
  if (timeout_seconds) op.timeout_seconds = *timeout_seconds;
  if (comment) {
    op.has_comment = true;
    op.comment = arena_.store(*comment);
  }
}

void Transaction::flush_set(bool is_map, std::string_view name) {
  push(Verb::Flush, is_map ? ObjectKind::Map : ObjectKind::Set, name);
}

void Transaction::delete_set(bool is_map, std::string_view name) {
  push(Verb::Delete, is_map ? ObjectKind::Map : ObjectKind::Set, name);
}

// The element syntax is the same for sets and maps; a value makes it a map element.
void Transaction::add_element(bool, std::string_view container, std::string_view key, std::string_view value,
                              std::optional<std::string_view> comment) {
  Operation& op = push(Verb::Add, ObjectKind::Element, container);
  op.body = arena_.store(key);
  op.value = arena_.store(value);
  if (comment) {
    op.has_comment = true;
    op.comment = arena_.store(*comment);
  }
}

void Transaction::delete_element(bool, std::string_view container, std::string_view key) {
  Operation& op = push(Verb::Delete, ObjectKind::Element, container);
  op.body = arena_.store(key);
}

void append_go_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7F || c >= 0x80) {
          // Validated names never get here; escaped rather than trusted.
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void print_operation(const Transaction& tx, const Operation& op, std::string& out) {
  out.append(verb_name(op.verb)).append(" ").append(object_kind_name(op.kind)).append(" ");
  out.append(table_family_name(tx.family)).append(" ").append(tx.table);
  bool adds = op.verb == Verb::Add || op.verb == Verb::Create;
  switch (op.kind) {
    case ObjectKind::Table:
      if (adds && op.has_comment) {
        out += " { comment ";
        append_go_quoted(out, op.comment);
        out += " ; }";
      }
      break;
    case ObjectKind::Chain:
      out += ' ';
      out += op.name;
      if (adds && (op.has_base || op.has_comment)) {
        out += " {";
        if (op.has_base) {
          out.append(" type ").append(op.body).append(" hook ").append(op.value);
          out += " priority " + std::to_string(op.priority) + " ;";
        }
        if (op.has_comment) {
          out += " comment ";
          append_go_quoted(out, op.comment);
          out += " ;";
        }
        out += " }";
      }
      break;
    case ObjectKind::Rule:
      out += ' ';
      out += op.name;
      if (op.verb == Verb::Add || op.verb == Verb::Insert || op.verb == Verb::Replace) {
        out += ' ';
        out += op.body;
        if (op.has_comment) {
          out += " comment ";
          append_go_quoted(out, op.comment);
        }
      }
      break;
    case ObjectKind::Set:
    case ObjectKind::Map:
      out += ' ';
      out += op.name;
      if (adds) {
        out += " { type ";
        out += op.body;
        out += " ;";
        if (!op.set_flags().empty()) {
          out += " flags ";
          out += op.set_flags();
          out += " ;";
        }
        if (op.timeout_seconds >= 0) out += " timeout " + std::to_string(op.timeout_seconds) + "s ;";
        if (op.has_comment) {
          out += " comment ";
          append_go_quoted(out, op.comment);
          out += " ;";
        }
        out += " }";
      }
      break;
    case ObjectKind::Element:
      out += ' ';
      out += op.name;
      out += " { ";
      out += op.body;
      if (adds) {
        if (op.has_comment) {
          out += " comment ";
          append_go_quoted(out, op.comment);
        }
        if (!op.value.empty()) {
          out += " : ";
          out += op.value;
        }
      }
      out += " }";
      break;
    case ObjectKind::Flowtable:
      out += ' ';
      out += op.name;
      if (adds && !op.body.empty()) {
        out += " { ";
        out += op.body;
        out += " }";
      }
      break;
  }
  out += '\n';
}

std::string print_transaction(const Transaction& tx) {
  // Reserve enough for the whole text (the variable parts plus a bound on the fixed words),
  // so that a 75 MB transaction is written without reallocating.
  size_t size = 0;
  for (const auto& op : tx.ops) size += op.name.size() + op.body.size() + op.value.size() + op.comment.size();
  std::string out;
  out.reserve(size + tx.ops.size() * (48 + tx.table.size()));
  for (const auto& op : tx.ops) print_operation(tx, op, out);
  return out;
}

TransactionStats transaction_stats(const Transaction& tx) {
  TransactionStats s;
  s.operations = tx.ops.size();
  for (const auto& op : tx.ops) {
    switch (op.kind) {
      case ObjectKind::Chain:
        if (op.verb == Verb::Add) ++s.chains_added;
        else if (op.verb == Verb::Flush) ++s.chains_flushed;
        else if (op.verb == Verb::Delete) ++s.chains_deleted;
        break;
      case ObjectKind::Rule: ++s.rules; break;
      case ObjectKind::Element:
        if (op.verb == Verb::Delete) ++s.elements_deleted;
        else ++s.elements_added;
        break;
      case ObjectKind::Set:
      case ObjectKind::Map:
        if (op.verb == Verb::Add) ++s.sets_added;
        else if (op.verb == Verb::Delete) ++s.sets_deleted;
        break;
      default: break;
    }
  }
  return s;
}

}  // namespace kpc::nftables
