#include "applier/node/nft_want.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <unordered_set>

namespace kpc::applier {

namespace vn = verifier::nft;

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

uint64_t mix(uint64_t d, std::string_view line) {
  uint64_t h = std::hash<std::string_view>()(line);
  d = (d << 7 | d >> 57) ^ h;
  return d * 0x9E3779B97F4A7C15ull;
}

// The next space-separated word of `s` from `*pos` (advancing past it and one space).
std::string_view word(std::string_view s, size_t* pos) {
  size_t b = *pos, e = s.find(' ', b);
  if (e == std::string_view::npos) e = s.size();
  *pos = e < s.size() ? e + 1 : e;
  return s.substr(b, e - b);
}

int kind_slot(char k) { return k == 'c' ? 0 : k == 's' ? 1 : 2; }

}  // namespace

void NftWant::reset() {
  failed_text_.clear();
  state_ = vn::NftState{};
  unordered_ = false;
  valid_ = false;
  pieces_.clear();
  for (auto& ix : index_) ix.clear();
  family_.clear(), table_.clear();
  for (auto& n : present_) n = 0;
}

const NftWant::Obj* NftWant::Piece::find(char kind, std::string_view name) const {
  const auto& ix = index[kind_slot(kind)];
  auto it = ix.find(name);
  return it == ix.end() ? nullptr : &objs[it->second];
}

const NftWant::Where* NftWant::find(char kind, std::string_view name) const {
  const auto& ix = index_[kind_slot(kind)];
  auto it = ix.find(name);
  return it == ix.end() ? nullptr : &it->second;
}

std::string NftWant::text() const {
  if (!valid_) return failed_text_;
  size_t n = 0;
  for (const auto& p : pieces_) n += p->text.size();
  std::string out;
  out.reserve(n);
  for (const auto& p : pieces_) out += p->text;
  return out;
}

// One pass over a part: every line's object, each object's digests, presence and creating
// line. Shapes the object path does not handle leave ok false with the reason.
std::unique_ptr<NftWant::Piece> NftWant::split(uint64_t id, uint64_t version, std::string owned, bool constant_digests) {
  auto mix = [constant_digests](uint64_t d, std::string_view l) { return constant_digests ? 0 : kpc::applier::mix(d, l); };
  auto p = std::make_unique<Piece>();
  p->id = id, p->version = version;
  p->text = std::move(owned);
  std::string_view text = p->text;
  auto fail = [&](std::string why, size_t line) {
    p->ok = false;
    p->why = std::move(why) + " (line " + std::to_string(line + 1) + " of a part)";
    return std::move(p);
  };
  p->lines.reserve(text.size() / 100);
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    p->lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  p->line_obj.resize(p->lines.size());
  p->next_line.assign(p->lines.size(), UINT32_MAX);
  p->objs.reserve(p->lines.size() / 3);
  p->index[0].reserve(p->lines.size() / 8);
  bool table_seen = false;
  for (size_t i = 0; i < p->lines.size(); ++i) {
    std::string_view l = p->lines[i];
    size_t at = 0;
    std::string_view verb = word(l, &at), kind = word(l, &at), fam = word(l, &at), table = word(l, &at);
    if (verb != "add" && verb != "flush" && verb != "delete") return fail("command " + std::string(verb), i);
    if (!table_seen) p->family = std::string(fam), p->table = std::string(table), table_seen = true;
    if (fam != p->family || table != p->table) return fail("a second table", i);
    if (kind == "table") {
      if (verb != "add") return fail(std::string(verb) + " table", i);
      p->table_lines.push_back(l);
      p->line_obj[i] = UINT32_MAX;
      continue;
    }
    char k;
    std::string_view name, set;
    if (kind == "chain" || kind == "rule") {
      k = 'c';
      if (kind == "rule" && verb != "add") return fail(std::string(verb) + " rule", i);
      name = word(l, &at);
    } else if (kind == "set" || kind == "map") {
      k = 's';
      name = word(l, &at);
    } else if (kind == "element") {
      if (verb == "flush") return fail("flush element", i);
      k = 'e';
      set = word(l, &at);
      // "SET { KEY": the key ends where its comment, value or closing brace starts.
      if (l.compare(at, 2, "{ ") != 0) return fail("an element without { KEY }", i);
      size_t end = l.size();
      for (std::string_view m : {" comment ", " : ", " }"}) end = std::min(end, l.find(m, at + 2));
      if (end == std::string_view::npos || end >= l.size()) return fail("an element without { KEY }", i);
      name = l.substr(at - set.size() - 1, end - (at - set.size() - 1));
    } else {
      return fail(std::string(kind) + " command", i);
    }
    if (name.empty()) return fail("a command without a name", i);
    auto [it, fresh] = p->index[kind_slot(k)].try_emplace(name, static_cast<uint32_t>(p->objs.size()));
    if (fresh) {
      Obj& o = p->objs.emplace_back();
      o.kind = k;
      o.name = name;
      o.set = set;
    }
    Obj& o = p->objs[it->second];
    p->line_obj[i] = it->second;
    o.digest = mix(o.digest, l);
    ++o.lines;
    if (o.first_line == UINT32_MAX) o.first_line = static_cast<uint32_t>(i);
    else p->next_line[o.last_line] = static_cast<uint32_t>(i);
    o.last_line = static_cast<uint32_t>(i);
    if (kind == "rule") continue;
    o.head = mix(o.head, l);
    if (k == 's') {
      o.is_map = kind == "map";
      if (o.elements_seen) return fail("a set command after one of its elements", i);
    }
    if (k == 'e') {
      auto s = p->index[1].find(o.set);
      if (s != p->index[1].end()) p->objs[s->second].elements_seen = true;
      o.present = verb == "add";
    } else if (verb == "add" && !o.present) {
      o.present = true, o.created = static_cast<int64_t>(i);
    } else if (verb == "delete") {
      o.present = false, o.created = -1;
    }
  }
  for (const Obj& o : p->objs) {
    if (o.present) ++p->present[kind_slot(o.kind)];
    if (o.kind == 'e' && std::find(p->element_sets.begin(), p->element_sets.end(), o.set) == p->element_sets.end())
      p->element_sets.push_back(o.set);
  }
  p->ok = true;
  return p;
}

