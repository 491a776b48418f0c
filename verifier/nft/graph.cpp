// The checks the kernel makes of a table's jump graph when a batch commits, as far as kpc
// models them: no loop, no jump depth over 16 from a base chain, and no dnat / snat /
// masquerade / reject in a chain a base chain of the wrong type or hook reaches. kpc refuses
// such batches as "not modelled" (the kernel's own message is not pinned down).
//
// The whole-table check walks every chain and rule: ~120 ms at 10,000 Services, paid by every
// batch however small. A batch that commits leaves behind, per table, what the check knew
// (GraphCache): for every chain a base chain reaches, which base chains may reach it and how
// long the longest path from one is. Both are upper bounds: a removal leaves them as they
// were, an addition raises them. The next batch is then checked from what it added:
//  * a new loop must use an edge the batch added (the table had none): a walk from each new
//    edge's target that meets a chain still on its path has found one;
//  * a new path from a base chain to a rule, or a longer one, starts with edges the table had
//    and then uses an added edge or reaches an added rule: raising the bounds from the added
//    edges onwards and checking the rules of every chain whose bounds rose (and of every
//    chain that got a rule) covers every such path.
// Anything this cannot clear -- a possible loop, a bound over the depth, a refused statement
// under a base chain that may reach it (the bounds are not exact), a batch whose changes were
// not tracked -- is checked in full, so the answer and the message are always the whole check's.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "compiler/support/side_by_side.h"
#include "verifier/nft/internal.h"

