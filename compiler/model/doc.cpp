#include "compiler/model/doc.h"

#include <algorithm>

namespace kpc {

const DocNode* DocNode::get(std::string_view key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i].name == key) return &items[i];
  return nullptr;
}

Pos DocNode::key_pos(std::string_view key) const {
  for (const auto& k : keys)
    if (k.name == key) return k.pos;
  return pos;
}

size_t DocNode::subtree_size() const {
  size_t n = 1;
  for (const auto& c : items) n += c.subtree_size();
  return n;
}

const DocNode::Key* find_duplicate_key(const DocNode& map) {
  const auto& keys = map.keys;
  if (keys.size() <= 16) {  // the common case: a handful of fields
    for (size_t i = 1; i < keys.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (keys[i].name == keys[j].name) return &keys[i];
    return nullptr;
  }
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a].name < keys[b].name; });
  const DocNode::Key* first = nullptr;
  for (size_t i = 1; i < order.size(); ++i)
    if (keys[order[i]].name == keys[order[i - 1]].name && (!first || order[i] < size_t(first - keys.data())))
      first = &keys[order[i]];
  return first;
}

const char* kind_name(DocNode::Kind k) {
  switch (k) {
    case DocNode::Kind::Null: return "null";
    case DocNode::Kind::Bool: return "boolean";
    case DocNode::Kind::Int: return "integer";
    case DocNode::Kind::Float: return "number";
    case DocNode::Kind::String: return "string";
    case DocNode::Kind::Seq: return "list";
    case DocNode::Kind::Map: return "object";
  }
  return "?";
}

}  // namespace kpc