bool NftWant::same_block(const Piece& a, const Obj& x, const Piece& b, const Obj& y, bool rules_too) {
  if (rules_too ? (x.digest != y.digest || x.lines != y.lines) : x.head != y.head) return false;
  auto is_rule = [](std::string_view l) { return l.compare(0, 9, "add rule ") == 0; };
  uint32_t i = x.first_line, j = y.first_line;
  for (;;) {
    if (!rules_too) {
      while (i != UINT32_MAX && is_rule(a.lines[i])) i = a.next_line[i];
      while (j != UINT32_MAX && is_rule(b.lines[j])) j = b.next_line[j];
    }
    if (i == UINT32_MAX || j == UINT32_MAX) return i == j;
    if (a.lines[i] != b.lines[j]) return false;
    i = a.next_line[i], j = b.next_line[j];
  }
}

// The index of every part's objects (and the counts); false when an object has commands in
// two parts (the object path then cannot tell a part's objects from the others').
void NftWant::index_all() {
  for (auto& ix : index_) ix.clear();
  for (auto& n : present_) n = 0;
  for (const auto& p : pieces_) {
    for (uint32_t i = 0; i < p->objs.size(); ++i) {
      const Obj& o = p->objs[i];
      index_[kind_slot(o.kind)].emplace(o.name, Where{p.get(), i});
    }
    for (int k = 0; k < 3; ++k) present_[k] += p->present[k];
  }
}