namespace kpc::verifier::nft::detail {

namespace {

constexpr int kMaxDepth = 15;  // a base chain's longest path may have 15 edges, not 16

enum : uint8_t { kDnat = 1, kSnat = 2, kMasquerade = 4, kReject = 8 };

uint8_t rule_kinds(const RuleRefs& f) {
  return static_cast<uint8_t>((f.dnat ? kDnat : 0) | (f.snat ? kSnat : 0) | (f.masquerade ? kMasquerade : 0) |
                              (f.reject ? kReject : 0));
}

// The statements a base chain's type and hook refuse.
uint8_t refused_kinds(const Chain& base) {
  const std::string& h = base.hook;
  const bool nat = base.type == "nat";
  uint8_t ok = 0;
  if (nat && (h == "prerouting" || h == "output")) ok |= kDnat;
  if (nat && (h == "postrouting" || h == "input")) ok |= kSnat;
  if (nat && h == "postrouting") ok |= kMasquerade;
  if (h == "prerouting" || h == "input" || h == "forward" || h == "output") ok |= kReject;
  return static_cast<uint8_t>(~ok & (kDnat | kSnat | kMasquerade | kReject));
}

// A table's jump graph (rules and verdict maps) over its live chains, by position. (Its
// names are views of the table's, which do not change while it is used.)
struct JumpGraph {
  static constexpr uint32_t kUnknown = UINT32_MAX;  // a target that is not a live chain
  std::vector<const Chain*> chains;           // live chains, in order
  std::vector<uint32_t> first;                // per chain: its targets are targets[first[i], first[i+1])
  std::vector<uint32_t> targets;              // (rule order; a map's targets in element order)
  // Names are looked up in the table's own index (live chains and sets by position), not in a
  // map built for the graph: building one cost half of the check of a 10,000-Service table.
  // two_threads: the chains' targets collected in two halves side by side (a large table).
  explicit JumpGraph(const Table& t, bool two_threads = false) {
    const TableIndex& ix = table_index(t);
    std::vector<uint32_t> id_at(t.chains.size(), kUnknown);  // chain position -> vertex
    chains.reserve(t.chains.size());
    for (size_t p = 0; p < t.chains.size(); ++p)
      if (!t.chains[p].removed) {
        id_at[p] = static_cast<uint32_t>(chains.size());
        chains.push_back(&t.chains[p]);
      }
    auto id = [&](std::string_view n) -> uint32_t {
      const uint32_t p = ix.chains.find(n, NamesOf{t.chains});
      return p < id_at.size() ? id_at[p] : kUnknown;
    };
    std::vector<std::vector<uint32_t>> set_targets(t.sets.size());  // set position -> its verdicts' vertices
    for (size_t p = 0; p < t.sets.size(); ++p) {
      const Set& st = t.sets[p];
      if (st.removed) continue;
      for (const auto& e : st.elements)
        if (!e.removed)
          if (auto c = verdict_chain(e.value)) set_targets[p].push_back(id(*c));
    }
    // The chains' targets, [b, e) of them into (first, targets) relative to targets' start.
    auto collect = [&](size_t b, size_t e, std::vector<uint32_t>& fst, std::vector<uint32_t>& tgt) {
      fst.reserve(e - b);
      for (size_t v = b; v < e; ++v) {
        fst.push_back(static_cast<uint32_t>(tgt.size()));
        for (const auto& r : chains[v]->rules) {
          for (const auto& c : r.refs().chains) tgt.push_back(id(c));
          for (const auto& sname : r.refs().sets) {
            const uint32_t sp = ix.sets.find(sname, NamesOf{t.sets});
            if (sp < set_targets.size() && !t.sets[sp].removed)
              tgt.insert(tgt.end(), set_targets[sp].begin(), set_targets[sp].end());
          }
        }
      }
    };
    const size_t n = chains.size();
    if (!two_threads) {
      collect(0, n, first, targets);
    } else {
      // (each half only reads the table, its index and set_targets)
      std::vector<uint32_t> first2, targets2;
      side_by_side([&] { collect(n / 2, n, first2, targets2); }, [&] { collect(0, n / 2, first, targets); });
      const auto base = static_cast<uint32_t>(targets.size());
      for (uint32_t& f : first2) f += base;
      first.insert(first.end(), first2.begin(), first2.end());
      targets.insert(targets.end(), targets2.begin(), targets2.end());
    }
    first.push_back(static_cast<uint32_t>(targets.size()));
  }
};

// dnat/snat/masquerade/reject in a chain a base chain of another type or hook reaches: the
// kernel refuses it (EOPNOTSUPP) on a message kpc does not pin down. Not modelled.
std::optional<std::string> find_misplaced(const JumpGraph& g) {
  bool any = false;
  for (const Chain* ch : g.chains)
    for (const auto& r : ch->rules) any = any || rule_kinds(r.refs()) != 0;
  if (!any) return std::nullopt;
  const size_t n = g.chains.size();
  std::vector<uint32_t> seen(n, UINT32_MAX);  // the base chain whose walk saw the chain
  std::vector<uint32_t> todo;
  for (uint32_t b = 0; b < n; ++b) {
    const Chain& base = *g.chains[b];
    if (!base.base) continue;
    const uint8_t refused = refused_kinds(base);
    todo.assign(1, b);
    while (!todo.empty()) {
      uint32_t v = todo.back();
      todo.pop_back();
      if (v == JumpGraph::kUnknown || seen[v] == b) continue;
      seen[v] = b;
      const Chain* ch = g.chains[v];
      for (const auto& r : ch->rules)
        if (rule_kinds(r.refs()) & refused)
          return "a rule of chain " + ch->name + " (" + r.canonical() + ") reached from base chain " + base.name +
                 " (type " + base.type + " hook " + base.hook + ")";
      for (uint32_t i = g.first[v]; i < g.first[v + 1]; ++i) todo.push_back(g.targets[i]);
    }
  }
  return std::nullopt;
}

// A cycle in a table's jump graph (rules and verdict maps): the kernel reports loops as
// EMLINK at places kpc does not model.
struct LoopFinder {
  const JumpGraph& g;
  std::vector<uint8_t> color;
  std::vector<int> depth;
  std::optional<uint32_t> found;
  explicit LoopFinder(const JumpGraph& gr) : g(gr), color(gr.chains.size(), 0), depth(gr.chains.size(), 0) {}
  // (a target that is not a live chain is a leaf: depth 0)
  int dfs(uint32_t v) {
    if (v == JumpGraph::kUnknown) return 0;
    uint8_t& c = color[v];
    if (c == 1) {
      found = v;
      return 0;
    }
    if (c == 2) return depth[v];
    c = 1;
    int d = 0;
    for (uint32_t i = g.first[v]; i < g.first[v + 1]; ++i) {
      d = std::max(d, 1 + dfs(g.targets[i]));
      if (found) return 0;
    }
    color[v] = 2;
    depth[v] = d;
    return d;
  }
};
std::optional<std::string> find_loop(const Table& t, const JumpGraph& g) {
  LoopFinder f(g);
  for (uint32_t i = 0; i < g.chains.size(); ++i) {
    int d = f.dfs(i);
    if (f.found) return "a loop through chain " + g.chains[*f.found]->name + " in table " + family_name(t.family) + " " + t.name;
    if (g.chains[i]->base && d > kMaxDepth) return "a jump depth over 16 from base chain " + g.chains[i]->name;
  }
  return std::nullopt;
}

}  // namespace

// ------------------------------------------------------------------ the cache

struct GraphCache {
  struct Node {
    uint64_t up = 0;      ///< bit i: base chain bases[i] may reach the chain
    int32_t height = -1;  ///< at least the longest path from a base chain (-1: none reaches it)
  };
  std::vector<std::string> bases;     ///< the bits of Node::up
  std::vector<uint8_t> base_refuses;  ///< per base chain: refused_kinds
  /// Chains some base chain may reach (absent: none does).
  std::unordered_map<std::string, Node, SvHash, std::equal_to<>> nodes;
  /// Set or map -> chains whose rules name it (a superset: a flush leaves names behind).
  std::unordered_map<std::string, std::vector<std::string>, SvHash, std::equal_to<>> set_users;
};

std::shared_ptr<GraphCache> clone(const GraphCache& g) { return std::make_shared<GraphCache>(g); }

namespace {

// The cache of a table that has just passed the whole check (g is its graph: no loops).
std::shared_ptr<GraphCache> build_cache(const JumpGraph& g, bool two_threads = false) {
  auto c = std::make_shared<GraphCache>();
  const size_t n = g.chains.size();
  std::vector<uint64_t> up(n, 0);
  std::vector<int32_t> height(n, -1);
  for (uint32_t v = 0; v < n; ++v) {
    const Chain& ch = *g.chains[v];
    if (!ch.base) continue;
    if (c->bases.size() == 64) return nullptr;  // more base chains than bits: always the whole check
    up[v] |= uint64_t{1} << c->bases.size();
    height[v] = 0;
    c->bases.push_back(ch.name);
    c->base_refuses.push_back(refused_kinds(ch));
  }
  // Topological order (post-order, reversed) of the acyclic graph, then longest paths.
  std::vector<uint32_t> order;
  order.reserve(n);
  std::vector<uint8_t> state(n, 0);
  std::vector<std::pair<uint32_t, uint32_t>> stack;  // (vertex, next target index)
  for (uint32_t s = 0; s < n; ++s) {
    if (state[s]) continue;
    state[s] = 1;
    stack.push_back({s, g.first[s]});
    while (!stack.empty()) {
      auto& [v, i] = stack.back();
      if (i < g.first[v + 1]) {
        uint32_t w = g.targets[i++];
        if (w != JumpGraph::kUnknown && !state[w]) {
          state[w] = 1;
          stack.push_back({w, g.first[w]});
        }
        continue;
      }
      order.push_back(v);
      stack.pop_back();
    }
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const uint32_t v = *it;
    if (height[v] < 0) continue;
    for (uint32_t i = g.first[v]; i < g.first[v + 1]; ++i) {
      uint32_t w = g.targets[i];
      if (w == JumpGraph::kUnknown) continue;
      up[w] |= up[v];
      height[w] = std::max(height[w], height[v] + 1);
    }
  }
  auto nodes = [&] {
    c->nodes.reserve(n);
    for (uint32_t v = 0; v < n; ++v)
      if (height[v] >= 0) c->nodes.emplace(g.chains[v]->name, GraphCache::Node{up[v], height[v]});
  };
  auto set_users = [&] {
    for (uint32_t v = 0; v < n; ++v) {
      const Chain& ch = *g.chains[v];
      for (const auto& r : ch.rules)
        for (const auto& s : r.refs().sets) {
          auto& users = c->set_users[s];
          if (users.empty() || users.back() != ch.name) users.push_back(ch.name);
        }
    }
  };
  // (two maps of their own: a large table's are built side by side)
  if (two_threads) side_by_side(set_users, nodes);
  else {
    nodes();
    set_users();
  }
  return c;
}

// The check of one table from one batch's changes, against the table's cache. clear() true:
// nothing new can be refused, and commit() brings the cache up to date; false: check in full.
class QuickCheck {
 public:
  QuickCheck(const Table& t, const GraphCache& c, const GraphChanges& ch) : t_(t), c_(c), ch_(ch) {}

