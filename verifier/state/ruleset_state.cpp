// RuleStore interning, table bookkeeping and state comparison.
#include <algorithm>
#include <cstring>

#include "compiler/ir/printer.h"
#include "compiler/support/text.h"
#include "verifier/state/state.h"

namespace kpc::verifier {

const char* flavor_name(Flavor f) { return f == Flavor::Legacy ? "legacy" : "nft"; }

const char* error_class_name(ErrorClass c) {
  switch (c) {
    case ErrorClass::Syntax: return "syntax";
    case ErrorClass::OutsideTable: return "outside-table";
    case ErrorClass::CommitExpected: return "commit-expected";
    case ErrorClass::UnknownTable: return "unknown-table";
    case ErrorClass::JumpToMissingChain: return "jump-to-missing-chain";
    case ErrorClass::JumpToBuiltinChain: return "jump-to-builtin-chain";
    case ErrorClass::NoSuchChain: return "no-such-chain";
    case ErrorClass::NoSuchRule: return "no-such-rule";
    case ErrorClass::IndexTooBig: return "index-too-big";
    case ErrorClass::ChainExists: return "chain-exists";
    case ErrorClass::ChainBusy: return "chain-busy";
    case ErrorClass::BadPolicy: return "bad-policy";
    case ErrorClass::Loop: return "loop";
    case ErrorClass::RenamedChain: return "renamed-chain";
    case ErrorClass::ToolCrash: return "tool-crash";
  }
  return "?";
}

uint32_t RuleStore::intern_text(std::string_view text, std::string_view jump, bool is_goto) {
  return intern_text(text, text_hash(text), jump, jump.empty() ? 0 : text_hash(jump), is_goto);
}

uint32_t RuleStore::intern_text(std::string_view text, uint64_t h, std::string_view jump, uint64_t jump_hash, bool is_goto) {
  index_.make_room_for_one();
  const TextTable::Probe p = index_.probe(text, h);
  if (p.value != TextTable::kNone) return p.value;
  uint32_t id = static_cast<uint32_t>(texts_.size());
  bool terminal = text == " -j ACCEPT" || text == " -j DROP" || text == " -j RETURN";
  texts_.push_back(keep(text));
  bool names_list = find_text(text, " --name ") != std::string_view::npos;
  index_.fill(p, texts_.back(), h, id);  // before name_id(): it touches only name_index_
  meta_.push_back(Meta{jump.empty() ? kNoName : name_id(jump, jump_hash), is_goto, terminal, names_list});
  return id;
}

RuleStore::RuleStore() {
  for (std::string_view name : kBuiltinNames) name_id(name);
}

uint32_t RuleStore::builtin_name_id(std::string_view name) {
  for (uint32_t i = 0; i < std::size(kBuiltinNames); ++i)
    if (kBuiltinNames[i] == name) return i;
  return kNoName;
}

uint32_t RuleStore::name_id(std::string_view name, uint64_t h) {
  name_index_.make_room_for_one();
  const TextTable::Probe p = name_index_.probe(name, h);
  if (p.value != TextTable::kNone) return p.value;
  uint32_t id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  name_index_.fill(p, names_.back(), h, id);
  return id;
}

uint32_t RuleStore::known_line(IPFamily family, ir::TableId table, std::string_view line, LineCursor* cursor) const {
  const size_t slot = line_slot(family, table);
  if (cursor->next < records_.size()) {
    const LineRecord& r = records_[cursor->next];
    if (r.slot == slot && r.size == line.size() && std::memcmp(r.data, line.data(), line.size()) == 0) {
      cursor->misses = 0;
      return cursor->next++;
    }
  }
  constexpr uint32_t kColdAfter = 64;
  if (cursor->misses >= kColdAfter && (cursor->misses++ & 15) != 0) return kNoRule;
  uint32_t rec = lines_[slot].find(line);
  if (rec == TextTable::kNone) {
    cursor->misses += cursor->misses < kColdAfter;
    return kNoRule;
  }
  cursor->next = rec + 1;
  cursor->misses = 0;
  return rec;
}

void RuleStore::remember_line(IPFamily family, ir::TableId table, std::string_view line, uint32_t id) {
  remember_line(family, table, line, text_hash(line), id, text_hash(line_chain_word(line)));
}

void RuleStore::remember_line(IPFamily family, ir::TableId table, std::string_view line, uint64_t h, uint32_t id,
                              uint64_t chain_hash) {
  const size_t slot = line_slot(family, table);
  TextTable& t = lines_[slot];
  t.make_room_for_one();
  const TextTable::Probe p = t.probe(line, h);
  if (p.value != TextTable::kNone) return;
  const std::string_view kept = keep(line);
  const auto rec = static_cast<uint32_t>(records_.size());
  t.fill(p, kept, h, rec);
  // Runs of lines append to one chain: most lines name the chain the last one did.
  std::string_view chain = line_chain_word(line);
  uint32_t chain_id = !records_.empty() && chain == names_[records_.back().chain] ? records_.back().chain
                                                                                    : name_id(chain, chain_hash);
  records_.push_back(LineRecord{kept.data(), static_cast<uint32_t>(kept.size()), id, chain_id, static_cast<uint8_t>(slot)});
}

std::string_view RuleStore::keep(std::string_view bytes) {
  if (bytes.empty()) return std::string_view("", 0);  // never a null pointer (memcmp, append)
  if (bytes.size() > static_cast<size_t>(arena_end_ - arena_pos_)) {
    size_t chunk = std::max<size_t>(bytes.size(), size_t{1} << 20);
    arena_.push_back(std::unique_ptr<char[]>(new char[chunk]));  // not zeroed
    arena_pos_ = arena_.back().get();
    arena_end_ = arena_pos_ + chunk;
  }
  char* dst = arena_pos_;
  if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
  arena_pos_ += bytes.size();
  return {dst, bytes.size()};
}

std::string RuleStore::canonical_text(const ir::Rule& rule, IPFamily family) {
  std::string text;
  text.reserve(160);
  append_canonical_text(text, rule, family);
  return text;
}

void RuleStore::append_canonical_text(std::string& out, const ir::Rule& rule, IPFamily family) {
  const size_t at = out.size();
  ir::print_rule_save(out, "", rule, family);
  out.erase(at, 3);  // "-A " + "" (the chain is not part of a rule's identity)
}

uint32_t RuleStore::intern(const ir::Rule& rule, IPFamily family) {
  scratch_.clear();
  append_canonical_text(scratch_, rule, family);
  bool is_goto = rule.target.kind == ir::TargetKind::Goto;
  return intern_text(scratch_, rule.target.is_chain() ? std::string_view(rule.target.chain) : std::string_view(), is_goto);
}

uint32_t RuleStore::renamed(uint32_t id, const std::string& new_target) {
  const std::string_view old = texts_[id];
  const Meta& m = meta_[id];
  // The target is printed last: " -j NAME" / " -g NAME".
  std::string text = std::string(old.substr(0, old.size() - jump(id).size())) + new_target;
  bool g = m.is_goto;
  return intern_text(text, new_target, g);
}

Chain& ChainMap::insert(Chain c) {
  const uint32_t id = c.id;
  if (id >= slot_.size()) slot_.resize(std::max<size_t>(id + 1, slot_.size() * 2), kNone);
  slot_[id] = static_cast<uint32_t>(chains_.size());
  chains_.push_back(std::move(c));
  return chains_.back();
}

void ChainMap::erase(uint32_t name_id) {
  if (name_id >= slot_.size() || slot_[name_id] == kNone) return;
  const uint32_t at = slot_[name_id];
  slot_[name_id] = kNone;
  if (at + 1 != chains_.size()) {
    chains_[at] = std::move(chains_.back());
    slot_[chains_[at].id] = at;
  }
  chains_.pop_back();
}

TableState TableState::empty(ir::TableId id) {
  TableState t;
  t.id = id;
  for (const auto& name : ir::builtin_chains(id)) {
    Chain c;
    c.name = name;
    c.id = RuleStore::builtin_name_id(name);
    c.builtin = true;
    c.policy = "ACCEPT";
    t.chains.insert(std::move(c));
  }
  return t;
}

size_t TableState::rule_count() const {
  size_t n = 0;
  for (const Chain& c : chains) n += c.rules.size();
  return n;
}

std::vector<const Chain*> TableState::save_order() const {
  std::vector<const Chain*> out;
  for (const auto& name : ir::builtin_chains(id))
    if (const Chain* c = chains.find(RuleStore::builtin_name_id(name))) out.push_back(c);
  std::vector<const Chain*> user;
  for (const Chain& c : chains)
    if (!c.builtin) user.push_back(&c);
  std::sort(user.begin(), user.end(),
            [](const Chain* a, const Chain* b) { return a->name < b->name; });  // strcmp order
  out.insert(out.end(), user.begin(), user.end());
  return out;
}

RulesetState RulesetState::empty(IPFamily family, std::shared_ptr<RuleStore> store) {
  RulesetState s;
  s.family = family;
  if (store) s.store = std::move(store);
  for (auto t : {ir::TableId::Filter, ir::TableId::Nat, ir::TableId::Mangle, ir::TableId::Raw, ir::TableId::Security})
    s.tables.push_back(TableState::empty(t));
  return s;
}

namespace {

bool same_rules(const Chain& a, const RuleStore& sa, const Chain& b, const RuleStore& sb) {
  if (a.rules.size() != b.rules.size()) return false;
  if (&sa == &sb) return a.rules == b.rules;
  for (size_t i = 0; i < a.rules.size(); ++i)
    if (sa.text(a.rules[i]) != sb.text(b.rules[i])) return false;
  return true;
}

}  // namespace

std::vector<ChainDiff> diff_states(const RulesetState& a, const RulesetState& b) {
  std::vector<ChainDiff> out;
  for (size_t t = 0; t < a.tables.size() && t < b.tables.size(); ++t) {
    const TableState& ta = a.tables[t];
    const TableState& tb = b.tables[t];
    if (ta.present != tb.present) out.push_back({ta.id, "", ChainDiff::TablePresence});
    size_t first = out.size();
    // On one store a name has one id; across two stores, look names up in the other's.
    const bool shared = a.store == b.store;
    for (const Chain& c : ta.chains) {
      const Chain* d = shared ? tb.chains.find(c.id) : tb.find(*b.store, c.name);
      if (!d) out.push_back({ta.id, c.name, ChainDiff::OnlyInA});
      else if (c.policy != d->policy) out.push_back({ta.id, c.name, ChainDiff::Policy});
      else if (!same_rules(c, *a.store, *d, *b.store)) out.push_back({ta.id, c.name, ChainDiff::Rules});
    }
    for (const Chain& d : tb.chains)
      if (!(shared ? ta.chains.find(d.id) : ta.find(*a.store, d.name))) out.push_back({ta.id, d.name, ChainDiff::OnlyInB});
    std::sort(out.begin() + static_cast<long>(first), out.end(),
              [](const ChainDiff& x, const ChainDiff& y) { return std::strcmp(x.chain.c_str(), y.chain.c_str()) < 0; });
  }
  return out;
}

std::string describe(const ChainDiff& d) {
  std::string t = ir::table_name(d.table);
  switch (d.kind) {
    case ChainDiff::TablePresence: return t + ": table present on one side only";
    case ChainDiff::OnlyInA: return t + " " + d.chain + ": only in the first state";
    case ChainDiff::OnlyInB: return t + " " + d.chain + ": only in the second state";
    case ChainDiff::Policy: return t + " " + d.chain + ": policies differ";
    case ChainDiff::Rules: return t + " " + d.chain + ": rules differ";
  }
  return t;
}

}  // namespace kpc::verifier