// The object path: steps 1 and 2 on the kept state. False (the state then unusable) with
// *why when it cannot be used or fails. `next` holds the unchanged parts (moved from pieces_,
// which keeps the changed and removed ones) and the parts split this time.
bool NftWant::incremental(std::vector<std::unique_ptr<Piece>>& next, const std::vector<const Piece*>& fresh,
                          std::string* why, Update* u) {
  std::unordered_set<const Piece*> old_changed;
  for (const auto& p : pieces_)
    if (p) old_changed.insert(p.get());
  for (const Piece* p : fresh)
    if (!p->family.empty() && (p->family != family_ || p->table != table_)) {
      *why = "the table changed";
      return false;
    }
  // The table's commands: those of the parts that went must be those of the parts that came.
  std::vector<std::string_view> table_before, table_after;
  for (const auto& p : pieces_)
    if (p) table_before.insert(table_before.end(), p->table_lines.begin(), p->table_lines.end());
  for (const Piece* p : fresh) table_after.insert(table_after.end(), p->table_lines.begin(), p->table_lines.end());
  if (table_before != table_after) {
    *why = "the table commands changed";
    return false;
  }
  // The new parts' objects: none may be an object of a part that stays, or of two new parts.
  std::unordered_map<std::string_view, Where> came[3];
  for (const Piece* p : fresh)
    for (uint32_t i = 0; i < p->objs.size(); ++i) {
      const Obj& o = p->objs[i];
      const Where* w = find(o.kind, o.name);
      if ((w && !old_changed.count(w->piece)) || !came[kind_slot(o.kind)].emplace(o.name, Where{p, i}).second) {
        *why = "an object with commands in two parts";
        return false;
      }
    }
  auto old_of = [&](const Obj& n) -> const Where* {
    const Where* w = find(n.kind, n.name);
    return w && old_changed.count(w->piece) ? w : nullptr;
  };
  const std::string prefix = family_ + " " + table_ + " ";
  std::string flushes, element_deletes, chain_deletes;
  std::unordered_map<const Piece*, std::vector<char>> dirty;
  for (const Piece* p : fresh) dirty[p].assign(p->objs.size(), 0);
  auto line = [&](std::string& out, std::string_view head, std::string_view name, std::string_view tail = {}) {
    out.append(head).append(prefix).append(name).append(tail).push_back('\n');
  };
  auto redone = [&](const Obj& o) { (o.kind == 'c' ? u->redone_chains : u->redone_sets).emplace_back(o.kind == 'e' ? o.set : o.name); };
  size_t n_redone = 0;
  std::string set_deletes;
  std::unordered_set<std::string_view> sets_redone;  // deleted and made again: all their elements too
  auto drop = [&](const Obj& o) {
    if (o.kind == 'c') {
      line(flushes, "flush chain ", o.name);
      line(chain_deletes, "delete chain ", o.name);
    } else if (o.kind == 's') {
      line(set_deletes, o.is_map ? "delete map " : "delete set ", o.name);
      sets_redone.insert(o.name);
    } else if (!sets_redone.count(o.set)) {
      line(element_deletes, "delete element ", o.name, " }");
    }
  };
  // Chains and sets first (a set redone redoes its elements), then elements.
  for (int pass = 0; pass < 2; ++pass)
    for (const Piece* p : fresh)
      for (uint32_t i = 0; i < p->objs.size(); ++i) {
        const Obj& n = p->objs[i];
        if ((n.kind == 'e') != (pass == 1)) continue;
        const Where* w = old_of(n);
        const bool set_redone = n.kind == 'e' && sets_redone.count(n.set);
        if (w && !set_redone && same_block(*w->piece, w->o(), *p, n, true)) continue;
        dirty[p][i] = 1, ++n_redone, redone(n);
        if (!w || !w->o().present) {
          if (n.kind == 's') sets_redone.insert(n.name);
          continue;
        }
        const Obj& o = w->o();
        if (n.kind == 'c' && same_block(*w->piece, o, *p, n, false)) line(flushes, "flush chain ", n.name);  // only rules changed
        else drop(o);
      }
  // Objects of the parts that went that no new part has (sets, then chains and elements).
  for (int pass = 0; pass < 2; ++pass)
    for (const Piece* p : old_changed)
      for (const Obj& o : p->objs) {
        if ((o.kind == 's') != (pass == 0)) continue;
        if (!o.present || came[kind_slot(o.kind)].count(o.name)) continue;
        redone(o), ++n_redone;
        drop(o);
      }
  // A set redone whose elements are in a part that stays: not this path.
  if (!sets_redone.empty())
    for (const auto& p : next) {
      if (old_changed.count(p.get()) || std::find(fresh.begin(), fresh.end(), p.get()) != fresh.end()) continue;
      for (std::string_view s : p->element_sets)
        if (sets_redone.count(s)) {
          *why = "a set or map redone whose elements are in another part";
          return false;
        }
    }
  std::string script = flushes + element_deletes + set_deletes + chain_deletes;
  for (const Piece* p : fresh) {
    auto d = dirty.find(p);
    if (d == dirty.end()) continue;
    for (size_t i = 0; i < p->lines.size(); ++i)
      if (p->line_obj[i] != UINT32_MAX && d->second[p->line_obj[i]]) script.append(p->lines[i]).push_back('\n');
  }
  u->objects_redone = n_redone;
  auto t0 = std::chrono::steady_clock::now();
  if (!script.empty()) {
    auto r = vn::apply_script(state_, script, "want.nft");
    u->apply_ms = ms_since(t0);
    if (!r.ok) {
      *why = "the objects' transaction: " + (r.error ? r.error->to_string() : std::string("failed"));
      return false;
    }
    unordered_ = true;  // created chains or sets went to the end (state() sorts)
  }
  // The index and counts: the parts that went out, the new ones in.
  for (const Piece* p : old_changed) {
    for (const Obj& o : p->objs) {
      auto& ix = index_[kind_slot(o.kind)];
      auto it = ix.find(o.name);
      if (it != ix.end() && it->second.piece == p) ix.erase(it);
    }
    for (int k = 0; k < 3; ++k) present_[k] -= p->present[k];
  }
  for (const Piece* p : fresh) {
    for (uint32_t i = 0; i < p->objs.size(); ++i) index_[kind_slot(p->objs[i].kind)].emplace(p->objs[i].name, Where{p, i});
    for (int k = 0; k < 3; ++k) present_[k] += p->present[k];
  }
  t0 = std::chrono::steady_clock::now();
  const bool held_right = check();
  u->check_ms = ms_since(t0);
  if (!held_right) {
    *why = "the objects held differ from the text's";
    return false;
  }
  return true;
}