  bool clear() {
    // A batch that touches a large part of the table (a full transaction on a table that holds
    // one) is checked whole: walking its changes one by one through name look-ups costs more.
    const size_t changes = ch_.rule_chains.size() + ch_.elements.size() + ch_.new_chains.size();
    if (changes > std::max<size_t>(1024, t_.chains.size() / 16)) return false;
    // New base chains get the next bits.
    for (uint32_t p : ch_.new_chains) {
      if (p >= t_.chains.size()) return false;
      const Chain& nc = t_.chains[p];
      if (nc.removed || !nc.base || !live(nc.name)) continue;
      if (std::find(c_.bases.begin(), c_.bases.end(), nc.name) != c_.bases.end()) continue;
      if (c_.bases.size() + new_bases_.size() >= 64) return false;
      new_bases_.push_back(&nc);
      if (!relax(nc.name, uint64_t{1} << (c_.bases.size() + new_bases_.size() - 1), 0)) return false;
    }
    // The edges the batch added: every edge of a chain that got a rule, and an added map
    // element's edge from every chain that may name the map.
    std::vector<std::pair<std::string_view, std::string_view>> edges;
    for (uint32_t p : ch_.rule_chains) {
      if (p >= t_.chains.size()) return false;
      const Chain& u = t_.chains[p];
      if (u.removed) continue;
      if (!seen_source_.insert(u.name).second) continue;
      sources_.push_back(&u);
      for_targets(u, [&](std::string_view x) { edges.push_back({u.name, x}); });
    }
    for (auto [sp, ep] : ch_.elements) {
      if (sp >= t_.sets.size()) return false;
      const Set& s = t_.sets[sp];
      if (s.removed || ep >= s.elements.size() || s.elements[ep].removed) continue;
      auto x = verdict_chain(s.elements[ep].value);
      if (!x) continue;
      auto users = c_.set_users.find(s.name);
      if (users != c_.set_users.end())
        for (const auto& u : users->second)
          if (live(u)) edges.push_back({chain_of(u)->name, *x});
      // (chains that got a rule naming the map are sources: their edges are above)
    }
    // Loops: a new one goes through a new edge, so a walk from its target comes back.
    for (const auto& [u, x] : edges)
      if (!acyclic_from(x)) return false;
    // The bounds, raised from the new edges (and new base chains) onwards.
    for (const auto& [u, x] : edges) {
      GraphCache::Node n = node(u);
      if (n.height < 0) continue;
      if (!relax(x, n.up, n.height + 1)) return false;
    }
    while (!work_.empty()) {
      std::string_view w = work_.back();
      work_.pop_back();
      GraphCache::Node n = node(w);
      const Chain* ch = chain_of(w);
      if (!ch) continue;
      bool ok = true;
      for_targets(*ch, [&](std::string_view y) { ok = ok && relax(y, n.up, n.height + 1); });
      if (!ok) return false;
    }
    // Refused statements: the rules of every chain whose bounds rose or that got a rule.
    for (const Chain* u : sources_)
      if (!allowed(*u)) return false;
    for (std::string_view w : raised_)
      if (const Chain* ch = chain_of(w); ch && !allowed(*ch)) return false;
    return true;
  }

