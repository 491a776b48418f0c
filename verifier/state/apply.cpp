// apply(): iptables-restore's semantics per flavour. Every branch here was
// checked against iptables v1.8.9 (legacy and nf_tables) in network namespaces;
// docs/verifier.md lists the cases and tests/kernel/verifier_* re-checks them.
#include <algorithm>
#include <functional>
#include <memory>
#include <thread>
#include <unordered_set>

#include "verifier/state/state.h"
#include "verifier/state/tail_parse.h"

namespace kpc::verifier {
namespace {

using ir::Op;
using ir::OpKind;

constexpr const char* kVersion = "v1.8.9";

// nft only: a rule that ":CHAIN" flushed from the kernel but that iptables-nft's
// rule cache still lists until the batch ends. -D/-R of it reach the kernel and
// fail (ENOENT); it counts for rule positions.
constexpr uint32_t kGhost = 0x80000000u;
// nft only: a rule appended in the current batch (iptables-nft 1.8.9 crashes on -R of one).
constexpr uint32_t kNew = 0x40000000u;
// nft only: a rule of a built-in chain that an unnamed -X dropped from iptables-nft's
// cache. The kernel keeps it; rule positions, -D RULE and -X CHAIN no longer see it.
constexpr uint32_t kHidden = 0x20000000u;
bool ghost(uint32_t id) { return id & kGhost; }
bool hidden(uint32_t id) { return id & kHidden; }
uint32_t rid(uint32_t id) { return id & ~(kGhost | kNew | kHidden); }
bool has_real_rules(const Chain& c) {
  for (uint32_t id : c.rules)
    if (!ghost(id)) return true;
  return false;
}

bool valid_policy(const std::string& p) { return p == "ACCEPT" || p == "DROP"; }

// The legacy kernel's mark_source_chains(): from each built-in chain, walk the
// rules in order, follow jumps and gotos, stop a chain at an unconditional
// ACCEPT/DROP/RETURN, do not re-walk a chain already walked from that hook;
// reaching a chain that is on the current path is a loop (ELOOP at commit).
// The chain a rule jumps to (nullptr: none, or missing): the loop checks follow every
// jump of a table (290k in a 10,000-Service nat table), by the store's name ids.
const Chain* jump_target(const TableState& t, const RuleStore& s, uint32_t id) { return t.chains.find(s.jump_id(id)); }
const Chain* builtin_chain(const TableState& t, const std::string& name) {
  return t.chains.find(RuleStore::builtin_name_id(name));
}

class LegacyLoopCheck {
 public:
  LegacyLoopCheck(const TableState& t, const RuleStore& s) : t_(t), s_(s) {}
  bool has_loop() {
    for (const auto& b : ir::builtin_chains(t_.id)) {
      ++walk_;  // a fresh "visited" and "on stack" for each hook, without clearing anything
      if (const Chain* c = builtin_chain(t_, b); c && walk(*c)) return true;
    }
    return false;
  }

 private:
  // Per chain, by its position in the table: the walk that last visited it and whether
  // it is on the current path. (A 10,000-Service nat table has 130k chains and 290k
  // jumps: name sets and a name lookup per jump made this check a third of loading a program.)
  struct Mark {
    uint64_t visited = 0, on_stack = 0;
  };
  Mark& mark(const Chain& c) { return marks_[t_.chains.index_of(c)]; }
  bool walk(const Chain& c) {
    Mark& m = mark(c);
    m.visited = m.on_stack = walk_;
    for (uint32_t id : c.rules) {
      if (s_.terminal(rid(id))) break;
      const Chain* j = jump_target(t_, s_, rid(id));
      if (!j) continue;
      const Mark& jm = mark(*j);
      if (jm.on_stack == walk_) return true;
      if (jm.visited != walk_ && walk(*j)) return true;
    }
    mark(c).on_stack = 0;
    return false;
  }
  const TableState& t_;
  const RuleStore& s_;
  uint64_t walk_ = 0;
  std::vector<Mark> marks_ = std::vector<Mark>(t_.chains.size());
};

// nf_tables' table validation: from each base chain, every jump/goto of every
// rule is followed; a chain reached at depth 16 (NFT_JUMP_STACK_SIZE), which
// every reachable loop eventually is, fails with EMLINK.
class NftDepthCheck {
 public:
  NftDepthCheck(const TableState& t, const RuleStore& s) : t_(t), s_(s) {}
  bool invalid() {
    for (const auto& b : ir::builtin_chains(t_.id)) {
      const Chain* c = builtin_chain(t_, b);
      int d = c ? depth(*c) : 0;
      if (d < 0 || d >= 16) return true;
    }
    return false;
  }

 private:
  // Longest jump path below a chain; -1 on a cycle. A jump to a missing chain counts 1.
  static constexpr int kUnvisited = -3, kInProgress = -2;
  int depth(const Chain& c) {
    int& memo = memo_[t_.chains.index_of(c)];
    if (memo != kUnvisited) return memo;
    memo = kInProgress;
    int best = 0;
    for (uint32_t id : c.rules) {
      if (ghost(id) || s_.jump_id(rid(id)) == RuleStore::kNoName) continue;
      int d = 0;
      if (const Chain* j = jump_target(t_, s_, rid(id))) {
        if (memo_[t_.chains.index_of(*j)] == kInProgress) return memo = -1;
        d = depth(*j);
      }
      if (d < 0) return memo = -1;
      best = std::max(best, d + 1);
      if (best >= 16) break;
    }
    return memo = best;
  }
  const TableState& t_;
  const RuleStore& s_;
  std::vector<int> memo_ = std::vector<int>(t_.chains.size(), kUnvisited);  // by position; -1: a cycle
};

class Applier {
 public:
  Applier(RulesetState& st, const ApplyOptions& o) : st_(st), o_(o) {
    bool v4 = st.family == IPFamily::V4;
    prog_ = o.flavor == Flavor::Legacy ? (v4 ? "iptables-restore" : "ip6tables-restore")
                                       : (v4 ? "iptables-nft-restore" : "ip6tables-nft-restore");
  }

  using OpVisitor = std::function<bool(const Op&)>;
  using Replay = std::function<void(const OpVisitor&)>;

