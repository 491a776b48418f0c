// Properties of the verifier's parser and state machine on generated programs:
// reading iptables-save's text of a rule gives the same rule back (parse ->
// print(save form) -> parse is a fixed point), whole dumps round-trip through
// load_save/print_save, the streaming and the two-step application agree, and
// no input (random bytes, mutated programs) crashes the parser or simulator.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "compiler/ir/printer.h"
#include "tests/property/verifier_gen.h"
#include "verifier/state/state.h"

namespace kpc::verifier {
namespace {

std::string save_text(const std::string& chain, const ir::Rule& r, IPFamily f) {
  std::string out;
  ir::print_rule_save(out, chain, r, f);
  return out;
}

RC_GTEST_PROP(VerifierRoundTrip, SaveFormIsAFixedPoint, ()) {
  auto c = *test::vgen::gen_restore_case();
  IPFamily fam = c.ipv6 ? IPFamily::V6 : IPFamily::V4;
  ParseOptions po;
  po.family = fam;
  for (const std::string* text : {&c.init, &c.program}) {
    auto parsed = parse_restore(*text, po);
    for (const auto& blk : parsed.program.tables)
      for (const auto& op : blk.ops) {
        if (op.kind != ir::OpKind::Append && op.kind != ir::OpKind::Insert && op.kind != ir::OpKind::Delete &&
            op.kind != ir::OpKind::Replace)
          continue;
        std::string first = save_text(op.chain, op.rule, fam);
        std::string chain, err;
        auto again = parse_rule_text(first, fam, &chain, &err);
        RC_ASSERT(again.has_value());
        RC_ASSERT(chain == op.chain);
        RC_ASSERT(save_text(chain, *again, fam) == first);
      }
  }
}

RC_GTEST_PROP(VerifierRoundTrip, DumpsReloadExactly, ()) {
  auto c = *test::vgen::gen_restore_case();
  IPFamily fam = c.ipv6 ? IPFamily::V6 : IPFamily::V4;
  for (Flavor f : {Flavor::Legacy, Flavor::Nft}) {
    RulesetState st = RulesetState::empty(fam);
    apply_text(st, c.init, ApplyOptions{true, f});
    apply_text(st, c.program, ApplyOptions{c.noflush, f});
    std::string dump = print_save(st, f);
    // A comment opened by an unterminated quote keeps the newline; iptables-save prints it
    // as is, and neither tool can read that dump back. Not a property of valid dumps.
    RC_PRE(dump.find("\"\n") == std::string::npos && dump.find("\n\"") == std::string::npos);
    RulesetState back;
    std::string err;
    if (!load_save(dump, fam, f, back, &err)) RC_FAIL("reload failed: " + err + "\n" + dump);
    RC_ASSERT(print_save(back, f) == dump);
    RC_ASSERT(diff_states(st, back).empty());
  }
}

RC_GTEST_PROP(VerifierRoundTrip, StreamingAgreesWithTwoStep, ()) {
  auto c = *test::vgen::gen_restore_case();
  IPFamily fam = c.ipv6 ? IPFamily::V6 : IPFamily::V4;
  ParseOptions po;
  po.family = fam;
  for (Flavor f : {Flavor::Legacy, Flavor::Nft}) {
    RulesetState a = RulesetState::empty(fam), b = RulesetState::empty(fam);
    apply(a, parse_restore(c.init, po), ApplyOptions{true, f});
    apply_text(b, c.init, ApplyOptions{true, f});
    auto ra = apply(a, parse_restore(c.program, po), ApplyOptions{c.noflush, f});
    auto rb = apply_text(b, c.program, ApplyOptions{c.noflush, f});
    RC_ASSERT(ra.ok() == rb.ok());
    if (!ra.ok()) {
      RC_ASSERT(ra.error->line == rb.error->line);
      RC_ASSERT(ra.error->message == rb.error->message);
    }
    RC_ASSERT(print_save(a, f) == print_save(b, f));
  }
}

// A few random byte edits (erase, insert, overwrite) from an alphabet of the bytes that matter.
std::string mutate(std::string text) {
  int edits = *rc::gen::inRange(1, 12);
  static const std::string alphabet = std::string("\"\\ !-:*[]#\n\t\0\x01\xff", 15) + "ACDEFIJLNPRSXZjgmpsdio0123456789";
  for (int k = 0; k < edits && !text.empty(); ++k) {
    size_t pos = *rc::gen::inRange<size_t>(0, text.size());
    switch (*rc::gen::inRange(0, 3)) {
      case 0: text.erase(pos, *rc::gen::inRange<size_t>(1, 8)); break;
      case 1: text.insert(pos, 1, alphabet[*rc::gen::inRange<size_t>(0, alphabet.size())]); break;
      default: text[pos] = alphabet[*rc::gen::inRange<size_t>(0, alphabet.size())]; break;
    }
  }
  return text;
}

// What apply_text does to be fast must change nothing the real tool would show:
// lines the store knows from earlier programs (read without parsing), the tail of a
// program parsed on a second thread (forced here on programs of any size), and
// discard_on_failure (a failing block works on the table in place). Each variant
// must give the same verdict, line and message, and on success the same state.
struct Outcome {
  bool ok;
  uint32_t line;
  int exit_code;
  std::string message, dump;
};
Outcome apply_both(RulesetState st, const test::vgen::RestoreCase& c, Flavor f, ApplyOptions base) {
  ApplyOptions init = base, prog = base;
  init.noflush = true;
  prog.noflush = c.noflush;
  init.flavor = prog.flavor = f;
  auto r0 = apply_text(st, c.init, init);
  auto r = r0.ok() ? apply_text(st, c.program, prog) : r0;
  Outcome o{r.ok(), r.ok() ? 0 : r.error->line, r.ok() ? 0 : r.error->exit_code, r.ok() ? "" : r.error->message, ""};
  if (r.ok() || !base.discard_on_failure) o.dump = print_save(st, f) + "#";  // "#": never empty
  return o;
}
void expect_same(const Outcome& a, const Outcome& b, const char* what) {
  RC_ASSERT_FALSE(a.ok != b.ok || a.line != b.line || a.exit_code != b.exit_code || a.message != b.message);
  if (!a.dump.empty() && !b.dump.empty() && a.dump != b.dump) RC_FAIL(std::string(what) + ": states differ\n" + a.dump + "\n----\n" + b.dump);
}

RC_GTEST_PROP(VerifierFastPaths, KnownLinesParallelParseAndInPlaceChangeNothing, ()) {
  auto c = *test::vgen::gen_restore_case();
  if (*rc::gen::arbitrary<bool>()) c.program = mutate(c.program);  // quotes, NULs, odd chain words
  IPFamily fam = c.ipv6 ? IPFamily::V6 : IPFamily::V4;
  RC_LOG() << "init:\n" << c.init << "program:\n" << c.program << "\n";
  ApplyOptions plain;
  plain.parallel_parse_min_bytes = SIZE_MAX;
  for (Flavor f : {Flavor::Legacy, Flavor::Nft}) {
    Outcome ref = apply_both(RulesetState::empty(fam), c, f, plain);
    // Known lines: a store that has read both programs before (in both flavours and
    // modes, so every line it could remember is remembered).
    auto warm = std::make_shared<RuleStore>();
    for (Flavor g : {Flavor::Legacy, Flavor::Nft})
      for (bool nf : {true, false}) {
        RulesetState scratch = RulesetState::empty(fam, warm);
        ApplyOptions o = plain;
        o.flavor = g;
        o.noflush = nf;
        apply_text(scratch, c.init, o);
        apply_text(scratch, c.program, o);
      }
    expect_same(apply_both(RulesetState::empty(fam, warm), c, f, plain), ref, "known lines");
    ApplyOptions parallel;
    parallel.parallel_parse_min_bytes = 0;
    parallel.parallel_parse_split_percent = *rc::gen::inRange(0u, 101u);
    expect_same(apply_both(RulesetState::empty(fam), c, f, parallel), ref, "parallel parse");
    ApplyOptions in_place = plain;
    in_place.discard_on_failure = true;
    expect_same(apply_both(RulesetState::empty(fam), c, f, in_place), ref, "in place");
  }
}

// split_words takes plain and simple quoted words whole (fast paths); this is the
// character-at-a-time reading of iptables-restore's add_param_to_argv it must equal.
std::vector<Word> reference_split(std::string_view line) {
  std::vector<Word> out;
  std::string param;
  bool quote_open = false, escaped = false, quoted = false;
  uint32_t start_col = 0;
  auto add = [&](char c, size_t i) {
    if (param.empty()) start_col = static_cast<uint32_t>(i + 1);
    param += c;
  };
  auto emit = [&](size_t i) {
    if (param.empty() && start_col == 0) start_col = static_cast<uint32_t>(i + 1);
    out.push_back(Word{param, start_col, quoted});
    param.clear();
    start_col = 0;
    quoted = false;
  };
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\n' && !quote_open && param.empty()) continue;
    if (quote_open) {
      if (escaped) {
        add(c, i);
        escaped = false;
        continue;
      }
      if (c == '\\') {
        escaped = true;
        continue;
      }
      if (c != '"') {
        add(c, i);
        continue;
      }
      quote_open = false;
    } else if (c == '"') {
      quote_open = quoted = true;
      if (param.empty()) start_col = static_cast<uint32_t>(i + 1);
      continue;
    }
    if ((c == ' ' || c == '\t' || c == '\n') && param.empty()) continue;
    if (c != '"' && c != ' ' && c != '\t' && c != '\n') {
      add(c, i);
      continue;
    }
    emit(i);
  }
  if (!param.empty()) {
    quoted = false;
    emit(line.size());
  }
  return out;
}

RC_GTEST_PROP(VerifierFastPaths, SplitWordsMatchesAReferenceSplitter, ()) {
  static const std::string alphabet = "ab -\"\\\t\n";
  std::string line = *rc::gen::container<std::string>(rc::gen::elementOf(alphabet));
  auto got = split_words(line), want = reference_split(line);
  RC_ASSERT(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    RC_ASSERT(got[i].text == want[i].text);
    RC_ASSERT(got[i].col == want[i].col);
    RC_ASSERT(got[i].quoted == want[i].quoted);
  }
}

// Mutations that keep most of a program's shape: the parser and simulator must survive them.
RC_GTEST_PROP(VerifierRobustness, MutatedProgramsNeverCrash, ()) {
  auto c = *test::vgen::gen_restore_case();
  std::string text = mutate(c.init + c.program);
  for (Flavor f : {Flavor::Legacy, Flavor::Nft})
    for (bool noflush : {true, false}) {
      RulesetState st = RulesetState::empty(c.ipv6 ? IPFamily::V6 : IPFamily::V4);
      auto r = apply_text(st, text, ApplyOptions{noflush, f});
      if (!r.ok()) RC_ASSERT(r.error->line > 0);
      (void)print_save(st, f);
    }
}

RC_GTEST_PROP(VerifierRobustness, RandomBytesNeverCrash, (const std::string& bytes)) {
  for (const std::string& text : {bytes, "*filter\n" + bytes, "*nat\n-A X " + bytes + "\nCOMMIT\n"}) {
    auto p = parse_restore(text);
    RulesetState st = RulesetState::empty(IPFamily::V4);
    apply(st, p, ApplyOptions{true, Flavor::Legacy});
    RulesetState st2 = RulesetState::empty(IPFamily::V6);
    apply_text(st2, text, ApplyOptions{false, Flavor::Nft});
  }
}

}  // namespace
}  // namespace kpc::verifier
