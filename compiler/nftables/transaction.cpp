#include "compiler/nftables/transaction.h"

#include <cstdio>

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

void Transaction::add_table(std::optional<std::string> comment) {
  Operation op;
  op.kind = ObjectKind::Table;
  op.comment = std::move(comment);
  ops.push_back(std::move(op));
}

void Transaction::delete_table() {
  Operation op;
  op.verb = Verb::Delete;
  op.kind = ObjectKind::Table;
  ops.push_back(std::move(op));
}

void Transaction::add_chain(std::string name, std::optional<BaseChainSpec> base, std::optional<std::string> comment) {
  Operation op;
  op.kind = ObjectKind::Chain;
  op.name = std::move(name);
  op.base = std::move(base);
  op.comment = std::move(comment);
  ops.push_back(std::move(op));
}

void Transaction::flush_chain(std::string name) {
  Operation op;
  op.verb = Verb::Flush;
  op.kind = ObjectKind::Chain;
  op.name = std::move(name);
  ops.push_back(std::move(op));
}

void Transaction::delete_chain(std::string name) {
  Operation op;
  op.verb = Verb::Delete;
  op.kind = ObjectKind::Chain;
  op.name = std::move(name);
  ops.push_back(std::move(op));
}

void Transaction::add_rule(std::string chain, std::string body, std::optional<std::string> comment) {
  Operation op;
  op.kind = ObjectKind::Rule;
  op.name = std::move(chain);
  op.body = std::move(body);
  op.comment = std::move(comment);
  ops.push_back(std::move(op));
}

void Transaction::add_set(bool is_map, std::string name, std::string type, std::string flags,
                          std::optional<int64_t> timeout_seconds, std::optional<std::string> comment) {
  Operation op;
  op.kind = is_map ? ObjectKind::Map : ObjectKind::Set;
  op.name = std::move(name);
  op.body = std::move(type);
  op.flags = std::move(flags);
  op.timeout_seconds = timeout_seconds;
  op.comment = std::move(comment);
  ops.push_back(std::move(op));
}

void Transaction::flush_set(bool is_map, std::string name) {
  Operation op;
  op.verb = Verb::Flush;
  op.kind = is_map ? ObjectKind::Map : ObjectKind::Set;
  op.name = std::move(name);
  ops.push_back(std::move(op));
}

void Transaction::delete_set(bool is_map, std::string name) {
  Operation op;
  op.verb = Verb::Delete;
  op.kind = is_map ? ObjectKind::Map : ObjectKind::Set;
  op.name = std::move(name);
  ops.push_back(std::move(op));
}

void Transaction::add_element(bool is_map, std::string container, std::string key, std::string value,
                              std::optional<std::string> comment) {
  Operation op;
  op.kind = ObjectKind::Element;
  op.name = std::move(container);
  op.body = std::move(key);
  op.value = std::move(value);
  op.comment = std::move(comment);
  (void)is_map;  // the element syntax is the same; a value makes it a map element
  ops.push_back(std::move(op));
}

void Transaction::delete_element(bool is_map, std::string container, std::string key) {
  Operation op;
  op.verb = Verb::Delete;
  op.kind = ObjectKind::Element;
  op.name = std::move(container);
  op.body = std::move(key);
  (void)is_map;
  ops.push_back(std::move(op));
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
  out += verb_name(op.verb);
  out += ' ';
  out += object_kind_name(op.kind);
  out += ' ';
  out += table_family_name(tx.family);
  out += ' ';
  out += tx.table;
  bool adds = op.verb == Verb::Add || op.verb == Verb::Create;
  switch (op.kind) {
    case ObjectKind::Table:
      if (adds && op.comment) {
        out += " { comment ";
        append_go_quoted(out, *op.comment);
        out += " ; }";
      }
      break;
    case ObjectKind::Chain:
      out += ' ';
      out += op.name;
      if (adds && (op.base || op.comment)) {
        out += " {";
        if (op.base) {
          out += " type " + op.base->type + " hook " + op.base->hook + " priority " + std::to_string(op.base->priority) +
                 " ;";
        }
        if (op.comment) {
          out += " comment ";
          append_go_quoted(out, *op.comment);
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
        if (op.comment) {
          out += " comment ";
          append_go_quoted(out, *op.comment);
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
        if (!op.flags.empty()) out += " flags " + op.flags + " ;";
        if (op.timeout_seconds) out += " timeout " + std::to_string(*op.timeout_seconds) + "s ;";
        if (op.comment) {
          out += " comment ";
          append_go_quoted(out, *op.comment);
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
        if (op.comment) {
          out += " comment ";
          append_go_quoted(out, *op.comment);
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
  std::string out;
  out.reserve(tx.ops.size() * 96);
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