  // The program as a stream of events (the parser's order).
  /// fetch_rules: the block contains -D, -R or -Z (nft loads the whole rule cache for it).
  void table_start(ir::TableId id, bool fetch_rules);
  void op(const Op& op);
  /// An -A op whose rule the store already holds (a remembered line): op.rule
  /// carries only the target's kind and chain.
  /// chain_id: the store's name id of op.chain.
  void op_interned(const Op& op, uint32_t id, uint32_t chain_id) {
    preinterned_ = id;
    preinterned_chain_ = chain_id;
    this->op(op);
    preinterned_ = preinterned_chain_ = RuleStore::kNoRule;
  }
  /// The replay visitor on an op whose rule the store already holds.
  bool visit_interned(const OpVisitor& f, const Op& op, uint32_t id, uint32_t chain_id) {
    preinterned_ = id;
    preinterned_chain_ = chain_id;
    bool r = f(op);
    preinterned_ = preinterned_chain_ = RuleStore::kNoRule;
    return r;
  }
  /// The rule id the last op interned (kNoRule if it stopped before that).
  uint32_t last_interned() const { return last_interned_; }
  void commit_block(uint32_t line, const Replay& replay, bool unterminated);
  void parse_error(const ParseError& e);
  /// No further input can change the outcome.
  bool stopped() const { return err_ && (legacy() || !in_block_); }
  ApplyResult result() {
    if (moved_from_real_) {  // a failed block (discard_on_failure): leave a valid table behind
      st_.table(t_.id) = std::move(t_);
      moved_from_real_ = false;
    }
    ApplyResult r;
    r.error = std::move(err_);
    r.tables_committed = committed_;
    return r;
  }

 private:
  bool legacy() const { return o_.flavor == Flavor::Legacy; }

  // --- error constructors (the real tool's wording) ---
  void param_error(uint32_t line, const std::string& msg, const std::string& reason, ErrorClass cls) {
    // xtables_error prefixes the program and version; "Bad argument" is printed by
    // the command parser itself, bare (both flavours).
    bool bare = msg.rfind("Bad argument `", 0) == 0;
    std::string m = (bare ? std::string() : prog_ + " " + kVersion + (legacy() ? " (legacy): " : " (nf_tables): ")) + msg + "\n";
    m += "Error occurred at line: " + std::to_string(line) + "\n";
    m += "Try `" + prog_ + " -h' or '" + prog_ + " --help' for more information.\n";
    set_error(ApplyError{line, 2, reason, std::move(m), cls});
  }
  void other_error(uint32_t line, const std::string& msg, const std::string& reason, ErrorClass cls) {
    std::string m = prog_ + " " + kVersion + (legacy() ? " (legacy): " : " (nf_tables): ") + msg + "\n";
    set_error(ApplyError{line, 1, reason, std::move(m), cls});
  }
  // legacy: "line N failed"; nft: "line N failed: <why>."
  void line_failed(uint32_t line, const std::string& nft_why, const std::string& reason, ErrorClass cls) {
    std::string m = prog_ + ": line " + std::to_string(line) + " failed";
    if (!legacy() && !nft_why.empty()) m += ": " + nft_why + ".";
    m += "\n";
    set_error(ApplyError{line, 1, reason, std::move(m), cls});
  }
  void kernel_error(uint32_t line, const std::string& what, const std::string& reason, ErrorClass cls) {
    kernel_lines_ += "line " + std::to_string(line) + ": " + what + "\n";
    if (!kernel_err_) kernel_err_ = ApplyError{line, 4, reason, "", cls};
  }
  void set_error(ApplyError e) {
    if (!err_) err_ = std::move(e);
  }

  // --- table transaction ---
  void begin(ir::TableId id);
  void commit(uint32_t commit_line, const Replay& replay);
  bool exec(const Op& op);

  // name lookups through nft's cache view (renamed chains keep their old name there)
  /// The chain of that name in the table (not the nft cache's view).
  Chain* find(const std::string& name) { return t_.chains.find(st_.store->find_name_near(name, &last_name_)); }
  bool cache_has(const std::string& name) const {
    if (!hidden_.empty() && hidden_.count(name)) return false;
    if (!stale_.empty() && stale_.count(name)) return true;
    return t_.chains.find(st_.store->find_name_near(name, &last_name_)) != nullptr;
  }
  mutable uint32_t last_name_ = 0;  // find_name_near()'s guess
  Chain* chain(const std::string& name) {
    if (!stale_.empty() && stale_.count(name)) return find(stale_.at(name));
    return find(name);
  }
  /// A jump target's chain, by the store's name id of the target (no renames pending).
  Chain* chain_for_jump(uint32_t nid, const std::string& name) {
    if (!stale_.empty() || nid == RuleStore::kNoName) return chain(name);
    return t_.chains.find(nid);
  }
  /// The chain a name denotes in the cache's view (nullptr: unknown there).
  Chain* lookup(const std::string& name) {
    if (!hidden_.empty() && hidden_.count(name)) return nullptr;
    return chain(name);
  }
  bool is_stale(const std::string& name) const { return !stale_.empty() && stale_.count(name); }

  void add_refs(uint32_t id) {
    if (ghost(id)) return;
    uint32_t n = st_.store->jump_id(rid(id));
    if (n == RuleStore::kNoName) return;
    if (n >= t_.refs.size()) t_.refs.resize(std::max<size_t>(n + 1, st_.store->name_count()));
    ++t_.refs[n];
  }
  void drop_refs(uint32_t id) {
    if (ghost(id)) return;
    uint32_t n = st_.store->jump_id(rid(id));
    if (n < t_.refs.size() && t_.refs[n]) --t_.refs[n];
  }
  // nft: zeroing a base chain's counters re-sends the chain as the cache fetched it,
  // so a policy set earlier in the batch reverts to the policy at the batch's start.
  void zero_builtin(Chain& c) {
    const Chain* orig = start_.chains.find(c.id);
    const bool refetched = !readded_.empty() && readded_.count(std::string(c.name));  // fresh in the cache
    c.policy = orig && orig->materialized && !refetched ? orig->policy : "ACCEPT";
  }
  void flush_chain(Chain& c) {
    for (uint32_t id : c.rules) drop_refs(id);
    c.rules.clear();
  }
  // nft ":CHAIN" of an existing chain: the kernel flushes it, the cache keeps the rules.
  void ghost_flush(Chain& c) {
    created_.insert(std::string(c.name));  // the kernel cannot rename it in this batch either
    for (uint32_t& id : c.rules) {
      drop_refs(id);
      id |= kGhost;
    }
  }
  bool ghost_hit(const Op& op, uint32_t id, const char* what) {
    if (!ghost(id)) return false;
    kernel_error(op.line, std::string(what) + " failed (No such file or directory): rule in chain " + op.chain,
                 "rule flushed by an earlier \":" + op.chain + "\" of this batch", ErrorClass::NoSuchRule);
    return true;
  }
  uint32_t refs_of(const Chain& c) const { return c.id < t_.refs.size() ? t_.refs[c.id] : 0; }
  uint32_t refs_of(const std::string& name) const {
    uint32_t n = st_.store->find_name(name);
    return n < t_.refs.size() ? t_.refs[n] : 0;
  }
  Chain& create_chain(const std::string& name) {
    Chain c;
    c.id = st_.store->name_id(name);
    c.name = st_.store->name(c.id);
    c.materialized = true;
    c.seq = st_.next_seq++;
    if (!legacy()) created_.insert(name);
    return t_.chains.insert(std::move(c));
  }
  /// Checks a rule's jump/goto target; false when the op must stop.
  bool check_target(const Op& op, uint32_t id);
  bool rule_op(const Op& op);

