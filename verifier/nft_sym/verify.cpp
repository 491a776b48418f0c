#include "verifier/nft_sym/verify.h"

#include <algorithm>
#include <map>
#include <exception>
#include <set>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "verifier/nft_sym/compare.h"
#include "compiler/support/keep_until_exit.h"
#include "compiler/support/side_by_side.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/sem/report.h"

namespace kpc::verifier::nft_sym {
namespace {

std::string table_key(const nft::Table& t) { return std::string(nft::family_name(t.family)) + " " + t.name; }

// Chains reachable from a base chain (jumps, gotos, verdict-map values) and sets read by
// their rules. Names view the table's own strings.
struct Reach {
  std::unordered_set<std::string_view> chains, sets;
};
Reach reach_of(const nft::Table& t) {
  Reach r;
  std::vector<const nft::Chain*> todo;
  for (const auto& c : t.chains)
    if (c.base && !c.removed) todo.push_back(&c), r.chains.insert(c.name);
  std::unordered_set<const nft::Set*> maps_read;  // each map's elements read once
  while (!todo.empty()) {
    const nft::Chain* c = todo.back();
    todo.pop_back();
    auto visit = [&](std::string_view name) {
      const nft::Chain* n = t.find_chain(name);
      if (n && !n->removed && r.chains.insert(n->name).second) todo.push_back(n);
    };
    for (const auto& rule : c->rules) {
      for (const auto& n : rule.refs().chains) visit(n);
      for (const auto& s : rule.refs().sets) {
        r.sets.insert(s);
        const nft::Set* set = t.find_set(s);
        if (!set || !set->is_map || !maps_read.insert(set).second) continue;
        for (const auto& el : set->elements) {
          if (el.removed || !el.value) continue;
          nft_trace::VerdictSpec v;
          if (nft_trace::read_verdict(*el.value, &v) && !v.chain.empty()) visit(v.chain);
        }
      }
      for (const auto& s : rule.refs().dynset) r.sets.insert(s);
    }
  }
  return r;
}

// The comparisons below are those of the texts the first version built (a chain's rules'
// canonical texts in order; a set's live elements as sorted "key . : value" texts; the
// definitions' fields), made without building the texts when the objects are alike.
bool same_rules(const nft::Chain& a, const nft::Chain& b) {
  if (a.rules.size() != b.rules.size()) return false;
  for (size_t i = 0; i < a.rules.size(); ++i)
    if (a.rules[i].canonical() != b.rules[i].canonical()) return false;
  return true;
}
std::vector<std::string> element_texts(const nft::Set& s) {
  std::vector<std::string> out;
  for (const auto& e : s.elements) {
    if (e.removed) continue;
    std::string k;
    for (const auto& f : e.key) k += f + " . ";
    if (e.value) k += ": " + *e.value;
    out.push_back(std::move(k));
  }
  std::sort(out.begin(), out.end());
  return out;
}
bool same_elements(const nft::Set& a, const nft::Set& b) {
  // The same live elements in the same order have the same sorted texts.
  size_t i = 0, j = 0;
  for (;; ++i, ++j) {
    while (i < a.elements.size() && a.elements[i].removed) ++i;
    while (j < b.elements.size() && b.elements[j].removed) ++j;
    if (i == a.elements.size() || j == b.elements.size()) {
      if (i == a.elements.size() && j == b.elements.size()) return true;
      break;
    }
    if (a.elements[i].key != b.elements[j].key || a.elements[i].value != b.elements[j].value) break;
  }
  return element_texts(a) == element_texts(b);
}
bool same_chain_definition(const nft::Chain& a, const nft::Chain& b) {
  if (a.base != b.base) return false;
  return !a.base || (a.type == b.type && a.hook == b.hook && a.priority == b.priority && a.policy == b.policy);
}
bool same_set_definition(const nft::Set& a, const nft::Set& b) {
  return a.is_map == b.is_map && (!a.is_map || a.data_name == b.data_name) && a.key_names == b.key_names &&
         a.flags == b.flags && a.timeout_ms == b.timeout_ms;
}

void chain_services(const nft::Chain* c, std::set<std::string>& out) {
  if (!c) return;
  if (auto s = nft_trace::service_from_chain(c->name); !s.empty()) out.insert(s);
  for (const auto& r : c->rules)
    if (r.comment())
      if (auto s = trace::service_from_comment(*r.comment()); !s.empty()) out.insert(s);
}

}  // namespace

namespace {

// The objects of two tables paired by name (nullptr: only on one side), in no particular
// order. Two transactions written alike list their objects in the same order, so the other
// table's object at the next position is tried before its index; names are unique in a table.
template <class T, class Find>
std::vector<std::pair<const T*, const T*>> pair_by_name(const std::vector<T>& a, const std::vector<T>& b, Find find_b) {
  std::vector<std::pair<const T*, const T*>> out;
  out.reserve(std::max(a.size(), b.size()));
  std::vector<char> matched(b.size(), 0);
  size_t j = 0;
  for (const T& x : a) {
    const T* y = nullptr;
    if (j < b.size() && b[j].name == x.name) y = &b[j];
    else y = find_b(x.name);
    if (y) {
      j = static_cast<size_t>(y - b.data());
      matched[j++] = 1;
    }
    out.push_back({&x, y});
  }
  for (size_t k = 0; k < b.size(); ++k)
    if (!matched[k]) out.push_back({nullptr, &b[k]});
  return out;
}

void by_object(std::vector<ObjectDifference>& v) {
  std::sort(v.begin(), v.end(), [](const ObjectDifference& x, const ObjectDifference& y) { return x.object < y.object; });
}

}  // namespace

std::vector<ObjectDifference> object_differences(const nft::NftState& a, const nft::NftState& b) {
  // Reachability by a forward walk from each side's base chains, once per table.
  std::map<std::pair<const nft::Table*, const nft::Table*>, std::pair<Reach, Reach>> reach;
  return object_differences(a, b, [&](const nft::Table& ta, const nft::Table& tb, const std::string& name, bool is_set) {
    auto it = reach.find({&ta, &tb});
    if (it == reach.end()) {
      Reach ra, rb;
      side_by_side([&] { rb = reach_of(tb); }, [&] { ra = reach_of(ta); });
      it = reach.emplace(std::make_pair(&ta, &tb), std::make_pair(std::move(ra), std::move(rb))).first;
    }
    const auto& [ra, rb] = it->second;
    return is_set ? ra.sets.count(name) > 0 || rb.sets.count(name) > 0 : ra.chains.count(name) || rb.chains.count(name);
  });
}

std::vector<ObjectDifference> object_differences(const nft::NftState& a, const nft::NftState& b,
                                                 const ReachableFn& reachable) {
  std::vector<ObjectDifference> out;
  std::map<std::string, std::pair<const nft::Table*, const nft::Table*>> tables;
  for (const auto& t : a.tables) tables[table_key(t)].first = &t;
  for (const auto& t : b.tables) tables[table_key(t)].second = &t;
  for (const auto& [key, tt] : tables) {
    // Plain pointers, not a structured binding: the lambdas below capture them (clang 14 does
    // not let a lambda capture a structured binding).
    const nft::Table* ta = tt.first;
    const nft::Table* tb = tt.second;
    if (!ta || !tb) {
      out.push_back({key, "table", ta ? "only after partial" : "only after full", true, {}});
      continue;
    }
    // Chains, then sets, each by name (the order of the first version's name-keyed maps).
    std::vector<ObjectDifference> found;
    for (const auto& [ca, cb] : pair_by_name(ta->chains, tb->chains, [&](std::string_view n) { return tb->find_chain(n); })) {
      std::string kind;
      if (!ca || !cb) kind = ca ? "only after partial" : "only after full";
      else if (!same_chain_definition(*ca, *cb)) kind = "definition differs";
      else if (!same_rules(*ca, *cb)) kind = "rules differ";
      if (kind.empty()) continue;
      const std::string& name = (ca ? ca : cb)->name;
      ObjectDifference d{key, name, kind, reachable(*ta, *tb, name, false), {}};
      std::set<std::string> svcs;
      chain_services(ca, svcs);
      chain_services(cb, svcs);
      d.services.assign(svcs.begin(), svcs.end());
      found.push_back(std::move(d));
    }
    by_object(found);
    for (auto& d : found) out.push_back(std::move(d));
    found.clear();
    for (const auto& [sa, sb] : pair_by_name(ta->sets, tb->sets, [&](std::string_view n) { return tb->find_set(n); })) {
      std::string kind;
      if (!sa || !sb) kind = sa ? "only after partial" : "only after full";
      else if (!same_set_definition(*sa, *sb)) kind = "definition differs";
      else if (!same_elements(*sa, *sb)) kind = "elements differ";
      if (kind.empty()) continue;
      const std::string& name = (sa ? sa : sb)->name;
      bool is_map = (sa ? sa : sb)->is_map;
      found.push_back({key, std::string(is_map ? "map " : "set ") + name, kind, reachable(*ta, *tb, name, true), {}});
    }
    // Sorted by the set's name: "map " and "set " prefixes aside.
    std::sort(found.begin(), found.end(),
              [](const ObjectDifference& x, const ObjectDifference& y) { return x.object.substr(4) < y.object.substr(4); });
    for (auto& d : found) out.push_back(std::move(d));
  }
  return out;
}

bool read_nft_state(std::string_view text, std::string_view file_name, nft::NftState* out, nft::NftError* err) {
  *out = nft::NftState{};
  if (nft::looks_like_listing(text)) return nft::parse_listing(text, file_name, out, err);
  auto r = nft::apply_script(*out, text, file_name);
  if (!r.ok) {
    *err = *r.error;
    return false;
  }
  return true;
}

namespace {

// The verdict from the two applications (a: prior + partial, b: prior + full) and, when
// both apply, the two listings (computed by listings(), possibly side by side). (The model
// keeps no rule it does not read: a transaction applies only when kpc knows what it says.)
template <class Listings>
NftVerifyResult conclude(nft::NftState& a, nft::NftState& b, const nft::ApplyResult& ra, const nft::ApplyResult& rb,
                         const NftVerifyOptions& vo, Listings listings) {
  NftVerifyResult r;
  if (!rb.ok) {
    r.verdict = Verdict::FailsToApply;
    r.failure = *rb.error;
    r.failing_program = "full";
    return r;
  }
  if (!ra.ok) {
    r.verdict = Verdict::FailsToApply;
    r.failure = *ra.error;
    r.failing_program = "partial";
    return r;
  }
  if (listings()) return r;
  r.verdict = Verdict::Equivalent;
  r.differences = object_differences(a, b);
  bool reachable = false;
  for (const auto& d : r.differences) reachable = reachable || d.reachable;
  if (!reachable) return r;
  sem::CompareOptions co;
  co.local_addresses = vo.local_addresses;
  r.behaviour = compare_nft(b, a, co);
  if (r.behaviour->differing_classes)
    r.verdict = Verdict::NotEquivalent;
  else if (r.behaviour->undecided_classes)
    r.verdict = Verdict::CannotProve;
  else
    r.verdict = Verdict::Equivalent;
  return r;
}

// Are the two states' listings (`nft list ruleset`, no handles) equal? First a walk over
// exactly the fields print_ruleset reads, in the order it reads them (tables, their flags and
// comment; sets: name, kind, key and data types, flags, policy, size, timeouts, auto-merge,
// comment, elements in their order with every printed field and the bytes they are sorted by;
// flowtables; chains: name, comment, base properties, rules' canonical texts, not compared
// when both rules share one body, as a state and its copy do): equal fields print equal
// listings. Anything else (elements in another insertion order, say) is decided by printing
// both, as the sequential path does.
bool same_printed_fields(const nft::NftState& a, const nft::NftState& b) {
  if (a.tables.size() != b.tables.size()) return false;
  for (size_t i = 0; i < a.tables.size(); ++i) {
    const nft::Table &ta = a.tables[i], &tb = b.tables[i];
    if (ta.family != tb.family || ta.name != tb.name || ta.flags != tb.flags || ta.comment != tb.comment ||
        ta.sets.size() != tb.sets.size() || ta.chains.size() != tb.chains.size() ||
        ta.flowtables.size() != tb.flowtables.size())
      return false;
    for (size_t k = 0; k < ta.sets.size(); ++k) {
      const nft::Set &sa = ta.sets[k], &sb = tb.sets[k];
      if (sa.name != sb.name || sa.is_map != sb.is_map || sa.key != sb.key || sa.key_names != sb.key_names ||
          sa.data != sb.data || sa.data_name != sb.data_name || sa.flags != sb.flags || sa.policy != sb.policy ||
          sa.size != sb.size || sa.size_implied != sb.size_implied || sa.timeout_ms != sb.timeout_ms ||
          sa.gc_interval_ms != sb.gc_interval_ms || sa.auto_merge != sb.auto_merge || sa.comment != sb.comment ||
          sa.elements.size() != sb.elements.size())
        return false;
      for (size_t e = 0; e < sa.elements.size(); ++e) {
        const nft::Element &ea = sa.elements[e], &eb = sb.elements[e];
        if (ea.key != eb.key || ea.sort_key != eb.sort_key || ea.comment != eb.comment || ea.value != eb.value ||
            ea.timeout != eb.timeout || ea.expires != eb.expires)
          return false;
      }
    }
    for (size_t k = 0; k < ta.flowtables.size(); ++k) {
      const nft::Flowtable &fa = ta.flowtables[k], &fb = tb.flowtables[k];
      if (fa.name != fb.name || fa.hook != fb.hook || fa.priority != fb.priority || fa.devices != fb.devices) return false;
    }
    auto same_chains = [&](size_t from, size_t to) {
      for (size_t k = from; k < to; ++k) {
        const nft::Chain &ca = ta.chains[k], &cb = tb.chains[k];
        if (ca.name != cb.name || ca.comment != cb.comment || ca.base != cb.base || ca.type != cb.type ||
            ca.hook != cb.hook || ca.priority != cb.priority || ca.device != cb.device || ca.policy != cb.policy ||
            ca.rules.size() != cb.rules.size())
          return false;
        for (size_t r = 0; r < ca.rules.size(); ++r)
          if (ca.rules[r].body != cb.rules[r].body && ca.rules[r].canonical() != cb.rules[r].canonical()) return false;
      }
      return true;
    };
    // (a large table's chains in two halves side by side: they are only read)
    const size_t n = ta.chains.size();
    if (n < 16384) {
      if (!same_chains(0, n)) return false;
    } else {
      bool first = false, second = false;
      side_by_side([&] { second = same_chains(n / 2, n); }, [&] { first = same_chains(0, n / 2); });
      if (!first || !second) return false;
    }
  }
  return true;
}

// Applies the partial to a copy of the prior and the full to the prior itself, on two threads,
// then compares the listings, printed on two threads. (The copy is made while the full is
// evaluated, which only reads the prior; each thread then owns its state, so no look-up index
// is built by two threads at once.) The result is verify_nft's: the full's failure first, then the partial's.
NftVerifyResult verify_prepared(nft::NftState&& prior, nft::PreparedScript partial_script,
                                nft::PreparedScript full_script, std::string_view partial, std::string_view full,
                                const NftVerifyOptions& vo, std::string_view partial_name,
                                std::string_view full_name) {
  nft::NftState b = std::move(prior);  // prior + full
  nft::NftState a;                     // prior + partial
  nft::ApplyResult ra, rb;
  nft::PreparedScript spent_partial, spent_full;
  const bool keep = vo.keep_until_exit || vo.spent;
  nft::PreparedScript* keep_p = keep ? &spent_partial : nullptr;
  nft::PreparedScript* keep_f = keep ? &spent_full : nullptr;
  // The prior's copy is made while the full is evaluated; the partial is applied to it while the
  // full's batch runs.
  rb = nft::apply_prepared_forking(
      b, std::move(full_script), full, full_name,
      [&](nft::NftState& copy) {
        a = std::move(copy);
        ra = nft::apply_prepared(a, std::move(partial_script), partial, partial_name, keep_p);
      },
      keep_f);
  NftVerifyResult r = conclude(a, b, ra, rb, vo, [&] {
    if (same_printed_fields(a, b)) return true;
    std::string la, lb;
    side_by_side([&] { la = nft::print_ruleset(a); }, [&] { lb = nft::print_ruleset(b); });
    return la == lb;
  });
  if (vo.keep_until_exit) {
    keep_until_exit(std::move(a));
    keep_until_exit(std::move(b));
    keep_until_exit(std::move(spent_partial));
    keep_until_exit(std::move(spent_full));
  } else if (vo.spent) {
    vo.spent->push_back(std::make_shared<nft::NftState>(std::move(a)));
    vo.spent->push_back(std::make_shared<nft::NftState>(std::move(b)));
    vo.spent->push_back(std::make_shared<nft::PreparedScript>(std::move(spent_partial)));
    vo.spent->push_back(std::make_shared<nft::PreparedScript>(std::move(spent_full)));
  }
  return r;
}

}  // namespace

NftVerifyResult verify_nft(const nft::NftState& prior, std::string_view partial, std::string_view full,
                           const NftVerifyOptions& vo, std::string_view partial_name, std::string_view full_name) {
  nft::NftState a = prior, b = prior;  // a: prior + partial, b: prior + full
  auto rb = nft::apply_script(b, full, full_name);
  nft::ApplyResult ra;
  if (rb.ok) ra = nft::apply_script(a, partial, partial_name);
  return conclude(a, b, ra, rb, vo, [&] { return nft::print_ruleset(a) == nft::print_ruleset(b); });
}

NftVerifyResult verify_nft(nft::NftState&& prior, std::string_view partial, std::string_view full,
                           const NftVerifyOptions& vo, std::string_view partial_name, std::string_view full_name) {
  nft::PreparedScript pp, pf;
  side_by_side([&] { pf = nft::prepare_script(full); }, [&] { pp = nft::prepare_script(partial); });
  return verify_prepared(std::move(prior), std::move(pp), std::move(pf), partial, full, vo, partial_name, full_name);
}

bool verify_nft_texts(std::string_view prior_text, std::string_view prior_name, std::string_view partial,
                      std::string_view full, const NftVerifyOptions& vo, std::string_view partial_name,
                      std::string_view full_name, NftVerifyResult* out, nft::NftError* prior_error) {
  nft::PreparedScript pp, pf;
  nft::NftState prior;
  bool prior_ok = false;
  auto parse_transactions = [&] {
    pf = nft::prepare_script(full);
    pp = nft::prepare_script(partial);
  };
  if (nft::looks_like_listing(prior_text)) {
    side_by_side(parse_transactions, [&] { prior_ok = read_nft_state(prior_text, prior_name, &prior, prior_error); });
  } else {
    // A prior transaction (read_nft_state: applied to an empty node) is parsed in parts on
    // both threads while this one applies the parts parsed so far (nft::apply_while_parsing:
    // the prior's parse, ~1 s of work at 10,000 Services, and its application, ~0.5 s, were
    // the critical path one after the other). Once it is parsed, the other thread builds the
    // full's parse from the prior's (both are kube-proxy's full transactions: the full's
    // lines are mostly the prior's, pointed to rather than parsed again) and parses the partial.
    auto r = nft::apply_while_parsing(prior, prior_text, prior_name, [&](const nft::PreparedScript& parse) {
      pf = nft::prepare_script_like(full, parse, prior_text);
      pp = nft::prepare_script(partial);
    });
    prior_ok = r.ok;
    if (!r.ok) *prior_error = *r.error;
  }
  if (!prior_ok) return false;
  *out = verify_prepared(std::move(prior), std::move(pp), std::move(pf), partial, full, vo, partial_name, full_name);
  return true;
}

std::string format_text(const NftVerifyResult& r, bool verbose) {
  std::string out = std::string("verdict: ") + verdict_name(r.verdict) + "\n";
  if (r.failure)
    out += "the " + r.failing_program + " transaction fails at line " + std::to_string(r.failure->line) + ": " +
           r.failure->message + (r.failure->not_modelled ? "\n  kpc cannot say what nft does:\n" : "\n  nft would say:\n") +
           r.failure->render();
  for (const auto& d : r.differences) {
    out += "  " + d.table + " " + d.object + ": " + d.kind +
           (d.reachable ? " (reachable: may change packets)" : " (unreachable: no packet can see it)");
    if (!d.services.empty()) {
      out += " [";
      for (size_t i = 0; i < d.services.size(); ++i) out += (i ? ", " : "") + d.services[i];
      out += "]";
    }
    out += "\n";
  }
  if (r.behaviour) out += sem::verify_behaviour_text(*r.behaviour, verbose);
  return out;
}

std::string format_markdown(const NftVerifyResult& r) {
  std::string out = std::string("### kpc verify (nftables): ") + verdict_name(r.verdict) + "\n\n";
  if (r.failure)
    out += "The " + r.failing_program + " transaction fails at line " + std::to_string(r.failure->line) + ": `" +
           r.failure->message + "`\n\n";
  if (!r.differences.empty()) {
    out += "| table | object | difference | reachable | services |\n|---|---|---|---|---|\n";
    for (const auto& d : r.differences) {
      std::string svcs;
      for (size_t i = 0; i < d.services.size(); ++i) svcs += (i ? ", " : "") + d.services[i];
      out += "| " + d.table + " | " + d.object + " | " + d.kind + " | " + (d.reachable ? "yes" : "no") + " | " + svcs +
             " |\n";
    }
    out += "\n";
  }
  if (r.behaviour) {
    sem::ReportOptions ro;
    ro.before_name = "full";
    ro.after_name = "partial";
    out += sem::diff_markdown(*r.behaviour, ro);
  }
  return out;
}

std::string format_json(const NftVerifyResult& r) {
  nlohmann::json j;
  j["schema"] = "kpc.dev/verify/v1";
  j["backend"] = "nftables";
  j["verdict"] = verdict_name(r.verdict);
  if (r.failure)
    j["failure"] = {{"program", r.failing_program},
                    {"line", r.failure->line},
                    {"reason", r.failure->message},
                    {"message", r.failure->render()}};
  j["differences"] = nlohmann::json::array();
  for (const auto& d : r.differences)
    j["differences"].push_back({{"table", d.table},
                                {"chain", d.object},
                                {"kind", d.kind},
                                {"reachable", d.reachable},
                                {"services", d.services}});
  if (r.behaviour) {
    const auto& b = *r.behaviour;
    nlohmann::json jb;
    jb["differing_classes"] = b.differing_classes;
    jb["undecided_classes"] = b.undecided_classes;
    jb["narrowing"] = b.narrowing;
    jb["witnesses"] = nlohmann::json::array();
    for (const auto& d : b.differences)
      jb["witnesses"].push_back(nlohmann::json::parse(sem::difference_json(d, "full", "partial").dump()));
    jb["self_check_failures"] = b.self_check_failures;
    j["packets"] = jb;
  }
  return j.dump(2) + "\n";
}

}  // namespace kpc::verifier::nft_sym
