#include "verifier/symbolic/affinity_lists.h"

#include "compiler/support/text.h"

namespace kpc::verifier::symbolic {

namespace {
// The word after `opt` (up to the next space), or "" when opt is absent.
std::string_view word_after(std::string_view t, std::string_view opt) {
  size_t p = find_text(t, opt);
  if (p == std::string_view::npos) return {};
  size_t b = p + opt.size(), e = t.find(' ', b);
  return t.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
}
}  // namespace

bool list_use(std::string_view t, ListUse* out) {
  if (find_text(t, " --name ") == std::string_view::npos) return false;
  out->list = std::string(word_after(t, " --name "));
  out->sets = find_text(t, " --set ") != std::string_view::npos;
  out->key = "list " + out->list;
  if (out->sets && find_text(t, " --to-destination ") != std::string_view::npos) {
    std::string_view svc = word_after(t, "--comment ");
    if (!svc.empty() && svc.front() == '"') svc.remove_prefix(1);
    if (!svc.empty() && svc.back() == '"') svc.remove_suffix(1);
    out->key = (svc.empty() ? std::string() : std::string(svc) + " -> ") + std::string(word_after(t, " --to-destination "));
  }
  return true;
}

std::unordered_map<std::string, std::string> affinity_list_keys(const RulesetState& st) {
  std::unordered_map<std::string, std::string> keys;
  ListUse use;
  for (const Chain& chain : st.table(ir::TableId::Nat).chains)
    for (uint32_t id : chain.rules)
      if (st.store->names_list(id) && list_use(st.store->text(id), &use) && (use.sets || !keys.count(use.list)))
        keys[use.list] = use.key;
  return keys;
}

}  // namespace kpc::verifier::symbolic
