#include "applier/node/nft_want.h"

#include <algorithm>
#include <chrono>
#include <functional>

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

}  // namespace

void NftWant::reset() {
  failed_text_.clear();
  state_ = vn::NftState{};
  unordered_ = false;
  valid_ = false;
  prev_ = Parsed{};
}

// One pass over the text: every line's object, each object's digests, presence and creating
// line. Shapes the object path does not handle leave ok false with the reason.
static int kind_slot(char k) { return k == 'c' ? 0 : k == 's' ? 1 : 2; }

const NftWant::Obj* NftWant::Parsed::find(char kind, std::string_view name) const {
  const auto& ix = index[kind_slot(kind)];
  auto it = ix.find(name);
  return it == ix.end() ? nullptr : &objs[it->second];
}

const std::string& NftWant::text() const {
  static const std::string kEmpty;
  if (!valid_) return failed_text_;
  return prev_.text ? *prev_.text : kEmpty;
}

NftWant::Parsed NftWant::parse(std::string owned, bool constant_digests) {
  auto mix = [constant_digests](uint64_t d, std::string_view l) { return constant_digests ? 0 : kpc::applier::mix(d, l); };
  Parsed p;
  p.text = std::make_unique<std::string>(std::move(owned));
  std::string_view text = *p.text;
  auto fail = [&](std::string why, size_t line) {
    p.ok = false;
    p.why = std::move(why) + " (line " + std::to_string(line + 1) + ")";
    return std::move(p);
  };
  p.lines.reserve(text.size() / 100);
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    p.lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  p.line_obj.resize(p.lines.size());
  p.next_line.assign(p.lines.size(), UINT32_MAX);
  p.objs.reserve(p.lines.size() / 3);
  p.index[0].reserve(p.lines.size() / 8);
  bool table_seen = false;
  for (size_t i = 0; i < p.lines.size(); ++i) {
    std::string_view l = p.lines[i];
    size_t at = 0;
    std::string_view verb = word(l, &at), kind = word(l, &at), fam = word(l, &at), table = word(l, &at);
    if (verb != "add" && verb != "flush" && verb != "delete") return fail("command " + std::string(verb), i);
    if (!table_seen) p.family = fam, p.table = table, table_seen = true;
    if (fam != p.family || table != p.table) return fail("a second table", i);
    if (kind == "table") {
      if (verb != "add") return fail(std::string(verb) + " table", i);
      p.table_digest = mix(p.table_digest, l);
      p.table_lines.push_back(l);
      p.line_obj[i] = UINT32_MAX;
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
    auto [it, fresh] = p.index[kind_slot(k)].try_emplace(name, static_cast<uint32_t>(p.objs.size()));
    if (fresh) {
      Obj& o = p.objs.emplace_back();
      o.kind = k;
      o.name = name;
      o.set = set;
    }
    Obj& o = p.objs[it->second];
    p.line_obj[i] = it->second;
    o.digest = mix(o.digest, l);
    ++o.lines;
    if (o.first_line == UINT32_MAX) o.first_line = static_cast<uint32_t>(i);
    else p.next_line[o.last_line] = static_cast<uint32_t>(i);
    o.last_line = static_cast<uint32_t>(i);
    if (kind == "rule") continue;
    o.head = mix(o.head, l);
    if (k == 's') {
      o.is_map = kind == "map";
      if (o.elements_seen) return fail("a set command after one of its elements", i);
    }
    if (k == 'e') {
      auto s = p.index[1].find(o.set);
      if (s != p.index[1].end()) p.objs[s->second].elements_seen = true;
      o.present = verb == "add";
    } else if (verb == "add" && !o.present) {
      o.present = true, o.created = static_cast<int64_t>(i);
    } else if (verb == "delete") {
      o.present = false, o.created = -1;
    }
  }
  p.ok = true;
  return p;
}

bool NftWant::same_block(const Parsed& a, const Obj& x, const Parsed& b, const Obj& y, bool rules_too) {
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

// The object path: steps 1 and 2 on the kept state, then the creation order. False (the state
// then unusable) with *why when it cannot be used or fails.
bool NftWant::incremental(const Parsed& next, std::string* why, size_t* redone, Update* u) {
  if (next.table_digest != prev_.table_digest || next.table_lines != prev_.table_lines ||
      next.family != prev_.family || next.table != prev_.table) {
    *why = "the table commands changed";
    return false;
  }
  const std::string prefix = next.family + " " + next.table + " ";
  std::string flushes, element_deletes, set_deletes, chain_deletes;
  std::vector<char> dirty(next.objs.size(), 0);
  std::unordered_map<std::string_view, bool> sets_redone;  ///< set name -> its elements are redone
  auto old_of = [&](const Obj& n) { return prev_.find(n.kind, n.name); };
  auto line = [&](std::string& out, std::string_view head, std::string_view name, std::string_view tail = {}) {
    out.append(head).append(prefix).append(name).append(tail).push_back('\n');
  };
  auto drop_chain = [&](const Obj& o) {
    line(flushes, "flush chain ", o.name);
    line(chain_deletes, "delete chain ", o.name);
  };
  auto drop_set = [&](const Obj& o) { line(set_deletes, o.is_map ? "delete map " : "delete set ", o.name); };
  for (size_t i = 0; i < next.objs.size(); ++i) {
    const Obj& n = next.objs[i];
    if (n.kind == 'e') continue;
    const Obj* o = old_of(n);
    if (o && same_block(prev_, *o, next, n, true)) continue;
    dirty[i] = 1;
    if (!o || !o->present) {
      if (n.kind == 's') sets_redone[n.name] = true;
      continue;
    }
    if (n.kind == 'c' && same_block(prev_, *o, next, n, false)) line(flushes, "flush chain ", n.name);  // only rules changed
    else if (n.kind == 'c') drop_chain(*o);
    else drop_set(*o), sets_redone[n.name] = true;
  }
  for (const Obj& o : prev_.objs) {
    if (o.kind == 'e' || !o.present || next.find(o.kind, o.name)) continue;
    if (o.kind == 'c') drop_chain(o);
    else drop_set(o), sets_redone[o.name] = true;
  }
  for (size_t i = 0; i < next.objs.size(); ++i) {
    const Obj& n = next.objs[i];
    if (n.kind != 'e') continue;
    const bool set_redone = sets_redone.count(n.set) > 0;
    const Obj* o = old_of(n);
    if (o && !set_redone && same_block(prev_, *o, next, n, true)) continue;
    dirty[i] = 1;
    if (o && o->present && !set_redone) line(element_deletes, "delete element ", n.name, " }");
  }
  for (const Obj& o : prev_.objs)
    if (o.kind == 'e' && o.present && !sets_redone.count(o.set) && !next.find('e', o.name))
      line(element_deletes, "delete element ", o.name, " }");

  // Both steps in one transaction on the model (each transaction walks the whole jump graph).
  std::string script = flushes + element_deletes + set_deletes + chain_deletes;
  for (size_t i = 0; i < next.lines.size(); ++i)
    if (next.line_obj[i] != UINT32_MAX && dirty[next.line_obj[i]]) script.append(next.lines[i]).push_back('\n');
  *redone = static_cast<size_t>(std::count(dirty.begin(), dirty.end(), 1));
  for (size_t i = 0; i < next.objs.size(); ++i)
    if (dirty[i]) {
      const Obj& n = next.objs[i];
      (n.kind == 'c' ? u->redone_chains : u->redone_sets).emplace_back(n.kind == 'e' ? n.set : n.name);
    }
  for (const Obj& o : prev_.objs) {
    if (!o.present || next.find(o.kind, o.name)) continue;
    (o.kind == 'c' ? u->redone_chains : u->redone_sets).emplace_back(o.kind == 'e' ? o.set : o.name);
  }
  auto t0 = std::chrono::steady_clock::now();
  if (!script.empty()) {
    auto r = vn::apply_script(state_, script, "want.nft");
    u->apply_ms = ms_since(t0);
    if (!r.ok) {
      *why = "the objects' transaction: " + (r.error ? r.error->to_string() : std::string("failed"));
      return false;
    }
  }
  t0 = std::chrono::steady_clock::now();
  const bool held_right = check(next);
  u->check_ms = ms_since(t0);
  if (!held_right) {
    *why = "the objects held differ from the text's";
    return false;
  }
  return true;
}

static int64_t created_at(const NftWant::Obj* o) { return !o || !o->present ? -1 : o->created; }

// A cheap check that the kept state holds exactly the text's objects: the same chain and set
// names, as many elements. Whether they are in creation order is noted (state() sorts).
bool NftWant::check(const Parsed& next) {
  auto fam = vn::family_from_name(next.family);
  const vn::Table* t = fam ? state_.find_table(*fam, next.table) : nullptr;
  if (!t) return false;
  size_t chains = 0, sets = 0, elements = 0;
  for (const Obj& o : next.objs)
    if (o.present) (o.kind == 'c' ? chains : o.kind == 's' ? sets : elements) += 1;
  size_t held_elements = 0;
  for (const auto& s : t->sets) held_elements += s.elements.size();
  if (t->chains.size() != chains || t->sets.size() != sets || held_elements != elements) return false;
  int64_t last = -1;
  for (const auto& c : t->chains) {
    int64_t at = created_at(next.find('c', c.name));
    if (at < 0) return false;
    if (at < last) unordered_ = true;
    last = at;
  }
  last = -1;
  for (const auto& st : t->sets) {
    int64_t at = created_at(next.find('s', st.name));
    if (at < 0) return false;
    if (at < last) unordered_ = true;
    last = at;
  }
  return true;
}

// Chains and sets in the order a whole apply creates them (the last text's creating lines).
bool NftWant::reorder(const Parsed& next) {
  auto fam = vn::family_from_name(next.family);
  vn::Table* t = fam ? state_.find_table(*fam, next.table) : nullptr;
  if (!t) return false;
  auto created = [&](char k, const std::string& name) { return created_at(next.find(k, name)); };
  bool moved = false;
  if (test_skip_reorder) return true;
  auto order = [&](auto& v, char k) {
    std::vector<std::pair<int64_t, size_t>> at(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      at[i] = {created(k, v[i].name), i};
      if (at[i].first < 0) return false;
    }
    if (std::is_sorted(at.begin(), at.end())) return true;
    std::sort(at.begin(), at.end());
    std::remove_reference_t<decltype(v)> sorted;
    sorted.reserve(v.size());
    for (const auto& [c, i] : at) sorted.push_back(std::move(v[i]));
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
    reorder(prev_);
    unordered_ = false;
  }
  return state_;
}

NftWant::Update NftWant::update(std::string owned) {
  Update u;
  auto t0 = std::chrono::steady_clock::now();
  Parsed next = parse(std::move(owned), test_constant_digests);
  u.parse_ms = ms_since(t0);
  std::string_view full_text = *next.text;
  u.objects = next.objs.size();
  bool done = false;
  if (!valid_ || !prev_.ok) {
    u.why_whole = valid_ ? "the last text was not split: " + prev_.why : "first use";
  } else if (!next.ok) {
    u.why_whole = "the text is not split: " + next.why;
  } else if (incremental(next, &u.why_whole, &u.objects_redone, &u)) {
    done = u.incremental = true;
  }
  if (!done) {
    state_ = vn::NftState{};
    unordered_ = false;
    u.apply = vn::apply_script(state_, full_text, "full.nft");
    if (!u.apply.ok) {
      std::string t = std::move(*next.text);
      reset();
      failed_text_ = std::move(t);
      return u;
    }
  }
  u.ok = valid_ = true;
  failed_text_.clear();
  // lines and next_line stay: the next update compares its blocks with these line by line.
  next.line_obj.clear(), next.line_obj.shrink_to_fit();
  prev_ = std::move(next);
  return u;
}

}  // namespace kpc::applier
