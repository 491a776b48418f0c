#include "tests/support/nft_derived.h"

#include <algorithm>
#include <vector>

#include "tests/support/text_lines.h"

namespace kpc::test {

// A script made from the prior's lines (and a transaction's), one way or another.
std::string nft_derived_script(NftGen& gen, const std::string& prior, const verifier::nft::NftState& state, int how) {
  std::vector<std::string> l = lines_of(prior);
  auto at = [&] { return gen.next(l.size() + 1); };
  switch (how) {
    case 0: return prior;
    case 1: return gen.rewrite(state);
    case 2: return gen.transaction(state);
    case 3:  // lines deleted: what they add is missing for the lines after them
      for (int k = 0; k < 3 && !l.empty(); ++k) l.erase(l.begin() + static_cast<long>(gen.next(l.size())));
      return join_lines(l);
    case 4:  // lines repeated and swapped
      if (!l.empty()) {
        const size_t a = gen.next(l.size()), b = gen.next(l.size());
        l.insert(l.begin() + static_cast<long>(at()), l[a]);
        std::swap(l[a], l[b]);
      }
      return join_lines(l);
    case 5: {  // a transaction's lines in the middle (errors on the copied lines after them)
      const std::vector<std::string> t = lines_of(gen.transaction(state));
      l.insert(l.begin() + static_cast<long>(at()), t.begin(), t.end());
      return join_lines(l);
    }
    case 6: {  // some of the prior's lines inside a table block: not whole commands there
      if (l.size() < 2) return prior;
      const size_t b = gen.next(l.size() - 1), e = b + 1 + gen.next(std::min<size_t>(4, l.size() - b - 1));
      l.insert(l.begin() + static_cast<long>(e), "}");
      l.insert(l.begin() + static_cast<long>(b), "table ip kube-proxy {");
      return join_lines(l);
    }
    case 7:  // a comment (with a brace in it), then the prior's lines again
      l.insert(l.begin() + static_cast<long>(at()), "# a comment { with a brace");
      return join_lines(l);
    case 8:  // a syntax error, then an unterminated string further on
      l.insert(l.begin() + static_cast<long>(at()), "add chain ip kube-proxy");
      if (gen.chance(50)) l.insert(l.begin() + static_cast<long>(at()), "add chain ip kube-proxy \"open");
      return join_lines(l);
    case 9: {  // the last line without its newline
      std::string s = join_lines(l);
      if (!s.empty()) s.pop_back();
      return s;
    }
    case 11: {  // the prior's lines again, then a chain created twice: the kernel refuses the
                // batch after its rules consumed handles (which the table's generator keeps)
      const verifier::nft::Table* t = state.tables.empty() ? nullptr : &state.tables.front();
      if (!t || t->chains.empty()) return prior;
      l.push_back(std::string("create chain ") + verifier::nft::family_name(t->family) + " " + t->name + " " + t->chains.front().name);
      return join_lines(l);
    }
    default: {  // a brace too many, then the prior's lines
      l.insert(l.begin() + static_cast<long>(at()), "}");
      return join_lines(l);
    }
  }
}

std::string nft_outcome_with_probe(const verifier::nft::ApplyResult& r, verifier::nft::NftState s) {
  namespace nft = verifier::nft;
  std::string out = apply_outcome(r) + "\nrules kept through a flush: " + std::to_string(r.rules_kept) +
                    ", operations: " + std::to_string(r.operations);
  out += "\n" + nft::print_ruleset(s, {true});
  std::string probe = "add table ip kpc-probe\n";
  for (const auto& t : s.tables)
    if (!t.chains.empty()) {
      probe += std::string("add rule ") + nft::family_name(t.family) + " " + t.name + " " + t.chains.front().name + " counter\n";
      break;
    }
  out += "\nprobe: " + apply_outcome(nft::apply_script(s, probe, "probe.nft"));
  return out + "\n" + nft::print_ruleset(s, {true});
}

}  // namespace kpc::test
