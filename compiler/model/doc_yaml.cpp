// YAML reader on yaml-cpp's event API (no YAML::Node tree is built, which is
// faster and lets us bound alias expansion ourselves). Plain scalars are typed
// the way Kubernetes' YAML decoder (go-yaml v2, YAML 1.1) types them, so that
// `port: "80"` is a string and `port: 80` an integer, as the API server sees it.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <map>
#include <sstream>

#include "compiler/model/doc.h"

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

class Builder : public YAML::EventHandler {
 public:
  Builder(uint32_t file, const ReadLimits& limits) : file_(file), limits_(limits) {}

  DocNode take() {
    DocNode d = std::move(root_);
    root_ = DocNode{};
    has_root_ = false;
    return d;
  }
  bool has_root() const { return has_root_; }

  void OnDocumentStart(const YAML::Mark&) override { anchors_.clear(); }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    DocNode n;
    n.pos = pos(mark);
    add(std::move(n), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) throw YamlStop{pos(mark), DiagCode::YamlSyntax, "alias to an unknown anchor"};
    alias_nodes_ += it->second.second;
    if (alias_nodes_ > limits_.max_alias_nodes)
      throw YamlStop{pos(mark), DiagCode::AliasLimit,
                     "aliases expand to more than " + std::to_string(limits_.max_alias_nodes) + " nodes"};
    add(DocNode(it->second.first), 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    DocNode n;
    n.pos = pos(mark);
    n.text = value;
    if (tag == "?") n.kind = resolve_plain_scalar(value);
    else if (tag == "!" || tag == "tag:yaml.org,2002:str") n.kind = DocNode::Kind::String;
    else if (tag == "tag:yaml.org,2002:int") n.kind = DocNode::Kind::Int;
    else if (tag == "tag:yaml.org,2002:bool") n.kind = DocNode::Kind::Bool;
    else n.kind = DocNode::Kind::String;  // other explicit tags: keep the text
    add(std::move(n), anchor);
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
    const DocNode& m = stack_.back().node;
    if (const DocNode::Key* dup = find_duplicate_key(m))
      throw YamlStop{dup->pos, DiagCode::DuplicateKey, "duplicate key \"" + dup->name + "\""};
    close();
  }

 private:
  struct Frame {
    DocNode node;
    YAML::anchor_t anchor;
    bool expecting_key = true;  // maps alternate key, value
    DocNode::Key pending_key;
  };

  Pos pos(const YAML::Mark& m) const {
    return Pos{file_, static_cast<uint32_t>(m.line + 1), static_cast<uint32_t>(m.column + 1)};
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

  void add(DocNode n, YAML::anchor_t anchor) {
    if (++nodes_ > limits_.max_nodes) throw YamlStop{n.pos, DiagCode::AliasLimit, "too many nodes in one file"};
    if (anchor != 0) {
      size_t size = n.subtree_size();
      anchors_[anchor] = {n, size};
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
      if (!n.is_scalar())
        throw YamlStop{n.pos, DiagCode::YamlSyntax, "mapping keys must be scalars"};
      top.pending_key = {n.kind == DocNode::Kind::Null ? "" : std::move(n.text), n.pos};
      top.expecting_key = false;
    } else {
      top.node.keys.push_back(std::move(top.pending_key));
      top.node.items.push_back(std::move(n));
      top.expecting_key = true;
    }
  }

  uint32_t file_;
  const ReadLimits& limits_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, std::pair<DocNode, size_t>> anchors_;
  DocNode root_;
  bool has_root_ = false;
  size_t nodes_ = 0;
  size_t alias_nodes_ = 0;
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
  Builder builder(file, limits);
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
