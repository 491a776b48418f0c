// iptables-save's output for a simulated state, per flavour, and the reverse:
// a state from a save dump.
#include <algorithm>

#include "verifier/state/state.h"

namespace kpc::verifier {

void print_table_save(std::string& out, const TableState& table, const RuleStore& store) {
  out += '*';
  out += ir::table_name(table.id);
  out += '\n';
  auto order = table.save_order();
  for (const Chain* c : order) {
    out += ':';
    out += c->name;
    out += ' ';
    out += c->policy;
    out += " [0:0]\n";
  }
  for (const Chain* c : order)
    for (uint32_t id : c->rules) {
      out += "-A ";
      out += c->name;
      out += store.text(id);
      out += '\n';
    }
  out += "COMMIT\n";
}

std::string print_save(const RulesetState& state, Flavor flavor) {
  std::vector<const TableState*> tables;
  for (const auto& t : state.tables)
    if (t.present) tables.push_back(&t);
  if (flavor == Flavor::Legacy) {
    // The kernel lists tables newest first (xt tables are added at the list head).
    std::sort(tables.begin(), tables.end(),
              [](const TableState* a, const TableState* b) { return a->instantiated > b->instantiated; });
  } else {
    // iptables-nft-save walks its own table array: mangle, security, raw, filter, nat.
    auto rank = [](ir::TableId id) {
      switch (id) {
        case ir::TableId::Mangle: return 0;
        case ir::TableId::Security: return 1;
        case ir::TableId::Raw: return 2;
        case ir::TableId::Filter: return 3;
        case ir::TableId::Nat: return 4;
      }
      return 5;
    };
    std::sort(tables.begin(), tables.end(),
              [&](const TableState* a, const TableState* b) { return rank(a->id) < rank(b->id); });
  }
  std::string out;
  size_t rules = 0;
  for (const auto* t : tables) rules += t->rule_count();
  out.reserve(rules * 120 + 256);
  for (const auto* t : tables) {
    print_table_save(out, *t, *state.store);
  }
  return out;
}

bool load_save(std::string_view text, IPFamily family, Flavor flavor, RulesetState& out, std::string* error,
               std::shared_ptr<RuleStore> store) {
  out = RulesetState::empty(family, std::move(store));
  // A dump is loaded as a restore without --noflush: what was printed is what exists
  // (tables, policies, chains). Legacy semantics keep policies and create each table at "*table".
  ApplyOptions ao;
  ao.noflush = false;
  ao.flavor = Flavor::Legacy;
  ao.discard_on_failure = true;  // a dump that does not load leaves no state worth keeping
  ParseError perr;
  ApplyResult r = apply_text(out, text, ao, &perr);
  if (!r.ok()) {
    if (error) *error = "line " + std::to_string(r.error->line) + ": " + r.error->reason;
    return false;
  }
  for (auto& t : out.tables)
    for (Chain& c : t.chains) c.materialized = true;  // what a dump shows is taken to exist
  if (flavor == Flavor::Legacy) {
    // Save printed the newest table first: the first table of the dump is the newest.
    uint64_t n = out.next_instantiation;
    for (auto& t : out.tables)
      if (t.present) t.instantiated = n - t.instantiated;
  }
  return true;
}

}  // namespace kpc::verifier