  bool moved_from_real_ = false;  // discard_on_failure: the block's table was moved out of the state
  uint32_t preinterned_ = RuleStore::kNoRule;
  uint32_t preinterned_chain_ = RuleStore::kNoName;
  uint32_t last_interned_ = RuleStore::kNoRule;
  RulesetState& st_;
  const ApplyOptions& o_;
  std::string prog_;
  std::optional<ApplyError> err_;
  size_t committed_ = 0;

  // current table transaction
  TableState t_;
  uint32_t commit_line_ = 0;
  bool in_block_ = false;
  uint32_t crash_line_ = 0;  // nft: a -R that makes iptables-nft 1.8.9 crash at COMMIT
  size_t sent_ops_ = 0;  // commands in the current block (an empty nft batch is never sent)
  bool present_at_start_ = false;  // nft: the table was in the kernel when the batch started
  bool block_err_ = false;      // nft: the error was raised by this block's commands (a parse error still wins)
  bool err_at_commit_ = false;  // nft: the error names the COMMIT line, not yet read
  std::optional<ApplyError> kernel_err_;
  std::string kernel_lines_;
  bool touched_ = false;
  bool validate_each_ = false;  // nft batch replay: validate the table after every new rule
  TableState start_;            // the table as the transaction started (after a flush)
  std::unordered_set<std::string> created_;
  bool fetch_rules_ = false;  // nft: the block has -D/-R/-Z, so iptables-nft loads every rule into its cache first
  std::unordered_map<std::string, std::string> stale_;  // nft: old name -> new name
  std::unordered_set<std::string> hidden_;              // nft: new names the cache does not know
  // nft: built-in chains an unnamed -X dropped from the cache (the kernel keeps them and
  // their rules, marked kHidden). -A, -I, -P, -F CHAIN or ":CHAIN" bring one back, empty.
  std::unordered_set<std::string> xdropped_;
  bool any_hidden_ = false;  // some rule of this block's table is kHidden
  // nft: iptables-nft remembers the last library function a command called (nft_fn) and
  // words an ENOENT by it; -Z CHAIN does not set it, so its "no such chain" is worded by
  // the command before (finding of the restore differential, docs/reliability.md).
  enum class LastFn : uint8_t { Other, ChainSet, RuleDelete };
  LastFn last_fn_ = LastFn::Other;  // per restore run, like the tool's static
  const char* zero_enoent() const {
    return last_fn_ == LastFn::ChainSet     ? "Bad built-in chain name"
           : last_fn_ == LastFn::RuleDelete ? "Bad rule (does a matching rule exist in that chain?)"
                                            : "No chain/target/match by that name";
  }
  /// The index in c.rules of the cache's n-th rule (1-based); c.rules.size() past the end.
  size_t cache_index(const Chain& c, uint32_t n) const {
    if (!any_hidden_) return n - 1 < c.rules.size() ? n - 1 : c.rules.size();
    for (size_t i = 0; i < c.rules.size(); ++i)
      if (!hidden(c.rules[i]) && --n == 0) return i;
    return c.rules.size();
  }
  size_t cache_count(const Chain& c) const {
    if (!any_hidden_) return c.rules.size();
    return std::count_if(c.rules.begin(), c.rules.end(), [](uint32_t id) { return !hidden(id); });
  }
  void drop_from_cache_view(Chain& c) {
    xdropped_.insert(std::string(c.name));
    for (uint32_t& id : c.rules) id |= kHidden;
    any_hidden_ = any_hidden_ || !c.rules.empty();
  }
  bool xdropped(const std::string& name) const { return !xdropped_.empty() && xdropped_.count(name); }
  void back_in_cache(const std::string& name) {
    if (!xdropped_.empty() && xdropped_.erase(name)) readded_.insert(name);
  }
  std::unordered_set<std::string> readded_;  // nft: dropped by -X, then created again in the cache
};

void Applier::begin(ir::TableId id) {
  TableState& real = st_.table(id);
  if (legacy() && !real.present) {
    // create_handle() makes the kernel instantiate the table, whatever happens next.
    real.present = true;
    real.instantiated = st_.next_instantiation++;
  }
  if (legacy() && o_.discard_on_failure) {
    t_ = std::move(real);
    moved_from_real_ = true;
  } else {
    t_ = real;
  }
  present_at_start_ = real.present && o_.noflush;
  kernel_err_.reset();
  kernel_lines_.clear();
  touched_ = false;
  created_.clear();
  stale_.clear();
  hidden_.clear();
  xdropped_.clear();
  readded_.clear();
  any_hidden_ = false;
  if (!o_.noflush) {
    if (legacy()) {
      t_.chains.keep_if([](Chain& c) {
        c.rules.clear();
        return c.builtin;
      });
      t_.refs.clear();
    } else {
      // nft deletes the whole table: policies reset, and it exists again only if written to.
      t_ = TableState::empty(id);
    }
  }
  if (!legacy()) start_ = t_;  // kept for nft's batch replay
  validate_each_ = false;
}

void Applier::commit(uint32_t commit_line, const Replay& replay) {
  if (err_) return;
  if (crash_line_) {
    set_error(ApplyError{crash_line_, 139, "iptables-nft-restore crashes on -R of a rule added in the same batch",
                         "Segmentation fault\n", ErrorClass::ToolCrash});
    return;
  }
  if (legacy() && LegacyLoopCheck(t_, *st_.store).has_loop()) {
    line_failed(commit_line, "", "a loop of jumps is reachable from a built-in chain", ErrorClass::Loop);
    return;
  }
  bool replayed_invalid = false;
  bool sent = sent_ops_ > 0 || (!o_.noflush && st_.table(t_.id).present);
  // Without other kernel errors the kernel validates the final table (a loop fails it);
  // with them the batch is simply aborted, unless every rule is being validated already.
  bool invalid = !legacy() && !kernel_err_ && NftDepthCheck(t_, *st_.store).invalid();
  if (!legacy() && (invalid || (st_.nft_validate_each && sent))) {
    // The kernel finds the table invalid at the end of the batch (or, after an earlier
    // batch failed that way, validates every new rule at once): nfnetlink replays the
    // batch validating after every new rule, and reports every failing message in order.
    replayed_invalid = invalid;
    uint64_t seq = st_.next_seq;
    kernel_err_.reset();
    kernel_lines_.clear();
    t_ = start_;
    created_.clear();
    stale_.clear();
    hidden_.clear();
    xdropped_.clear();
    readded_.clear();
    any_hidden_ = false;
    validate_each_ = true;
    replay([&](const Op& op) { return exec(op) && !err_; });
    st_.next_seq = seq;
    if (invalid && !kernel_err_ && !err_)
      kernel_error(commit_line, "table validation failed (Too many links)", "loop of jumps", ErrorClass::Loop);
  }
  if (replayed_invalid) st_.nft_validate_each = true;  // the kernel's validate state stays "validate each rule"
  if (!legacy() && kernel_err_) {
    ApplyError e = *kernel_err_;
    e.message = prog_ + " " + kVersion + " (nf_tables): \n" + kernel_lines_;
    err_ = std::move(e);
    return;
  }
  TableState& real = st_.table(t_.id);
  if (!legacy()) {
    t_.present = t_.present || touched_;
    for (Chain& c : t_.chains) {
      std::erase_if(c.rules, ghost);
      for (uint32_t& id : c.rules) id = rid(id);
    }
    if (sent) st_.nft_validate_each = false;
  }
  real = std::move(t_);
  moved_from_real_ = false;
  ++committed_;
}

bool Applier::check_target(const Op& op, uint32_t id) {
  const ir::Target& tg = op.rule.target;
  if (!tg.is_chain()) return true;
  const std::string& j = tg.chain;
  const uint32_t nid = st_.store->jump_id(id);  // the rule's interned form names the same chain
  if (legacy()) {
    const Chain* c = chain_for_jump(nid, j);
    if (!c) {
      if (tg.kind == ir::TargetKind::Goto) param_error(op.line, "goto '" + j + "' is not a chain", "goto to missing chain " + j, ErrorClass::JumpToMissingChain);
      else param_error(op.line, "Couldn't load target `" + j + "':No such file or directory\n", "jump to missing chain " + j, ErrorClass::JumpToMissingChain);
      return false;
    }
    if (c->builtin) {
      line_failed(op.line, "", "jump to built-in chain " + j, ErrorClass::JumpToBuiltinChain);
      return false;
    }
    return true;
  }
  const Chain* jc = !hidden_.empty() && hidden_.count(j) ? nullptr : chain_for_jump(nid, j);
  if (!jc) {
    // Raised while the batch is prepared at COMMIT: the COMMIT line is named.
    param_error(commit_line_, "Chain '" + j + "' does not exist", "jump to missing chain " + j, ErrorClass::JumpToMissingChain);
    err_at_commit_ = true;
    return false;
  }
  if (jc->builtin) {
    kernel_error(op.line, "RULE_APPEND failed (No such file or directory): rule in chain " + op.chain,
                 "jump to built-in chain " + j, ErrorClass::JumpToBuiltinChain);
    return true;
  }
  if (is_stale(j)) kernel_error(op.line, "RULE_APPEND failed (No such file or directory): rule in chain " + op.chain,
                                "jump to renamed chain " + j, ErrorClass::RenamedChain);
  return true;
}

bool Applier::rule_op(const Op& op) {
  // Interning first has no visible effect (the store is not the state); it gives the
  // target's name id. Both flavours resolve the target while building the rule,
  // before looking at the chain.
  uint32_t id = preinterned_ != RuleStore::kNoRule ? preinterned_ : st_.store->intern(op.rule, st_.family);
  if (!check_target(op, id)) return false;
  // A known line's chain comes as a name id (no renames pending: the cache view is the table).
  Chain* cp = preinterned_chain_ != RuleStore::kNoName && stale_.empty() && hidden_.empty()
                  ? t_.chains.find(preinterned_chain_)
                  : lookup(op.chain);
  if (!cp) {
    line_failed(op.line, "No chain/target/match by that name", "no chain " + op.chain, ErrorClass::NoSuchChain);
    return false;
  }
  if (is_stale(op.chain)) {
    kernel_error(op.line, "RULE_APPEND failed (No such file or directory): rule in chain " + op.chain,
                 "rule in renamed chain " + op.chain, ErrorClass::RenamedChain);
    return true;
  }
  Chain& c = *cp;
  if (xdropped(op.chain)) {
    // A built-in chain an unnamed -X dropped from the cache: -R and -D RULE find no chain
    // there; -A and -I create it again in the cache, empty (its kernel rules stay hidden).
    if (op.kind == OpKind::Replace) {
      line_failed(op.line, "No chain/target/match by that name", "built-in chain " + op.chain + " dropped from the cache by -X",
                  ErrorClass::NoSuchChain);
      return false;
    }
    if (op.kind == OpKind::Delete) {
      line_failed(op.line, "Bad rule (does a matching rule exist in that chain?)",
                  "built-in chain " + op.chain + " dropped from the cache by -X", ErrorClass::NoSuchRule);
      return false;
    }
    back_in_cache(op.chain);
  }
  if (op.kind != OpKind::Delete) c.materialized = true;
  last_interned_ = id;
  const uint32_t stored = legacy() ? id : id | kNew;
  switch (op.kind) {
    case OpKind::Append:
      c.rules.push_back(stored);
      add_refs(id);
      break;
    case OpKind::Insert: {
      uint32_t n = op.num ? op.num : 1;
      if (n > cache_count(c) + 1) {
        line_failed(op.line, "Index of insertion too big", "insert position " + std::to_string(n) + " beyond chain end", ErrorClass::IndexTooBig);
        return false;
      }
      // Position 1 is the chain's head in the kernel; any other goes after the cache's
      // rule n-1 (nft inserts after that rule's handle).
      c.rules.insert(c.rules.begin() + (n == 1 ? 0 : cache_index(c, n - 1) + 1), stored);
      add_refs(id);
      break;
    }
    case OpKind::Replace: {
      if (op.num == 0 || op.num > cache_count(c)) {
        line_failed(op.line, "Index of replacement too big", "replace position " + std::to_string(op.num) + " beyond chain end", ErrorClass::IndexTooBig);
        return false;
      }
      const size_t at = cache_index(c, op.num);
      if (ghost_hit(op, c.rules[at], "RULE_REPLACE")) return true;
      // iptables-nft 1.8.9 dies (SIGSEGV, exit 139, no message) when it encodes the batch if a
      // -R replaced a rule added in the same batch (no kernel handle yet): after every
      // command check passed, before the kernel sees anything.
      if ((c.rules[at] & kNew) && !crash_line_) crash_line_ = op.line;
      drop_refs(c.rules[at]);
      c.rules[at] = stored;
      add_refs(id);
      break;
    }
    case OpKind::Delete: {
      auto it = std::find_if(c.rules.begin(), c.rules.end(), [&](uint32_t e) { return rid(e) == id && !hidden(e); });
      if (it == c.rules.end()) {
        line_failed(op.line, "Bad rule (does a matching rule exist in that chain?)", "no such rule in " + op.chain, ErrorClass::NoSuchRule);
        return false;
      }
      if (ghost_hit(op, *it, "RULE_DELETE")) {
        c.rules.erase(it);
        return true;
      }
      drop_refs(*it);
      c.rules.erase(it);
      break;
    }
    default: break;
  }
  touched_ = true;
  if (validate_each_ && op.kind != OpKind::Delete && NftDepthCheck(t_, *st_.store).invalid()) {
    const char* what = op.kind == OpKind::Insert ? "RULE_INSERT" : op.kind == OpKind::Replace ? "RULE_REPLACE" : "RULE_APPEND";
    kernel_error(op.line, std::string(what) + " failed (Too many links): rule in chain " + op.chain,
                 "a loop of jumps (or more than 16 levels) is reachable from a built-in chain", ErrorClass::Loop);
  }
  return true;
}

bool Applier::exec(const Op& op) {
  if (!legacy()) {
    switch (op.kind) {
      case OpKind::DeclareChain:  // a user chain's declaration leaves it as it was
        if (ir::is_builtin_chain(t_.id, op.chain)) last_fn_ = LastFn::ChainSet;
        break;
      case OpKind::Policy: last_fn_ = LastFn::ChainSet; break;
      case OpKind::Delete: last_fn_ = LastFn::RuleDelete; break;
      case OpKind::Zero:
        if (op.num) last_fn_ = LastFn::RuleDelete;  // -Z CHAIN leaves it as it was
        break;
      default: last_fn_ = LastFn::Other; break;
    }
  }
  switch (op.kind) {
    case OpKind::DeclareChain: {
      bool builtin = ir::is_builtin_chain(t_.id, op.chain);
      if (legacy()) {
        if (!builtin) {
          Chain* c = find(op.chain);
          if (o_.noflush && c) {
            flush_chain(*c);
          } else if (c || op.chain == "ACCEPT" || op.chain == "DROP" || op.chain == "QUEUE" || op.chain == "RETURN") {
            param_error(op.line, "error creating chain '" + op.chain + "':File exists", "chain " + op.chain + " exists", ErrorClass::ChainExists);
            return false;
          } else {
            create_chain(op.chain);
          }
        }
        if (op.arg.empty()) {
          param_error(op.line, prog_ + ": line " + std::to_string(op.line) + " policy invalid", "no policy", ErrorClass::Syntax);
          return false;
        }
        if (op.arg != "-") {
          std::string why = !builtin ? "Bad built-in chain name" : !valid_policy(op.arg) ? "Bad policy name" : "";
          if (!why.empty()) {
            other_error(op.line, "Can't set policy `" + op.arg + "' on `" + op.chain + "' line " +
                                     std::to_string(op.line) + ": " + why,
                        why, ErrorClass::BadPolicy);
            return false;
          }
          find(op.chain)->policy = op.arg;
        }
        return true;
      }
      // nft
      if (op.arg.empty()) {
        param_error(op.line, prog_ + ": line " + std::to_string(op.line) + " policy invalid", "no policy", ErrorClass::Syntax);
        return false;
      }
      touched_ = true;
      if (builtin) {
        find(op.chain)->materialized = true;
        back_in_cache(op.chain);
        if (op.arg != "-") {
          if (!valid_policy(op.arg)) {
            line_failed(op.line, "Bad policy name", "bad policy " + op.arg, ErrorClass::BadPolicy);
            return false;
          }
          find(op.chain)->policy = op.arg;
        }
        return true;
      }
      if (Chain* c = cache_has(op.chain) ? chain(op.chain) : nullptr) {
        if (o_.noflush) ghost_flush(*c);
        else flush_chain(*c);
      } else {
        create_chain(op.chain);
      }
      return true;
    }
    case OpKind::Append:
    case OpKind::Insert:
    case OpKind::Replace:
    case OpKind::Delete: return rule_op(op);
    case OpKind::DeleteNum: {
      if (!cache_has(op.chain) || xdropped(op.chain)) {
        line_failed(op.line, "No chain/target/match by that name", "no chain " + op.chain, ErrorClass::NoSuchChain);
        return false;
      }
      Chain& c = *chain(op.chain);
      if (op.num == 0 || op.num > cache_count(c)) {
        line_failed(op.line, "Index of deletion too big", "delete position " + std::to_string(op.num) + " beyond chain end", ErrorClass::IndexTooBig);
        return false;
      }
      const size_t at = cache_index(c, op.num);
      bool g = ghost_hit(op, c.rules[at], "RULE_DELETE");
      drop_refs(c.rules[at]);
      c.rules.erase(c.rules.begin() + at);
      (void)g;
      return true;
    }
    case OpKind::NewChain: {
      if (cache_has(op.chain) || ir::is_builtin_chain(t_.id, op.chain)) {
        line_failed(op.line, "Chain already exists", "chain " + op.chain + " exists", ErrorClass::ChainExists);
        return false;
      }
      if (!legacy() && find(op.chain)) {
        kernel_error(op.line, "CHAIN_ADD failed (File exists): chain " + op.chain, "chain " + op.chain + " exists", ErrorClass::ChainExists);
        return true;
      }
      create_chain(op.chain);
      touched_ = true;
      return true;
    }
    case OpKind::DeleteChain: {
      auto busy = [&](const Chain& c) { return refs_of(c) > 0 || has_real_rules(c); };
      if (op.chain.empty()) {
        std::vector<std::string> names;
        for (const Chain& c : t_.chains)
          if (!c.builtin) names.emplace_back(c.name);
        std::sort(names.begin(), names.end());
        bool failed = false;
        for (const auto& n : names) {
          Chain& c = *find(n);
          if (busy(c)) {
            failed = true;
            if (legacy()) break;
            // nft drops it from its cache all the same; the kernel refuses the deletion.
            kernel_error(op.line, "CHAIN_DEL failed (Device or resource busy): chain " + n, "chain " + n + " is busy", ErrorClass::ChainBusy);
          }
                t_.chains.erase(c.id);
        }
        if (failed && legacy()) {
          line_failed(op.line, "", "a user chain is referenced or not empty", ErrorClass::ChainBusy);
          return false;
        }
        // iptables-nft 1.8.9 also drops the table's built-in chains from its cache (not from
        // the kernel): until a command creates one again, -Z, -D and -R find no such chain,
        // and its kernel rules are invisible to positions.
        if (!legacy())
          for (Chain& c : t_.chains)
            if (c.builtin && c.materialized) drop_from_cache_view(c);
        return true;
      }
      if (!legacy() && ir::is_builtin_chain(t_.id, op.chain)) {
        // iptables-nft deletes a built-in chain that exists (its policy goes back to ACCEPT).
        Chain& b = *find(op.chain);
        if (!b.materialized || xdropped(op.chain)) {
          line_failed(op.line, "No chain/target/match by that name", "built-in chain " + op.chain + " not created yet",
                      ErrorClass::NoSuchChain);
          return false;
        }
        bool cached_rules = fetch_rules_ ? cache_count(b) > 0
                                         : std::any_of(b.rules.begin(), b.rules.end(),
                                                       [](uint32_t id) { return (id & kNew) && !hidden(id); });
        if (cached_rules) {
          // iptables-nft's cache knows it has rules (all rules were fetched, or this block added
          // some): refused before the kernel.
          line_failed(op.line, "Directory not empty", "chain " + op.chain + " is not empty", ErrorClass::ChainBusy);
          return false;
        }
        if (has_real_rules(b))
          kernel_error(op.line, "CHAIN_DEL failed (Device or resource busy): chain " + op.chain,
                       "chain " + op.chain + " is not empty", ErrorClass::ChainBusy);
        b.rules.clear();
        b.policy = "ACCEPT";
        b.materialized = false;
        return true;
      }
      if (!cache_has(op.chain) || ir::is_builtin_chain(t_.id, op.chain)) {
        line_failed(op.line, "No chain/target/match by that name", "no user chain " + op.chain, ErrorClass::NoSuchChain);
        return false;
      }
      if (is_stale(op.chain)) {
        kernel_error(op.line, "CHAIN_DEL failed (No such file or directory): chain " + op.chain, "chain was renamed", ErrorClass::RenamedChain);
        return true;
      }
      Chain& c = *chain(op.chain);
      if (busy(c)) {
        const std::string name(c.name);
        std::string why = refs_of(c) ? "chain " + name + " is referenced" : "chain " + name + " is not empty";
        if (legacy()) {
          line_failed(op.line, "", why, ErrorClass::ChainBusy);
          return false;
        }
        kernel_error(op.line, "CHAIN_DEL failed (Device or resource busy): chain " + name, why, ErrorClass::ChainBusy);
      }
        t_.chains.erase(c.id);
      created_.erase(op.chain);
      return true;
    }
    case OpKind::Flush:
    case OpKind::Zero: {
      if (op.chain.empty()) {
        // iptables-nft flushes a table only if its cache had it when the batch started.
        if (op.kind == OpKind::Flush && (legacy() || present_at_start_))
          for (Chain& c : t_.chains) flush_chain(c);
        if (op.kind == OpKind::Zero && !legacy())
          for (Chain& c : t_.chains)
            if (c.builtin && c.materialized && !xdropped(std::string(c.name))) zero_builtin(c);
        return true;
      }
      // nft words a -Z CHAIN's ENOENT by the command before it; -Z CHAIN N's as a bad rule.
      const bool nft_zero = !legacy() && op.kind == OpKind::Zero;
      const char* no_chain = !nft_zero ? "No chain/target/match by that name"
                             : op.num ? "Bad rule (does a matching rule exist in that chain?)"
                                      : zero_enoent();
      if (!cache_has(op.chain)) {
        line_failed(op.line, no_chain, "no chain " + op.chain, ErrorClass::NoSuchChain);
        return false;
      }
      Chain& c = *chain(op.chain);
      if (nft_zero && xdropped(op.chain)) {
        // Dropped from the cache by an unnamed -X: no message at all for -Z CHAIN N.
        line_failed(op.line, op.num ? "" : no_chain, "built-in chain " + op.chain + " dropped from the cache by -X",
                    ErrorClass::NoSuchChain);
        return false;
      }
      if (nft_zero && c.builtin && !c.materialized) {
        line_failed(op.line, no_chain, "built-in chain " + op.chain + " not created yet", ErrorClass::NoSuchChain);
        return false;
      }
      if (op.kind == OpKind::Flush) {
        flush_chain(c);
        c.materialized = true;
        back_in_cache(op.chain);
      } else if (nft_zero && op.num) {
        // iptables-nft checks no position; zeroing a rule added in this batch (no kernel
        // handle yet) crashes it at COMMIT, as -R does.
        size_t at = cache_index(c, op.num);
        if (at < c.rules.size() && (c.rules[at] & kNew) && !crash_line_) crash_line_ = op.line;
      } else if (op.num > c.rules.size()) {
        line_failed(op.line, "Index of counter zeroing too big", "zero position beyond chain end", ErrorClass::IndexTooBig);
        return false;
      } else if (!legacy() && c.builtin && op.num == 0) {
        zero_builtin(c);
      }
      if (c.builtin) touched_ = true;
      return true;
    }
    case OpKind::Policy: {
      const Chain* c = cache_has(op.chain) ? chain(op.chain) : nullptr;
      if (!c || !c->builtin) {
        line_failed(op.line, "Bad built-in chain name", "-P on " + op.chain + ", not a built-in chain", ErrorClass::BadPolicy);
        return false;
      }
      if (!valid_policy(op.arg)) {
        line_failed(op.line, "Bad policy name", "bad policy " + op.arg, ErrorClass::BadPolicy);
        return false;
      }
      chain(op.chain)->policy = op.arg;
      chain(op.chain)->materialized = true;
      back_in_cache(op.chain);
      touched_ = true;
      return true;
    }
    case OpKind::Rename: {
      const std::string& from = op.chain;
      const std::string& to = op.arg;
      if (!cache_has(from) || ir::is_builtin_chain(t_.id, from)) {
        line_failed(op.line, "No chain/target/match by that name", "no user chain " + from, ErrorClass::NoSuchChain);
        return false;
      }
      if (cache_has(to) || ir::is_builtin_chain(t_.id, to)) {
        line_failed(op.line, "File exists", "chain " + to + " exists", ErrorClass::ChainExists);
        return false;
      }
      if (!legacy() && (created_.count(from) || is_stale(from))) {
        kernel_error(op.line, "CHAIN_RENAME failed (No such file or directory): chain " + to,
                     "chain " + from + " was created in this transaction", ErrorClass::RenamedChain);
        return true;
      }
      if (!legacy() && find(to)) {
        kernel_error(op.line, "CHAIN_RENAME failed (File exists): chain " + to, "chain " + to + " exists", ErrorClass::ChainExists);
        return true;
      }
        Chain moved = std::move(*find(from));
      t_.chains.erase(moved.id);
      moved.id = st_.store->name_id(to);
      moved.name = st_.store->name(moved.id);
      t_.chains.insert(std::move(moved));
      if (uint32_t n = refs_of(from)) {
        for (Chain& c : t_.chains)
          for (uint32_t& id : c.rules)
            if (st_.store->jump(rid(id)) == from) id = st_.store->renamed(rid(id), to) | (id & (kGhost | kNew));
        uint32_t from_id = st_.store->find_name(from), to_id = st_.store->name_id(to);
        if (to_id >= t_.refs.size()) t_.refs.resize(std::max<size_t>(to_id + 1, st_.store->name_count()));
        t_.refs[from_id] = 0;
        t_.refs[to_id] = n;
      }
      if (!legacy()) {
        stale_[from] = to;
        hidden_.insert(to);
      }
      return true;
    }
  }
  return true;
}

void Applier::table_start(ir::TableId id, bool fetch_rules) {
  in_block_ = true;
  fetch_rules_ = fetch_rules;
  crash_line_ = 0;
  sent_ops_ = 0;
  block_err_ = false;
  commit_line_ = 0;
  begin(id);
}

// nft: iptables-nft-restore checks the name of a declared user chain while reading
// (finding V2, docs/reliability.md): the standard verdicts and names starting with '-'
// or '!' stop it at that line like a syntax error (exit 2). iptables-legacy-restore
// creates such chains, except the four verdicts ("error creating chain", in exec()).
// Other target names (LOG, DNAT, ...) are accepted by both.
std::string nft_declared_name_error(const std::string& name) {
  if (!name.empty() && (name[0] == '-' || name[0] == '!'))
    return std::string("chain name not allowed to start with `") + name[0] + "'";
  if (name == "ACCEPT" || name == "DROP" || name == "QUEUE" || name == "RETURN")
    return "chain name may not clash with target name";
  return "";
}

void Applier::op(const Op& o) {
  last_interned_ = RuleStore::kNoRule;
  if (!legacy() && o.kind == OpKind::DeclareChain && !ir::is_builtin_chain(t_.id, o.chain)) {
    // A read-time error: it wins over command errors earlier in the block, as parse errors do.
    if (std::string why = nft_declared_name_error(o.chain); !why.empty()) {
      parse_error(ParseError{ParseErrorKind::Parameter, o.line, 2, std::move(why)});
      return;
    }
  }
  if (err_) return;  // legacy stops; nft keeps reading the block for a parse error
  ++sent_ops_;
  exec(o);
  if (err_) block_err_ = true;
}

void Applier::commit_block(uint32_t line, const Replay& replay, bool unterminated) {
  if (!err_ && unterminated && legacy()) {
    // iptables-legacy-restore only commits on "COMMIT\n": a final COMMIT without newline is a command.
    param_error(line, "Bad argument `COMMIT'", "COMMIT without newline", ErrorClass::Syntax);
  }
  in_block_ = false;
  if (err_) {
    if (err_at_commit_) {
      std::string& m = err_->message;
      std::string from = "Error occurred at line: " + std::to_string(err_->line);
      if (size_t p = m.find(from); p != std::string::npos) m.replace(p, from.size(), "Error occurred at line: " + std::to_string(line));
      err_->line = line;
      err_at_commit_ = false;
    }
    return;
  }
  commit_line_ = line;
  commit(line, replay);
}

void Applier::parse_error(const ParseError& perr) {
  if (!legacy() && in_block_ && block_err_) {
    // nft parses the whole block before running any of it: the parse error is what it reports.
    err_.reset();
    err_at_commit_ = false;
  }
  in_block_ = false;
  if (err_) return;
  switch (perr.kind) {
    case ParseErrorKind::LineFailed: line_failed(perr.line, "", perr.message, ErrorClass::OutsideTable); break;
    case ParseErrorKind::CommitExpected: {
      std::string m = prog_ + ": COMMIT expected at line " + std::to_string(perr.line) + "\n";
      set_error(ApplyError{perr.line, 1, "COMMIT expected", std::move(m), ErrorClass::CommitExpected});
      break;
    }
    case ParseErrorKind::UnknownTable:
      if (legacy())
        param_error(perr.line, prog_ + ": unable to initialize table '" + perr.message + "'", "unknown table " + perr.message,
                    ErrorClass::UnknownTable);
      else
        param_error(perr.line, prog_ + ": line " + std::to_string(perr.line) + " table name '" + perr.message + "' invalid",
                    "unknown table " + perr.message, ErrorClass::UnknownTable);
      break;
    case ParseErrorKind::Parameter:
    case ParseErrorKind::Unsupported: {
      std::string msg = perr.message;
      for (size_t p; (p = msg.find("%PROG%")) != std::string::npos;) msg.replace(p, 6, prog_);
      // The reason is one line; the message keeps the real tool's blank lines.
      std::string_view reason = msg;
      while (!reason.empty() && reason.front() == '\n') reason.remove_prefix(1);
      while (!reason.empty() && reason.back() == '\n') reason.remove_suffix(1);
      param_error(perr.line, msg, std::string(reason), ErrorClass::Syntax);
      break;
    }
  }
}

bool needs_rule_cache(const Op& op) {
  return op.kind == OpKind::Delete || op.kind == OpKind::DeleteNum || op.kind == OpKind::Replace || op.kind == OpKind::Zero;
}

ApplyResult run_program(Applier& a, const ir::Program& program, const ParseResult* parsed) {
  for (size_t b = 0; b < program.tables.size() && !a.stopped(); ++b) {
    const ir::TableBlock& blk = program.tables[b];
    a.table_start(blk.table, std::any_of(blk.ops.begin(), blk.ops.end(), needs_rule_cache));
    for (const Op& op : blk.ops) {
      a.op(op);
      if (a.stopped()) break;
    }
    if (a.stopped() || blk.commit_line == 0) break;
    bool last = b + 1 == program.tables.size();
    a.commit_block(blk.commit_line, [&](const Applier::OpVisitor& f) {
      for (const Op& op : blk.ops)
        if (!f(op)) break;
    }, last && parsed && parsed->last_commit_unterminated);
  }
  if (parsed && parsed->error && !a.stopped()) a.parse_error(*parsed->error);
  return a.result();
}

}  // namespace

ApplyResult apply(RulesetState& state, const ParseResult& parsed, const ApplyOptions& options) {
  if (state.tables.empty()) state = RulesetState::empty(parsed.program.family, state.store);
  size_t ops = 0;
  for (const auto& b : parsed.program.tables) ops += b.ops.size();
  state.store->reserve(state.store->size() + ops);
  Applier a(state, options);
  return run_program(a, parsed.program, &parsed);
}

ApplyResult apply(RulesetState& state, const ir::Program& program, const ApplyOptions& options) {
  if (state.tables.empty()) state = RulesetState::empty(program.family, state.store);
  Applier a(state, options);
  return run_program(a, program, nullptr);
}

// Samples up to 64 "-A" lines from the start of text: are most of them known lines?
// (The table is not tracked: the sample is taken in every table's index.)
bool mostly_known(std::string_view text, const RuleStore& store, IPFamily family) {
  if (store.size() == 0) return false;
  size_t seen = 0, known = 0;
  for (size_t p = text.find("\n-A "); p != std::string_view::npos && seen < 64; p = text.find("\n-A ", p + 1)) {
    size_t e = text.find('\n', p + 1);
    std::string_view line = text.substr(p + 1, e == std::string_view::npos ? std::string_view::npos : e - p);
    ++seen;
    for (auto t : {ir::TableId::Filter, ir::TableId::Nat, ir::TableId::Mangle, ir::TableId::Raw, ir::TableId::Security})
      if (store.known_line(family, t, line) != RuleStore::kNoRule) {
        ++known;
        break;
      }
  }
  return seen > 0 && known * 2 > seen;
}

ApplyResult apply_text(RulesetState& state, std::string_view text, const ApplyOptions& options, ParseError* parse_error) {
  ParseOptions po;
  po.family = state.tables.empty() ? IPFamily::V4 : state.family;
  if (state.tables.empty()) state = RulesetState::empty(po.family, state.store);
  RuleStore& store = *state.store;
  store.reserve(store.size() + text.size() / 100);
  Applier a(state, options);
  const IPFamily family = po.family;
  RuleStore::LineCursor cursor;
  auto known = [&store, family, &cursor](ir::TableId t, std::string_view line) {
    return store.known_line(family, t, line, &cursor);
  };
  // A remembered line becomes an -A op that carries only what the applier checks
  // before interning: the chain and the target's kind and chain.
  Op known_op;
  known_op.kind = OpKind::Append;
  struct KnownOp {
    const Op& op;
    uint32_t rule, chain;  // the rule's id and the chain's name id
  };
  auto known_event = [&](const RestoreReader& r) -> KnownOp {
    uint32_t id = store.line_rule(r.known_id());
    known_op.chain.assign(r.known_chain());
    known_op.line = r.line();
    const std::string& jump = store.jump(id);
    known_op.rule.target.kind = jump.empty() ? ir::TargetKind::None
                                : store.is_goto(id) ? ir::TargetKind::Goto
                                                    : ir::TargetKind::Jump;
    known_op.rule.target.chain = jump;
    return {known_op, id, store.line_chain(r.known_id())};
  };
  auto read_op = [&](RestoreReader& r, RestoreReader::Event e) {
    if (e == RestoreReader::Event::Known) {
      KnownOp k = known_event(r);
      a.op_interned(k.op, k.rule, k.chain);
      return;
    }
    a.op(r.op());
    if (!r.rememberable_line().empty() && a.last_interned() != RuleStore::kNoRule) {
      store.remember_line(family, r.table(), r.rememberable_line(), a.last_interned());
      cursor.next = static_cast<uint32_t>(store.record_count());  // where the tail thread's lines will start
    }
  };
  RestoreReader reader(text, po);
  reader.set_known_lines(known);
  // A large program the store has not seen: a second thread parses the last 60% of it
  // while this one applies the first 40% (parsing inline), then the rest is read as
  // known lines. The split balances the threads (measured on the 10,000-Service
  // program: splitting at 15-30% was slower): a known line costs this thread about a
  // fifth of a parsed one. A program whose lines are mostly known already (the full
  // program after its prior) gains nothing from it.
  std::unique_ptr<TailParser> tail;
  const size_t pct = std::min(options.parallel_parse_split_percent, 100u);
  const size_t split = text.size() / 100 * pct + text.size() % 100 * pct / 100;  // no overflow
  if (text.size() >= options.parallel_parse_min_bytes &&
      (options.parallel_parse_min_bytes == 0 || std::thread::hardware_concurrency() > 1) &&
      !mostly_known(text.substr(split), store, family))
    tail = std::make_unique<TailParser>(text, split, family);
  // Once a reader is about to read the tail (byte offset pos), the tail thread's rules are
  // interned and remembered: from there on its lines are known lines.
  auto take_tail_at = [&](size_t pos) {
    if (tail && pos >= tail->start()) {
      tail->merge_into(store);
      tail.reset();
    }
  };
  size_t block_offset = 0;
  uint32_t block_line = 0;
  while (!a.stopped()) {
    take_tail_at(reader.position());
    auto ev = reader.next();
    if (ev == RestoreReader::Event::End) break;
    switch (ev) {
      case RestoreReader::Event::TableStart: {
        block_offset = reader.line_offset();
        block_line = reader.line();
        bool fetch = false;
        if (options.flavor == Flavor::Nft) {
          // iptables-nft decides its cache before running the block: look ahead (nft only).
          // What the look-ahead parses, the main pass would parse again: its -A lines are
          // kept as known lines, and it takes the tail thread's work when it gets there.
          RestoreReader ahead(text.substr(block_offset), po, block_line);
          ahead.set_known_lines(known);  // a known line is an -A: it never needs the rule cache
          for (auto e = ahead.next(); e == RestoreReader::Event::TableStart || e == RestoreReader::Event::Op ||
                                      e == RestoreReader::Event::Known;
               e = ahead.next()) {
            if (e == RestoreReader::Event::Op && needs_rule_cache(ahead.op())) {
              fetch = true;
              break;
            }
            if (e == RestoreReader::Event::Op && !ahead.rememberable_line().empty())
              store.remember_line(family, ahead.table(), ahead.rememberable_line(), store.intern(ahead.op().rule, family));
            take_tail_at(block_offset + ahead.position());
          }
        }
        a.table_start(reader.table(), fetch);
        break;
      }
      case RestoreReader::Event::Op:
      case RestoreReader::Event::Known: read_op(reader, ev); break;
      case RestoreReader::Event::Commit: {
        bool unterminated = reader.last_commit_unterminated();
        a.commit_block(reader.line(), [&](const Applier::OpVisitor& f) {
          // Re-read the block (only a failing nft batch is replayed).
          RestoreReader again(text.substr(block_offset), po, block_line);
          again.set_known_lines(known);
          for (;;) {
            auto e = again.next();
            if (e == RestoreReader::Event::Op) {
              if (!f(again.op())) break;
            } else if (e == RestoreReader::Event::Known) {
              KnownOp k = known_event(again);
              if (!a.visit_interned(f, k.op, k.rule, k.chain)) break;
            } else if (e != RestoreReader::Event::TableStart) {
              break;
            }
          }
        }, unterminated);
        break;
      }
      case RestoreReader::Event::Error:
        if (parse_error) *parse_error = reader.error();
        a.parse_error(reader.error());
        break;
      case RestoreReader::Event::End: break;
    }
  }
  return a.result();
}

}  // namespace kpc::verifier
