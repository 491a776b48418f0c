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

// Mutations that keep most of a program's shape: the parser and simulator must survive them.
RC_GTEST_PROP(VerifierRobustness, MutatedProgramsNeverCrash, ()) {
  auto c = *test::vgen::gen_restore_case();
  std::string text = c.init + c.program;
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
