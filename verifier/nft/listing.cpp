// parse_listing: `nft list ruleset` text (with or without -a) into a state.
#include <algorithm>
#include <unordered_map>

#include "verifier/nft/internal.h"

namespace kpc::verifier::nft {

using namespace detail;

bool looks_like_listing(std::string_view text) {
  std::vector<Token> toks;
  try {
    toks = lex(text.substr(0, std::min<size_t>(text.size(), 4096)));
  } catch (const ParseFailure&) {
    return false;
  }
  size_t i = 0;
  while (i < toks.size() && (toks[i].kind == Tok::Newline || toks[i].kind == Tok::Semi)) ++i;
  return i + 1 < toks.size() && toks[i].kind == Tok::Word && toks[i].text == "table";
}

bool parse_listing(std::string_view text, std::string_view file_name, NftState* out, NftError* err) {
  NftState s;
  std::vector<Command> cmds;
  ApplyResult r = apply_impl(s, text, file_name, true, &cmds);
  if (!r.ok) {
    if (err && r.error) *err = *r.error;
    return false;
  }
  // Handles as listed (nft -a): the objects in the order the commands created them.
  size_t ti = 0;
  std::vector<size_t> next_chain(s.tables.size(), 0), next_set(s.tables.size(), 0), next_ft(s.tables.size(), 0);
  Table* cur = nullptr;
  for (const auto& c : cmds) {
    if (c.obj == Obj::Table) {
      cur = s.find_table(c.family, c.table);
      if (cur && c.listed_handle) cur->handle = c.listed_handle;
      ti = cur ? static_cast<size_t>(cur - s.tables.data()) : 0;
      continue;
    }
    if (!cur) continue;
    if (c.obj == Obj::Chain) {
      if (Chain* ch = cur->find_chain(c.name); ch && c.listed_handle) ch->handle = c.listed_handle;
    } else if (c.obj == Obj::Set || c.obj == Obj::Map) {
      if (Set* st = cur->find_set(c.name); st && c.set->handle) st->handle = c.set->handle;
    } else if (c.obj == Obj::Flowtable) {
      if (Flowtable* f = cur->find_flowtable(c.name); f && c.flowtable->handle) f->handle = c.flowtable->handle;
    }
  }
  (void)ti;
  uint64_t maxh = 0;
  for (const auto& t : s.tables) maxh = std::max(maxh, t.handle);
  // Assign rule handles chain by chain from the listed ones.
  for (auto& t : s.tables) {
    std::unordered_map<std::string_view, size_t> pos;  // (views of the commands' names)
    for (const auto& c : cmds) {
      if (c.obj != Obj::Rule || c.family != t.family || c.table != t.name) continue;
      Chain* ch = t.find_chain(c.name);
      if (!ch) continue;
      size_t& p = pos[c.name];
      if (p < ch->rules.size() && c.listed_handle) ch->rules[p].handle = c.listed_handle;
      ++p;
    }
    uint64_t h = t.next_handle;
    for (const auto& ch : t.chains) {
      h = std::max(h, ch.handle);
      for (const auto& r : ch.rules) h = std::max(h, r.handle);
    }
    for (const auto& st : t.sets) h = std::max(h, st.handle);
    for (const auto& f : t.flowtables) h = std::max(h, f.handle);
    t.next_handle = h;
  }
  s.next_table_handle = std::max(s.next_table_handle, maxh);
  *out = std::move(s);
  return true;
}

}  // namespace kpc::verifier::nft
