// libFuzzer target (d): the whole path on fuzzed snapshots. Input: a snapshot (YAML, or
// JSON when it starts with '{' or '['), optionally followed by a line "#kpc-fuzz-next"
// and a second snapshot: the first is then the prior sync, the second the next one.
//
// For each snapshot that loads and compiles, for both back ends:
//  - the text is well-formed (fuzz_common.h: check_program_text) and is exactly what the
//    kept IR prints (one printer);
//  - the verifier parses it with no error and no unmodelled match or target;
//  - it applies to an empty state (iptables-restore --noflush, legacy and nft) with no
//    failure, and the resulting dump reloads to the same state.
// With a prior, the partial restore (compile_iptables_from_prior) must also be
// well-formed, parse cleanly and apply on top of the state the prior's full restore
// built, and the result must equal the state the next snapshot's full restore builds:
// a partial sync that leaves the kernel elsewhere than a full one would be a rule
// nobody asked for (or a missing one).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_common.h"
#include "verifier/state/state.h"

namespace {
using namespace kpc;
using namespace kpc::verifier;

constexpr std::string_view kNextMarker = "\n#kpc-fuzz-next\n";

std::optional<Snapshot> load(std::string_view text, fuzz::Loaded& l) {
  size_t i = text.find_first_not_of(" \t\r\n");
  bool json = i != std::string_view::npos && (text[i] == '{' || text[i] == '[');
  fuzz::load_one(l, json ? "snapshot.json" : "snapshot.yaml", text);
  if (!l.ok) return std::nullopt;
  fuzz::check_model(l.snap);
  return l.snap;
}

ParseResult parse_clean(const std::string& text, IPFamily fam, const char* what) {
  ParseOptions po;
  po.family = fam;
  ParseResult p = parse_restore(text, po);
  if (p.error)
    fuzz::fail(std::string(what) + ": the verifier rejects the compiler's output at line " +
                   std::to_string(p.error->line) + ": " + p.error->message,
               text);
  KPC_FUZZ_CHECK(p.unknown_args == 0, std::string(what) + ": unmodelled match or target in\n" + text);
  KPC_FUZZ_CHECK(!p.last_commit_unterminated, text);
  return p;
}

void apply_ok(RulesetState& st, const ParseResult& p, Flavor f, const char* what, const std::string& text) {
  ApplyResult r = apply(st, p, ApplyOptions{/*noflush=*/true, f});
  if (!r.ok())
    fuzz::fail(std::string(what) + " fails to apply (" + flavor_name(f) + ") at line " +
                   std::to_string(r.error->line) + ": " + r.error->reason,
               text);
}

/// A save dump without its "-m comment --comment X" matches.
std::string strip_comments(const std::string& dump) {
  static constexpr std::string_view kComment = " -m comment --comment ";
  std::string out;
  out.reserve(dump.size());
  size_t at = 0;
  for (size_t hit; (hit = dump.find(kComment, at)) != std::string::npos;) {
    out.append(dump, at, hit - at);
    bool closed = true;
    std::string_view line(dump.data() + hit, dump.find('\n', hit) - hit);
    std::string_view v = fuzz::comment_value(line, kComment.size(), &closed);
    bool quoted = line.size() > kComment.size() && line[kComment.size()] == '"';
    at = hit + kComment.size() + v.size() + (quoted ? (closed ? 2 : 1) : 0);
  }
  out.append(dump, at, std::string::npos);
  return out;
}

std::optional<CompileResult> compile_full(const Snapshot& s, Backend b) {
  DiagSink diags;
  iptables::SyncOptions o;
  o.keep_ir = true;
  auto r = compile_iptables(s, b, o, diags);
  if (!r && !diags.has_errors()) fuzz::fail("compile failed without an error diagnostic");
  return r;
}

ParseResult check_full(const CompileResult& r, IPFamily fam, const char* what) {
  fuzz::check_program_text(r.text, what);
  std::string printed = ir::print_program(r.sync.program);
  KPC_FUZZ_CHECK(printed == r.text, std::string(what) + ": kept IR prints differently from the text");
  ParseResult p = parse_clean(r.text, fam, what);
  for (Flavor f : {Flavor::Legacy, Flavor::Nft}) {
    RulesetState st = RulesetState::empty(fam);
    apply_ok(st, p, f, what, r.text);
    if (f == Flavor::Nft) continue;  // the dump round trip is the same code for both flavours
    std::string dump = print_save(st, f), err;
    RulesetState back;
    KPC_FUZZ_CHECK(load_save(dump, fam, f, back, &err, st.store), std::string(what) + ": dump does not reload: " + err);
    KPC_FUZZ_CHECK(print_save(back, f) == dump, std::string(what) + ": reloaded dump differs\n" + dump);
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Oversized inputs are rejected early: the compiled program grows with services x
  // endpoints (a few KB of YAML can mean thousands of rules), and every input is
  // compiled up to six times and applied twelve times under ASan; beyond 64 KiB an
  // execution takes seconds and reaches no code a smaller snapshot does not (scale is
  // the benchmarks' and the kernel tests' job). 64 KiB holds two large-cluster fixtures.
  if (size > 64 * 1024) return -1;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t cut = text.find(kNextMarker);
  std::string_view first = cut == std::string_view::npos ? text : text.substr(0, cut + 1);
  std::optional<std::string_view> second;
  if (cut != std::string_view::npos) second = text.substr(cut + kNextMarker.size());

  fuzz::Loaded la, lb;
  auto a = load(first, la);
  std::optional<Snapshot> b;
  if (second) b = load(*second, lb);

  for (Backend be : {Backend::IPTables, Backend::IP6Tables}) {
    IPFamily fam = backend_family(be);
    std::optional<CompileResult> fa, fb;
    std::optional<ParseResult> pa, pb;
    if (a && (fa = compile_full(*a, be))) pa = check_full(*fa, fam, "full(prior)");
    if (b && (fb = compile_full(*b, be))) pb = check_full(*fb, fam, "full(next)");
    if (!fa || !fb) continue;

    DiagSink diags;
    PriorOptions po;
    auto part = compile_iptables_from_prior(*b, *a, be, po, diags);
    KPC_FUZZ_CHECK(part.has_value(), "both snapshots compile but the sync from the prior fails");
    fuzz::check_program_text(part->text, "partial");
    ParseResult pp = parse_clean(part->text, fam, "partial");
    for (Flavor f : {Flavor::Legacy, Flavor::Nft}) {
      auto store = std::make_shared<RuleStore>();
      RulesetState via_partial = RulesetState::empty(fam, store);
      RulesetState direct = RulesetState::empty(fam, store);
      apply_ok(via_partial, *pa, f, "full(prior)", fa->text);
      apply_ok(via_partial, pp, f, "partial after full(prior)", part->text);
      apply_ok(direct, *pb, f, "full(next)", fb->text);
      auto diffs = diff_states(via_partial, direct);
      // Documented kube-proxy behaviour (fixtures/kp-sync-proxy-rules-large-cluster-mode):
      // in large-cluster mode rules lose their comments, and a partial sync does not
      // re-render unchanged services, so their chains keep the comments they were written
      // with. Compare those states without comments.
      if (!diffs.empty() && (fa->sync.large_cluster || fb->sync.large_cluster) &&
          strip_comments(print_save(via_partial, f)) == strip_comments(print_save(direct, f)))
        diffs.clear();
      if (!diffs.empty()) {
        std::string d = std::string(flavor_name(f)) + (part->partial ? " partial" : " full") + " sync from prior";
        for (const auto& x : diffs) d += "\n  " + describe(x);
        d += "\n---- sync from prior:\n" + part->text;
        fuzz::fail("prior + sync != full(next)", d);
      }
    }
  }
  return 0;
}