  // The cache after the batch (call after clear() returned true).
  void commit(GraphCache& c) const {
    for (const Chain* b : new_bases_) {
      c.bases.push_back(b->name);
      c.base_refuses.push_back(refused_kinds(*b));
    }
    for (const auto& [name, n] : delta_) {
      auto it = c.nodes.find(name);
      if (it == c.nodes.end()) c.nodes.emplace(std::string(name), n);
      else it->second = n;
    }
    for (const Chain* u : sources_)
      for (const auto& r : u->rules)
        for (const auto& s : r.refs().sets) {
          auto& users = c.set_users[s];
          if (std::find(users.begin(), users.end(), u->name) == users.end()) users.push_back(u->name);
        }
    // Chains the batch removed (and did not add again) leave the cache.
    for (uint32_t p : ch_.removed_chains)
      if (p < t_.chains.size() && !live(t_.chains[p].name)) c.nodes.erase(t_.chains[p].name);
  }

 private:
  const Table& t_;
  const GraphCache& c_;
  const GraphChanges& ch_;
  std::vector<const Chain*> new_bases_, sources_;
  std::unordered_set<std::string_view> seen_source_;
  std::unordered_map<std::string_view, GraphCache::Node> delta_;
  std::vector<std::string_view> work_, raised_;
  std::unordered_map<std::string_view, uint8_t> color_;  // 1 on the walk's path, 2 done

