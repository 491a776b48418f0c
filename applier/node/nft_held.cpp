#include "applier/node/nft_held.h"

#include <algorithm>
#include <set>

namespace kpc::applier {

namespace vn = verifier::nft;

namespace {
std::string_view word(std::string_view s, size_t* pos) {
  size_t b = *pos, e = s.find(' ', b);
  if (e == std::string_view::npos) e = s.size();
  *pos = e < s.size() ? e + 1 : e;
  return s.substr(b, e - b);
}

// Rebuilds `v`: the objects not touched keep their relative order, the saved ones go back to
// their former positions (ascending), the ones the scripts created go away.
template <class T>
void put_back(std::vector<T>& v, const std::vector<std::pair<std::string, std::optional<std::pair<size_t, T>>>>& saved) {
  std::set<std::string_view> touched;
  for (const auto& [n, s] : saved) touched.insert(n);
  std::vector<T> rest;
  rest.reserve(v.size());
  for (auto& o : v)
    if (!touched.count(o.name)) rest.push_back(std::move(o));
  std::vector<const std::pair<size_t, T>*> back;
  for (const auto& [n, s] : saved)
    if (s) back.push_back(&*s);
  std::sort(back.begin(), back.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::vector<T> out;
  out.reserve(rest.size() + back.size());
  size_t r = 0;
  for (const auto* b : back) {
    while (out.size() < b->first && r < rest.size()) out.push_back(std::move(rest[r++]));
    out.push_back(b->second);
  }
  while (r < rest.size()) out.push_back(std::move(rest[r++]));
  v = std::move(out);
}
}  // namespace

std::optional<NftTouched> NftTouched::save(const vn::NftState& st, vn::Family family, const std::string& name,
                                           const std::vector<std::string_view>& scripts) {
  NftTouched t;
  t.family_ = family;
  t.name_ = name;
  const std::string fam = vn::family_name(family);
  std::set<std::string, std::less<>> chains, sets;
  for (std::string_view text : scripts)
    for (size_t pos = 0; pos < text.size();) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view l = text.substr(pos, nl - pos);
      pos = nl + 1;
      if (l.empty()) continue;
      size_t at = 0;
      std::string_view verb = word(l, &at), kind = word(l, &at), f = word(l, &at), table = word(l, &at);
      if (f != fam || table != name) return std::nullopt;
      if (kind == "table") {
        if (verb != "add") return std::nullopt;
        continue;
      }
      if (verb != "add" && verb != "flush" && verb != "delete" && verb != "create" && verb != "insert")
        return std::nullopt;
      std::string_view obj = word(l, &at);
      if (kind == "chain" || kind == "rule") chains.emplace(obj);
      else if (kind == "set" || kind == "map" || kind == "element") sets.emplace(obj);
      else return std::nullopt;
    }
  const vn::Table* tb = st.find_table(family, name);
  t.table_existed_ = tb != nullptr;
  if (tb) {
    vn::Table attrs;
    attrs.family = tb->family, attrs.name = tb->name, attrs.handle = tb->handle;
    attrs.comment = tb->comment, attrs.flags = tb->flags, attrs.flowtables = tb->flowtables;
    attrs.next_handle = tb->next_handle;
    t.table_attrs_ = std::move(attrs);
  }
  auto pos_of = [](const auto& v, std::string_view n) -> size_t {
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i].name == n) return i;
    return v.size();
  };
  for (const auto& c : chains) {
    const vn::Chain* ch = tb ? tb->find_chain(c) : nullptr;
    if (ch) t.chains_.push_back({c, std::make_pair(pos_of(tb->chains, c), *ch)});
    else t.chains_.push_back({c, std::nullopt});
  }
  for (const auto& s : sets) {
    const vn::Set* se = tb ? tb->find_set(s) : nullptr;
    if (se) t.sets_.push_back({s, std::make_pair(pos_of(tb->sets, s), *se)});
    else t.sets_.push_back({s, std::nullopt});
  }
  return t;
}

void NftTouched::restore(vn::NftState& st) const {
  vn::Table* tb = st.find_table(family_, name_);
  if (!table_existed_) {
    std::erase_if(st.tables, [&](const vn::Table& x) { return x.family == family_ && x.name == name_; });
    st.reindex();
    return;
  }
  if (!tb) return;  // the scripts cannot delete the table (save refused such commands)
  tb->comment = table_attrs_->comment, tb->flags = table_attrs_->flags;
  tb->flowtables = table_attrs_->flowtables;
  put_back(tb->chains, chains_);
  put_back(tb->sets, sets_);
  st.reindex();
}

}  // namespace kpc::applier