// A cheap check that the kept state holds as many chains, sets and elements as the text.
bool NftWant::check() const {
  auto fam = vn::family_from_name(family_);
  const vn::Table* t = fam ? state_.find_table(*fam, table_) : nullptr;
  if (!t) return false;
  size_t held_elements = 0;
  for (const auto& s : t->sets) held_elements += s.elements.size();
  return t->chains.size() == present_[0] && t->sets.size() == present_[1] && held_elements == present_[2];
}

// Chains and sets in the order a whole apply creates them (the parts' creating lines).
bool NftWant::reorder() {
  auto fam = vn::family_from_name(family_);
  vn::Table* t = fam ? state_.find_table(*fam, table_) : nullptr;
  if (!t) return false;
  if (test_skip_reorder) return true;
  std::unordered_map<const Piece*, int64_t> base;
  int64_t at = 0;
  for (const auto& p : pieces_) base[p.get()] = at, at += static_cast<int64_t>(p->lines.size());
  auto created = [&](char k, const std::string& name) -> int64_t {
    const Where* w = find(k, name);
    if (!w || !w->o().present || w->o().created < 0) return -1;
    return base[w->piece] + w->o().created;
  };
  bool moved = false;
  auto order = [&](auto& v, char k) {
    std::vector<std::pair<int64_t, size_t>> pos(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      pos[i] = {created(k, v[i].name), i};
      if (pos[i].first < 0) return false;
    }
    if (std::is_sorted(pos.begin(), pos.end())) return true;
    std::sort(pos.begin(), pos.end());
    std::remove_reference_t<decltype(v)> sorted;
    sorted.reserve(v.size());
    for (const auto& [c, i] : pos) sorted.push_back(std::move(v[i]));
    v = std::move(sorted);
    moved = true;
    return true;
  };
  if (!order(t->chains, 'c') || !order(t->sets, 's')) return false;
  if (moved) state_.reindex();
  return true;
}

const vn::NftState& NftWant::state() {
  if (unordered_ && valid_) {
    reorder();
    unordered_ = false;
  }
  return state_;
}

// The whole text applied to an empty state; the parts kept for the next update.
bool NftWant::whole(std::vector<std::unique_ptr<Piece>> next, Update* u) {
  size_t n = 0;
  for (const auto& p : next) n += p->text.size();
  std::string text;
  text.reserve(n);
  for (const auto& p : next) text += p->text;
  state_ = vn::NftState{};
  unordered_ = false;
  u->apply = vn::apply_script(state_, text, "full.nft");
  if (!u->apply.ok) {
    reset();
    failed_text_ = std::move(text);
    return false;
  }
  pieces_ = std::move(next);
  family_.clear(), table_.clear();
  for (const auto& p : pieces_)
    if (!p->family.empty()) {
      family_ = p->family, table_ = p->table;
      break;
    }
  index_all();
  return true;
}

// (one part that is always new: every object is compared with the last text's)
NftWant::Update NftWant::update(std::string text) { return update(std::vector<Part>{Part{0, 0, text}}); }

NftWant::Update NftWant::update(const std::vector<Part>& parts) {
  Update u;
  auto t0 = std::chrono::steady_clock::now();
  std::unordered_map<uint64_t, size_t> old_by_id;
  for (size_t i = 0; i < pieces_.size(); ++i) old_by_id[pieces_[i]->id] = i;
  std::vector<std::unique_ptr<Piece>> next;
  next.reserve(parts.size());
  std::vector<const Piece*> fresh;
  bool split_ok = true;
  std::string why;
  for (const Part& part : parts) {
    auto it = valid_ && part.version != 0 ? old_by_id.find(part.id) : old_by_id.end();
    if (it != old_by_id.end() && pieces_[it->second] && pieces_[it->second]->version == part.version) {
      next.push_back(std::move(pieces_[it->second]));  // unchanged: kept as it is
      continue;
    }
    auto p = split(part.id, part.version, std::string(part.text), test_constant_digests);
    if (!p->ok && split_ok) split_ok = false, why = "the text is not split: " + p->why;
    fresh.push_back(p.get());
    next.push_back(std::move(p));
    ++u.parts_read;
  }
  u.parse_ms = ms_since(t0);
  for (const auto& p : next) u.objects += p->objs.size();
  if (!valid_) why = "first use";
  bool done = valid_ && split_ok && incremental(next, fresh, &why, &u);
  u.why_whole = done ? "" : why;
  if (done) {
    pieces_ = std::move(next);
    u.ok = u.incremental = true;
    failed_text_.clear();
    return u;
  }
  u.redone_chains.clear(), u.redone_sets.clear(), u.objects_redone = 0;
  u.ok = valid_ = whole(std::move(next), &u);
  if (u.ok) failed_text_.clear();
  return u;
}

}  // namespace kpc::applier