  const Chain* chain_of(std::string_view name) const {
    const uint32_t p = table_index(t_).chains.find(name, NamesOf{t_.chains});
    if (p >= t_.chains.size()) return nullptr;
    const Chain& c = t_.chains[p];
    return c.removed ? nullptr : &c;
  }
  bool live(std::string_view name) const { return chain_of(name) != nullptr; }

  // Every target of a chain's rules (jumps, gotos, and the verdicts of the maps they name).
  template <class F>
  void for_targets(const Chain& ch, F&& f) const {
    for (const auto& r : ch.rules) {
      for (const auto& c : r.refs().chains) f(std::string_view(c));
      for (const auto& sname : r.refs().sets) {
        const uint32_t p = table_index(t_).sets.find(sname, NamesOf{t_.sets});
        if (p >= t_.sets.size()) continue;
        const Set& s = t_.sets[p];
        if (s.removed) continue;
        for (const auto& e : s.elements)
          if (!e.removed)
            if (auto x = verdict_chain(e.value)) f(*x);
      }
    }
  }

  GraphCache::Node node(std::string_view name) const {
    if (auto it = delta_.find(name); it != delta_.end()) return it->second;
    if (auto it = c_.nodes.find(name); it != c_.nodes.end()) return it->second;
    return {};
  }

  // Raises a chain's bounds to include (up, height); false when the depth bound is exceeded.
  // A target that is not a live chain is a leaf of the whole check's depth count.
  bool relax(std::string_view name, uint64_t up, int32_t height) {
    if (height > kMaxDepth) return false;
    const Chain* ch = chain_of(name);
    if (!ch) return true;
    GraphCache::Node n = node(name);
    GraphCache::Node m{n.up | up, std::max(n.height, height)};
    if (m.up == n.up && m.height == n.height) return true;
    std::string_view key = ch->name;  // a view that lives as long as the table
    if (!delta_.count(key)) raised_.push_back(key);
    delta_[key] = m;
    work_.push_back(key);
    return true;
  }

  bool allowed(const Chain& ch) const {
    GraphCache::Node n = node(ch.name);
    if (n.height < 0 || n.up == 0) return true;
    uint8_t refused = 0;
    for (size_t b = 0; b < c_.bases.size() + new_bases_.size(); ++b)
      if (n.up >> b & 1) refused |= b < c_.bases.size() ? c_.base_refuses[b] : refused_kinds(*new_bases_[b - c_.bases.size()]);
    if (!refused) return true;
    for (const auto& r : ch.rules)
      if (rule_kinds(r.refs()) & refused) return false;
    return true;
  }

