// YAML reader on yaml-cpp's event API (no YAML::Node tree is built, which is
// faster and lets us bound alias expansion ourselves). Plain scalars are typed
// the way Kubernetes' YAML decoder (go-yaml v2, YAML 1.1) types them, so that
// `port: "80"` is a string and `port: 80` an integer, as the API server sees it.
//
// Where yaml-cpp 0.7 is more lenient than go-yaml v2 (kubectl, the API server), or
// unsafe, the Builder adds the missing checks:
//   * a document that starts where the previous one started has consumed nothing
//     (yaml-cpp loops on a ',' at the start of a block document): E0010 there;
//   * a quoted scalar without its closing quote (yaml-cpp reads to the end of the input
//     when it ends with a line break): E0010 at the opening quote;
//   * explicit !!int / !!bool / !!float / !!null tags whose text is not of that type: E0010;
//   * merge keys `<<` (plain or !!merge) are applied as go-yaml applies them;
//   * alias expansion is bounded in nodes and in text bytes (E0013), and anchored subtrees
//     are shared, not copied, until the document is complete.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_set>

#include "compiler/model/doc.h"
#include "compiler/support/text.h"

namespace kpc {
namespace {

struct YamlStop {
  Pos pos;
  DiagCode code;
  std::string message;
};

bool all_digits(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

// Resolves an untagged plain scalar to a kind (YAML 1.1 as go-yaml v2 does, restricted
// to what the API can carry). Leading-zero integers are kept as strings: go-yaml would
// read them as octal, a classic surprise, and a string fails loudly in an integer field.
// Shared with the fast reader (doc_yaml_fast.cpp), so both type scalars identically.
DocNode::Kind resolve_plain_scalar(std::string_view v) {
  static constexpr std::string_view kBools[] = {"true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes",
                                                "YES",  "no",   "No",   "NO",    "on",    "On",    "ON",  "off",
                                                "Off",  "OFF",  "y",    "Y",     "n",     "N"};
  switch (v.empty() ? '\0' : v[0]) {  // every boolean spelling starts with one of these
    case 't': case 'T': case 'f': case 'F': case 'y': case 'Y': case 'n': case 'N': case 'o': case 'O':
      for (std::string_view w : kBools)
        if (v == w) return DocNode::Kind::Bool;
      break;
    default:
      break;
  }
  std::string_view d = v;
  if (!d.empty() && (d[0] == '-' || d[0] == '+')) d.remove_prefix(1);
  if (all_digits(d) && (d.size() == 1 || d[0] != '0')) return DocNode::Kind::Int;
  bool has_digit = false, ok = !d.empty();
  size_t dots = 0;
  for (char c : d) {
    if (c >= '0' && c <= '9') has_digit = true;
    else if (c == '.') ++dots;
    else ok = false;
  }
  if (ok && has_digit && dots == 1) return DocNode::Kind::Float;
  return DocNode::Kind::String;
}

namespace {

// Explicit tags on scalars (yaml-cpp hands them over resolved to their full form).
constexpr std::string_view kTagStr = "tag:yaml.org,2002:str";
constexpr std::string_view kTagInt = "tag:yaml.org,2002:int";
constexpr std::string_view kTagBool = "tag:yaml.org,2002:bool";
constexpr std::string_view kTagNull = "tag:yaml.org,2002:null";
constexpr std::string_view kTagFloat = "tag:yaml.org,2002:float";
constexpr std::string_view kTagMerge = "tag:yaml.org,2002:merge";

// `!!int` text: a decimal integer as resolve_plain_scalar reads one ([-+]?(0|[1-9][0-9]*)).
// go-yaml also takes 0x1F, 0o17, 017, 1_000 and 1:30 under !!int; kpc reads none of
// them as integers untagged either (they stay strings and fail in integer fields), and
// ObjectReader::integer() parses decimal digits only, so under a tag they are errors.
bool valid_tagged_int(std::string_view v) { return resolve_plain_scalar(v) == DocNode::Kind::Int; }

// `!!float` text: [-+]? (digits [. digits*] | . digits) ([eE] [-+]? digits)?, or
// [-+]?.inf / .nan in YAML 1.1's three spellings.
bool valid_tagged_float(std::string_view v) {
  std::string_view d = v;
  if (!d.empty() && (d[0] == '-' || d[0] == '+')) d.remove_prefix(1);
  if (d == ".inf" || d == ".Inf" || d == ".INF") return true;
  if (v == ".nan" || v == ".NaN" || v == ".NAN") return true;
  size_t i = 0, mant = 0;
  while (i < d.size() && d[i] >= '0' && d[i] <= '9') ++i, ++mant;
  if (i < d.size() && d[i] == '.') {
    ++i;
    while (i < d.size() && d[i] >= '0' && d[i] <= '9') ++i, ++mant;
  }
  if (mant == 0) return false;
  if (i < d.size() && (d[i] == 'e' || d[i] == 'E')) {
    ++i;
    if (i < d.size() && (d[i] == '-' || d[i] == '+')) ++i;
    size_t exp = 0;
    while (i < d.size() && d[i] >= '0' && d[i] <= '9') ++i, ++exp;
    if (exp == 0) return false;
  }
  return i == d.size();
}

// A scalar's text for a message: at most 40 bytes, control bytes escaped.
std::string quote_for_message(std::string_view v) {
  constexpr size_t kMax = 40;
  std::string out = "\"" + printable(v.substr(0, kMax)) + "\"";
  if (v.size() > kMax) out += " (" + std::to_string(v.size()) + " bytes)";
  return out;
}

// "an integer", "a list", ... for messages.
std::string a_kind(DocNode::Kind k) {
  if (k == DocNode::Kind::Null) return "null";
  std::string name = kind_name(k);
  return (name[0] == 'i' || name[0] == 'o' ? "an " : "a ") + name;
}

class Builder : public YAML::EventHandler {
 public:
  Builder(const SourceManager& sm, uint32_t file, const ReadLimits& limits)
      : sm_(sm), text_(sm.text(file)), file_(file), limits_(limits) {
    // yaml-cpp skips a UTF-8 byte-order mark and counts its marks (pos, column) from
    // after it; other encodings (UTF-16/32) are transcoded, and their marks say nothing
    // about our bytes, so the checks that look at the source text are then skipped.
    const auto b = [&](size_t i) { return i < text_.size() ? static_cast<unsigned char>(text_[i]) : 0x100u; };
    if (b(0) == 0xEF && b(1) == 0xBB && b(2) == 0xBF) bom_ = 3;
    source_usable_ = !(b(0) == 0xFE || b(0) == 0xFF || b(0) == 0 || b(1) == 0 || b(2) == 0 || b(3) == 0);
    max_alias_bytes_ = std::max(limits.max_alias_bytes, ReadLimits::kAliasBytesPerInputByte * text_.size());
  }

  DocNode take() {
    DocNode d = std::move(root_);
    root_ = DocNode{};
    has_root_ = false;
    if (!refs_.empty()) {  // the document had anchors: materialize its aliases
      materializing_ = true;
      expand(d);
      materializing_ = false;
      refs_.clear();
    }
    return d;
  }
  bool has_root() const { return has_root_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    // yaml-cpp 0.7 starts a document at a token that cannot begin a node (a ',' in block
    // context) without consuming it, and then starts the next document at the same token,
    // forever. A document that begins where the previous one began has read nothing.
    if (docs_ > 0 && offset(mark) == last_doc_start_)
      throw YamlStop{pos(mark), DiagCode::YamlSyntax, "unexpected " + describe_at(mark) + " where a document or node should start"};
    ++docs_;
    last_doc_start_ = offset(mark);
    anchors_.clear();
    refs_.clear();
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    DocNode n;
    n.pos = pos(mark);
    add(std::move(n), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) throw YamlStop{pos(mark), DiagCode::YamlSyntax, "alias to an unknown anchor"};
    Anchored& a = refs_[it->second];
    alias_nodes_ += a.nodes;
    if (alias_nodes_ > limits_.max_alias_nodes)
      throw YamlStop{pos(mark), DiagCode::AliasLimit,
                     "aliases expand to more than " + std::to_string(limits_.max_alias_nodes) + " nodes"};
    alias_bytes_ += a.bytes;
    if (alias_bytes_ > max_alias_bytes_)
      throw YamlStop{pos(mark), DiagCode::AliasLimit,
                     "aliases expand to more than " + std::to_string(max_alias_bytes_) + " bytes of text"};
    ++a.uses;
    add(placeholder(it->second, pos(mark)), 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    DocNode n;
    n.pos = pos(mark);
    bool merge_key = false;
    if (tag == "?") {  // untagged plain scalar
      n.kind = resolve_plain_scalar(value);
      merge_key = value == "<<";
    } else {
      check_quoted_scalar_closed(mark);
      if (tag == "!" || tag == kTagStr) n.kind = DocNode::Kind::String;
      else if (tag == kTagInt) n.kind = checked(DocNode::Kind::Int, valid_tagged_int(value), "!!int", "a decimal integer", n.pos, value);
      else if (tag == kTagBool)
        n.kind = checked(DocNode::Kind::Bool, resolve_plain_scalar(value) == DocNode::Kind::Bool, "!!bool",
                         "true/false, yes/no, on/off or y/n", n.pos, value);
      else if (tag == kTagFloat) n.kind = checked(DocNode::Kind::Float, valid_tagged_float(value), "!!float", "a number", n.pos, value);
      else if (tag == kTagNull) n.kind = checked(DocNode::Kind::Null, is_yaml_null_plain(value), "!!null", "empty, ~ or null", n.pos, value);
      else {
        n.kind = DocNode::Kind::String;  // other explicit tags: keep the text
        merge_key = tag == kTagMerge && value == "<<";  // `!!merge <<` is the merge key too
      }
    }
    if (n.kind != DocNode::Kind::Null) n.text = value;
    add(std::move(n), anchor, merge_key);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, DocNode::Kind::Seq, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, DocNode::Kind::Map, anchor);
  }
  void OnMapEnd() override {
    Frame& f = stack_.back();
    if (const DocNode::Key* dup = find_duplicate_key(f.node))
      throw YamlStop{dup->pos, DiagCode::DuplicateKey, "duplicate key \"" + dup->name + "\""};
    if (f.merge_slot != kNoMerge) merge(f);
    close();
  }

 private:
  static constexpr size_t kNoMerge = static_cast<size_t>(-1);

  struct Frame {
    DocNode node;
    YAML::anchor_t anchor;
    bool expecting_key = true;  // maps alternate key, value
    bool pending_merge = false;  // the pending key is the merge key <<
    DocNode::Key pending_key;
    size_t merge_slot = kNoMerge;  // index of the << entry in node.keys/items
  };

  // An anchored subtree. The tree holds a placeholder for it (at the anchor and at each
  // alias), so nested anchors and aliases share one copy while the document is read;
  // take() materializes the placeholders: each use copies the subtree, the last one moves it.
  // (Keys and merge keys resolve theirs while the document is read, always by copying.)
  struct Anchored {
    std::unique_ptr<DocNode> node;
    size_t nodes = 0;  // nodes and text bytes of the expanded subtree
    size_t bytes = 0;
    size_t uses = 0;   // placeholders not yet materialized
    bool expanded = false;
  };

  // A placeholder is a Null node with text: real Null nodes never have text. Its pos is
  // where it was used (the anchor or the alias), for diagnostics.
  static DocNode placeholder(size_t ref, Pos at) {
    DocNode n;
    n.pos = at;
    n.text = std::to_string(ref);
    return n;
  }
  static bool is_placeholder(const DocNode& n) { return n.kind == DocNode::Kind::Null && !n.text.empty(); }
  static size_t ref_of(const DocNode& n) { return static_cast<size_t>(std::stoull(n.text)); }

  Pos pos(const YAML::Mark& m) const {
    return Pos{file_, static_cast<uint32_t>(m.line + 1), static_cast<uint32_t>(m.column + 1)};
  }

  // Offset in text_ of a yaml-cpp mark (its pos counts bytes after a byte-order mark).
  size_t offset(const YAML::Mark& m) const { return static_cast<size_t>(m.pos) + bom_; }

  // A position in yaml-cpp's convention for a byte offset of text_.
  Pos pos_at(size_t off) const {
    Pos p = sm_.position(file_, off);
    if (p.line == 1 && bom_ && p.col > bom_) p.col -= static_cast<uint32_t>(bom_);
    return p;
  }

  std::string describe_at(const YAML::Mark& m) const {
    size_t off = offset(m);
    if (!source_usable_ || off >= text_.size()) return "text";
    unsigned char c = static_cast<unsigned char>(text_[off]);
    if (c > 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    return "character";
  }

  DocNode::Kind checked(DocNode::Kind kind, bool ok, const char* tag, const char* want, Pos at,
                        const std::string& value) const {
    if (!ok)
      throw YamlStop{at, DiagCode::YamlSyntax,
                     quote_for_message(value) + " is not a valid " + tag + " (expected " + want + ")"};
    return kind;
  }

  // yaml-cpp 0.7 accepts a quoted scalar that is never closed if the input ends with a
  // line break (the value runs to the end of the input). A scalar that is not untagged
  // plain may be quoted: find where its text starts (after a tag and an anchor, which
  // is where the mark is) and, if that is a quote, check that it is closed.
  void check_quoted_scalar_closed(const YAML::Mark& mark) const {
    if (!source_usable_) return;
    const size_t n = text_.size();
    size_t i = offset(mark);
    auto blank = [&](size_t k) { return text_[k] == ' ' || text_[k] == '\t' || text_[k] == '\n' || text_[k] == '\r'; };
    while (i < n && (text_[i] == '!' || text_[i] == '&')) {
      const bool tag = text_[i] == '!';
      // Tags end at a blank or at '"' (not a tag character); anchors at a blank or a flow indicator.
      while (i < n && !blank(i) && !(tag ? text_[i] == '"' : std::strchr(",[]{}", text_[i]) != nullptr)) ++i;
      for (;;) {  // separation: blanks, line breaks and comments
        while (i < n && blank(i)) ++i;
        if (i < n && text_[i] == '#') {
          while (i < n && text_[i] != '\n') ++i;
          continue;
        }
        break;
      }
    }
    if (i >= n || (text_[i] != '"' && text_[i] != '\'')) return;
    const char q = text_[i];
    for (size_t k = i + 1; k < n; ++k) {
      if (q == '"' && text_[k] == '\\') {
        ++k;  // an escaped character, which may be a quote
        continue;
      }
      if (text_[k] != q) continue;
      if (q == '\'' && k + 1 < n && text_[k + 1] == '\'') {
        ++k;  // '' in a single-quoted scalar
        continue;
      }
      return;  // closed
    }
    throw YamlStop{pos_at(i), DiagCode::YamlSyntax,
                   std::string(q == '"' ? "double" : "single") + "-quoted scalar is never closed (no matching " + q +
                       " before the end of the input)"};
  }

  void open(const YAML::Mark& mark, DocNode::Kind kind, YAML::anchor_t anchor) {
    if (stack_.size() >= limits_.max_depth)
      throw YamlStop{pos(mark), DiagCode::NestingTooDeep,
                     "nesting deeper than " + std::to_string(limits_.max_depth) + " levels"};
    Frame f;
    f.node.kind = kind;
    f.node.pos = pos(mark);
    f.anchor = anchor;
    stack_.push_back(std::move(f));
  }

  void close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(f.node), f.anchor);
  }

  // Nodes and text bytes of n once its placeholders are expanded. Stops at placeholders,
  // whose sizes are known, so every node is measured once however anchors nest.
  void measure(const DocNode& n, size_t* nodes, size_t* bytes) const {
    if (is_placeholder(n)) {
      const Anchored& a = refs_[ref_of(n)];
      *nodes += a.nodes;
      *bytes += a.bytes;
      return;
    }
    *nodes += 1;
    *bytes += n.text.size();
    for (const auto& k : n.keys) *bytes += k.name.size();
    for (const auto& c : n.items) measure(c, nodes, bytes);
  }

  // The subtree a placeholder stands for, fully expanded: a copy, or the subtree itself
  // when this is its last placeholder.
  DocNode resolve(const DocNode& ph) {
    Anchored& a = refs_[ref_of(ph)];
    if (!a.expanded) {
      a.expanded = true;
      expand(*a.node);
    }
    if (a.uses > 0) --a.uses;
    // Move only while take() materializes the finished document: while it is being read,
    // an alias further on may still refer to the anchor.
    if (a.uses == 0 && materializing_) return std::move(*a.node);
    return *a.node;
  }

  void expand(DocNode& n) {
    if (is_placeholder(n)) {
      n = resolve(n);
      return;
    }
    for (auto& c : n.items) expand(c);
  }

  // YAML 1.1 merge keys, as go-yaml v2 (kubectl, the API server) applies them: the value
  // of `<<` is a mapping or a list of mappings whose entries are added to this mapping;
  // explicit keys win over merged ones, and earlier mappings in the list over later ones.
  // Merged entries keep their own positions and take the place of the << entry.
  void merge(Frame& f) {
    DocNode& m = f.node;
    const size_t slot = f.merge_slot;
    DocNode value = std::move(m.items[slot]);
    // An empty value is marked at the next token; report it at the << key instead.
    const Pos value_pos = value.kind == DocNode::Kind::Null && value.text.empty() ? m.keys[slot].pos : value.pos;
    if (is_placeholder(value)) value = resolve(value);
    const char* const kWant = "the value of the merge key << must be a mapping or a list of mappings";
    std::vector<DocNode> sources;
    if (value.is_map()) {
      sources.push_back(std::move(value));
    } else if (value.is_seq()) {
      for (auto& item : value.items) {
        const Pos item_pos = item.pos;
        DocNode src = is_placeholder(item) ? resolve(item) : std::move(item);
        if (!src.is_map())
          throw YamlStop{item_pos, DiagCode::YamlSyntax, std::string(kWant) + ", not a list holding " + a_kind(src.kind)};
        sources.push_back(std::move(src));
      }
    } else {
      throw YamlStop{value_pos, DiagCode::YamlSyntax, std::string(kWant) + ", not " + a_kind(value.kind)};
    }
    std::unordered_set<std::string> seen;
    for (size_t i = 0; i < m.keys.size(); ++i)
      if (i != slot) seen.insert(m.keys[i].name);
    std::vector<DocNode::Key> keys;
    std::vector<DocNode> items;
    keys.reserve(m.keys.size());
    items.reserve(m.items.size());
    for (size_t i = 0; i < m.keys.size(); ++i) {
      if (i != slot) {
        keys.push_back(std::move(m.keys[i]));
        items.push_back(std::move(m.items[i]));
        continue;
      }
      for (auto& src : sources)
        for (size_t j = 0; j < src.keys.size(); ++j)
          if (seen.insert(src.keys[j].name).second) {
            keys.push_back(std::move(src.keys[j]));
            items.push_back(std::move(src.items[j]));
          }
    }
    m.keys = std::move(keys);
    m.items = std::move(items);
    f.merge_slot = kNoMerge;
  }

  void add(DocNode n, YAML::anchor_t anchor, bool merge_key = false) {
    if (++nodes_ > limits_.max_nodes) throw YamlStop{n.pos, DiagCode::AliasLimit, "too many nodes in one file"};
    if (anchor != 0) {  // keep the subtree in the anchor table; the tree gets a placeholder
      Anchored a;
      measure(n, &a.nodes, &a.bytes);
      a.uses = 1;
      Pos at = n.pos;
      a.node = std::make_unique<DocNode>(std::move(n));
      refs_.push_back(std::move(a));
      anchors_[anchor] = refs_.size() - 1;
      n = placeholder(refs_.size() - 1, at);
    }
    if (stack_.empty()) {
      root_ = std::move(n);
      has_root_ = true;
      return;
    }
    Frame& top = stack_.back();
    if (top.node.kind == DocNode::Kind::Seq) {
      top.node.items.push_back(std::move(n));
    } else if (top.expecting_key) {
      if (is_placeholder(n)) n = resolve(n);  // an alias (or an anchored scalar) as a key
      if (!n.is_scalar())
        throw YamlStop{n.pos, DiagCode::YamlSyntax, "mapping keys must be scalars"};
      top.pending_key = {n.kind == DocNode::Kind::Null ? "" : std::move(n.text), n.pos};
      top.pending_merge = merge_key;
      top.expecting_key = false;
    } else {
      if (top.pending_merge) top.merge_slot = top.node.keys.size();
      top.node.keys.push_back(std::move(top.pending_key));
      top.node.items.push_back(std::move(n));
      top.expecting_key = true;
      top.pending_merge = false;
    }
  }

  const SourceManager& sm_;
  const std::string& text_;
  uint32_t file_;
  const ReadLimits& limits_;
  size_t bom_ = 0;
  bool source_usable_ = true;
  size_t max_alias_bytes_ = 0;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, size_t> anchors_;  // anchor -> index in refs_
  std::vector<Anchored> refs_;
  DocNode root_;
  bool has_root_ = false;
  bool materializing_ = false;
  size_t docs_ = 0;
  size_t last_doc_start_ = 0;
  size_t nodes_ = 0;
  size_t alias_nodes_ = 0;
  size_t alias_bytes_ = 0;
};

}  // namespace

bool read_yaml(const SourceManager& sm, uint32_t file, const ReadLimits& limits, std::vector<DocNode>* out,
               DiagSink& diags) {
  // The fast path covers what kubectl prints; anything else goes to yaml-cpp, whole file.
  bool declined = false;
  bool ok = read_yaml_fast(sm, file, limits, out, diags, &declined);
  if (!declined) return ok;
  return read_yaml_reference(sm, file, limits, out, diags);
}

bool read_yaml_reference(const SourceManager& sm, uint32_t file, const ReadLimits& limits,
                         std::vector<DocNode>* out, DiagSink& diags) {
  std::istringstream in(sm.text(file));
  Builder builder(sm, file, limits);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(builder)) {
      if (builder.has_root()) {
        DocNode d = builder.take();
        if (!d.is_null()) out->push_back(std::move(d));
      }
    }
    return true;
  } catch (const YamlStop& e) {
    diags.report(e.code, e.pos, "", "", e.message);
  } catch (const YAML::Exception& e) {
    Pos p{file, static_cast<uint32_t>(e.mark.line + 1), static_cast<uint32_t>(e.mark.column + 1)};
    if (e.mark.is_null()) p = Pos{file, 1, 1};
    std::string msg = e.msg;
    if (msg.find("deep recursion") != std::string::npos || msg.find("depth") != std::string::npos)
      diags.report(DiagCode::NestingTooDeep, p, "", "", msg);
    else
      diags.report(DiagCode::YamlSyntax, p, "", "", msg);
  }
  return false;
}

}  // namespace kpc
