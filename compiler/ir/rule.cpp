#include "compiler/ir/rule.h"

#include "compiler/support/text.h"

namespace kpc::ir {

const char* table_name(TableId t) {
  switch (t) {
    case TableId::Filter: return "filter";
    case TableId::Nat: return "nat";
    case TableId::Mangle: return "mangle";
    case TableId::Raw: return "raw";
    case TableId::Security: return "security";
  }
  return "?";
}

std::optional<TableId> table_from_name(std::string_view s) {
  for (auto t : {TableId::Filter, TableId::Nat, TableId::Mangle, TableId::Raw, TableId::Security})
    if (s == table_name(t)) return t;
  return std::nullopt;
}

const std::vector<std::string>& builtin_chains(TableId t) {
  static const std::vector<std::string> filter = {"INPUT", "FORWARD", "OUTPUT"};
  static const std::vector<std::string> nat = {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"};
  static const std::vector<std::string> mangle = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"};
  static const std::vector<std::string> raw = {"PREROUTING", "OUTPUT"};
  static const std::vector<std::string> security = {"INPUT", "FORWARD", "OUTPUT"};
  switch (t) {
    case TableId::Filter: return filter;
    case TableId::Nat: return nat;
    case TableId::Mangle: return mangle;
    case TableId::Raw: return raw;
    case TableId::Security: return security;
  }
  return filter;
}

bool is_builtin_chain(TableId t, std::string_view chain) {
  for (const auto& c : builtin_chains(t))
    if (c == chain) return true;
  return false;
}

namespace {
struct CtName {
  uint32_t bit;
  const char* name;
};
// iptables' print order (libxt_conntrack).
constexpr CtName kCtNames[] = {{kCtInvalid, "INVALID"}, {kCtNew, "NEW"},           {kCtRelated, "RELATED"},
                               {kCtEstablished, "ESTABLISHED"}, {kCtUntracked, "UNTRACKED"}, {kCtSnat, "SNAT"},
                               {kCtDnat, "DNAT"}};
}  // namespace

std::optional<uint32_t> parse_ctstate(std::string_view s) {
  uint32_t mask = 0;
  for (auto part : split(s, ',')) {
    bool found = false;
    for (const auto& n : kCtNames)
      if (part == n.name) mask |= n.bit, found = true;
    if (!found) return std::nullopt;
  }
  return mask;
}

std::string ctstate_text(uint32_t mask) {
  std::string out;
  for (const auto& n : kCtNames)
    if (mask & n.bit) {
      if (!out.empty()) out += ',';
      out += n.name;
    }
  return out;
}

}  // namespace kpc::ir