  // No cycle is reachable from the chain `from` (iterative: the graph may be deep).
  bool acyclic_from(std::string_view from) {
    const Chain* root = chain_of(from);
    if (!root || color_[root->name] == 2) return true;
    struct Frame {
      const Chain* ch;
      std::vector<std::string_view> targets;
      size_t next = 0;
    };
    std::vector<Frame> stack;
    auto push = [&](const Chain* ch) {
      color_[ch->name] = 1;
      Frame f{ch, {}, 0};
      for_targets(*ch, [&](std::string_view x) { f.targets.push_back(x); });
      stack.push_back(std::move(f));
    };
    push(root);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next == f.targets.size()) {
        color_[f.ch->name] = 2;
        stack.pop_back();
        continue;
      }
      const Chain* w = chain_of(f.targets[f.next++]);
      if (!w) continue;
      uint8_t& c = color_[w->name];
      if (c == 1) return false;
      if (c == 0) push(w);
    }
    return true;
  }
};

}  // namespace

size_t graph_build_aside_min = 16384;

std::optional<GraphProblem> check_graphs(const NftState& s, const std::vector<GraphChanges>* changes,
                                         bool update_cache) {
  // The quick check, when every changed table has a cache (all tables or none are updated).
  if (changes && update_cache && changes->size() == s.tables.size()) {
    std::vector<std::pair<std::shared_ptr<GraphCache>, std::unique_ptr<QuickCheck>>> passed;
    bool all = true;
    for (size_t i = 0; i < s.tables.size() && all; ++i) {
      const GraphChanges& ch = (*changes)[i];
      if (!ch.any()) continue;
      // (held here: a look-up that rebuilds the table's index would drop it)
      std::shared_ptr<GraphCache> cache = table_index(s.tables[i]).graph;
      if (!cache) {
        all = false;
        break;
      }
      auto q = std::make_unique<QuickCheck>(s.tables[i], *cache, ch);
      if (!q->clear()) all = false;
      else passed.push_back({std::move(cache), std::move(q)});
    }
    if (all) {
      for (auto& [cache, q] : passed) q->commit(*cache);
      for (size_t k = 0, i = 0; i < s.tables.size(); ++i)
        if ((*changes)[i].any()) table_index(s.tables[i]).graph = std::move(passed[k++].first);
      return std::nullopt;
    }
  }
  // The whole check: misplaced statements (every table), then loops.
  std::vector<JumpGraph> graphs;
  graphs.reserve(s.tables.size());
  size_t chains = 0;
  for (const auto& t : s.tables) {
    graphs.emplace_back(t, t.chains.size() >= graph_build_aside_min);
    chains += t.chains.size();
  }
  std::optional<GraphProblem> problem;
  auto check = [&] {
    for (size_t i = 0; i < s.tables.size() && !problem; ++i)
      if (auto bad = find_misplaced(graphs[i])) problem = GraphProblem{true, *bad};
    for (size_t i = 0; i < s.tables.size() && !problem; ++i)
      if (auto loop = find_loop(s.tables[i], graphs[i])) problem = GraphProblem{false, *loop};
  };
  // The caches are built while the graphs are checked when the tables are large (a prior of
  // 10,000 Services: 0.07 s each), and dropped if the check fails: building one only reads
  // the graph and its chains, and ends on a graph with loops too.
  std::vector<std::shared_ptr<GraphCache>> caches(s.tables.size());
  auto build = [&] {
    for (size_t i = 0; i < s.tables.size(); ++i)
      caches[i] = build_cache(graphs[i], s.tables[i].chains.size() >= graph_build_aside_min);
  };
  if (!update_cache) {
    check();
  } else if (chains >= graph_build_aside_min) {
    kpc::side_by_side(build, check);
  } else {
    check();
    if (!problem) build();
  }
  if (problem) return problem;
  if (update_cache)
    for (size_t i = 0; i < s.tables.size(); ++i) table_index(s.tables[i]).graph = std::move(caches[i]);
  return std::nullopt;
}

}  // namespace kpc::verifier::nft::detail
