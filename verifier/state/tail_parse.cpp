#include "verifier/state/tail_parse.h"

#include <cstdint>

namespace kpc::verifier {

TailParser::TailParser(std::string_view text, size_t from, IPFamily family)
    : text_(text), family_(family), start_(text.size()) {
  if (from >= text.size()) return;
  size_t nl = text.find('\n', from == 0 ? 0 : from - 1);
  if (nl == std::string_view::npos) return;
  size_t start = from == 0 ? 0 : nl + 1;
  // The table of the line at `start`: the last "*name" line before it.
  size_t star = start >= 2 ? text.rfind("\n*", start - 2) : std::string_view::npos;
  size_t name_at = star == std::string_view::npos ? (text.starts_with('*') && start > 0 ? 1 : std::string_view::npos) : star + 2;
  if (name_at == std::string_view::npos) return;
  std::string_view name = text.substr(name_at, text.find_first_of(" \t\n", name_at) - name_at);
  auto table = ir::table_from_name(name);
  if (!table) return;
  start_ = start;
  thread_ = std::thread([this, t = *table] { run(t); });
}

TailParser::~TailParser() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

void TailParser::run(ir::TableId table) {
  ParseOptions po;
  po.family = family_;
  RestoreReader reader(text_.substr(start_), po);
  reader.start_in_table(table);
  parsed_.reserve((text_.size() - start_) / 90);
  bytes_.reserve((text_.size() - start_) + (text_.size() - start_) / 4);
  // The reader stops at the first line it cannot parse: the main pass reads the rest itself.
  for (auto ev = reader.next(); ev != RestoreReader::Event::End && ev != RestoreReader::Event::Error; ev = reader.next()) {
    if (cancel_.load(std::memory_order_relaxed)) return;
    if (ev != RestoreReader::Event::Op || reader.rememberable_line().empty()) continue;
    const ir::Rule& rule = reader.op().rule;
    const size_t at = bytes_.size();
    RuleStore::append_canonical_text(bytes_, rule, family_);
    const size_t jump_at = bytes_.size();
    if (rule.target.is_chain()) bytes_ += rule.target.chain;
    if (bytes_.size() > UINT32_MAX) {  // 32-bit offsets: past 4 GB of text the main pass parses the rest
      bytes_.resize(at);
      return;
    }
    Parsed p{reader.table(), false, reader.rememberable_line(), 0, 0, 0, 0, 0, 0, 0, 0};
    p.text_at = static_cast<uint32_t>(at);
    p.text_size = static_cast<uint32_t>(jump_at - at);
    p.text_hash = text_hash(std::string_view(bytes_).substr(p.text_at, p.text_size));
    if (rule.target.is_chain()) {
      p.jump_at = static_cast<uint32_t>(jump_at);
      p.jump_size = static_cast<uint32_t>(bytes_.size() - jump_at);
      p.is_goto = rule.target.kind == ir::TargetKind::Goto;
      p.jump_hash = text_hash(rule.target.chain);
    }
    p.line_hash = text_hash(p.line);
    p.chain_hash = text_hash(RuleStore::line_chain_word(p.line));
    parsed_.push_back(std::move(p));
  }
}

void TailParser::merge_into(RuleStore& store) {
  if (thread_.joinable()) thread_.join();
  store.reserve(store.size() + parsed_.size());
  size_t per_table[5] = {};
  for (const Parsed& p : parsed_) ++per_table[static_cast<size_t>(p.table)];
  for (size_t t = 0; t < 5; ++t)
    if (per_table[t]) store.reserve_lines(family_, static_cast<ir::TableId>(t), per_table[t]);
  // The hashes are known ahead: load the slots a few lines ahead while this one is
  // stored, so the cache misses of consecutive lines overlap.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < parsed_.size(); ++i) {
    if (i + kAhead < parsed_.size()) {
      const Parsed& q = parsed_[i + kAhead];
      store.prefetch(family_, q.table, q.line_hash, q.text_hash);
    }
    const Parsed& p = parsed_[i];
    const std::string_view bytes(bytes_);
    store.remember_line(family_, p.table, p.line, p.line_hash,
                        store.intern_text(bytes.substr(p.text_at, p.text_size), p.text_hash,
                                          bytes.substr(p.jump_at, p.jump_size), p.jump_hash, p.is_goto),
                        p.chain_hash);
  }
  parsed_.clear();
  parsed_.shrink_to_fit();
  bytes_.clear();
  bytes_.shrink_to_fit();
}

}  // namespace kpc::verifier
