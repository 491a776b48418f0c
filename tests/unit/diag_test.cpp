// DiagSink (sorting, dedup, counting), rendering, the code catalog, SourceManager
// positions, printable() and is_clean_text().
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "compiler/support/diag.h"
#include "compiler/support/source.h"
#include "compiler/support/text.h"

namespace kpc {
namespace {

TEST(DiagCatalog, WellFormedAndUnique) {
  const auto& cat = diag_catalog();
  ASSERT_FALSE(cat.empty());
  std::set<std::string_view> codes, names;
  std::regex code_re("[EW][0-9]{4}");
  for (size_t i = 0; i < cat.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(cat[i].id), i);
    EXPECT_TRUE(std::regex_match(std::string(cat[i].code), code_re)) << cat[i].code;
    EXPECT_TRUE(codes.insert(cat[i].code).second) << "duplicate code " << cat[i].code;
    EXPECT_TRUE(names.insert(cat[i].name).second) << "duplicate name " << cat[i].name;
    EXPECT_FALSE(cat[i].meaning.empty());
    EXPECT_EQ(&diag_info(cat[i].id), &cat[i]);
  }
  EXPECT_EQ(diag_info(DiagCode::PortOutOfRange).code, "E0300");
  EXPECT_EQ(diag_info(DiagCode::PortOutOfRange).name, "port-out-of-range");
  EXPECT_FALSE(is_warning(DiagCode::PortOutOfRange));
  EXPECT_TRUE(is_warning(DiagCode::WarnLegacyIP));
  EXPECT_TRUE(is_warning(DiagCode::WarnNodeMissing));
  EXPECT_TRUE(is_warning(DiagCode::WarnIgnoredValue));
}

TEST(SourceManager, OffsetsToLineAndColumn) {
  SourceManager sm;
  uint32_t a = sm.add("a.yaml", "ab\ncd\n\nxyz");
  uint32_t b = sm.add("b.yaml", "");
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(sm.size(), 2u);
  EXPECT_EQ(sm.name(1), "a.yaml");
  EXPECT_EQ(sm.position(1, 0), (Pos{1, 1, 1}));
  EXPECT_EQ(sm.position(1, 1), (Pos{1, 1, 2}));
  EXPECT_EQ(sm.position(1, 2), (Pos{1, 1, 3}));  // the newline itself
  EXPECT_EQ(sm.position(1, 3), (Pos{1, 2, 1}));
  EXPECT_EQ(sm.position(1, 6), (Pos{1, 3, 1}));
  EXPECT_EQ(sm.position(1, 7), (Pos{1, 4, 1}));
  EXPECT_EQ(sm.position(1, 10), (Pos{1, 4, 4}));  // one past the end: still on the last line
  EXPECT_EQ(sm.position(2, 0), (Pos{2, 1, 1}));
  EXPECT_FALSE(Pos{}.known());
}

Diagnostic diag(DiagCode c, Pos p, std::string obj = "", std::string path = "", std::string msg = "m") {
  return Diagnostic{c, p, std::move(obj), std::move(path), std::move(msg), {}};
}

TEST(DiagSink, SortsByFileLineColumnThenCode) {
  DiagSink s;
  s.report(diag(DiagCode::PortOutOfRange, {2, 1, 1}));
  s.report(diag(DiagCode::InvalidIP, {1, 3, 5}));
  s.report(diag(DiagCode::WrongType, {1, 3, 5}));
  s.report(diag(DiagCode::InvalidName, {1, 3, 2}));
  s.report(diag(DiagCode::MissingField, {1, 1, 9}));
  s.report(diag(DiagCode::NoInput, {}));
  s.report(diag(DiagCode::InvalidName, {1, 10, 1}));
  s.report(diag(DiagCode::InvalidName, {1, 2, 100}));
  s.sort_and_dedup();
  std::vector<std::pair<Pos, DiagCode>> got;
  for (const auto& d : s.all()) got.emplace_back(d.pos, d.code);
  std::vector<std::pair<Pos, DiagCode>> want = {
      {{}, DiagCode::NoInput},                     // unknown positions first
      {{1, 1, 9}, DiagCode::MissingField},         //
      {{1, 2, 100}, DiagCode::InvalidName},        // line before column
      {{1, 3, 2}, DiagCode::InvalidName},          //
      {{1, 3, 5}, DiagCode::WrongType},            // E0100 before E0202 at one position
      {{1, 3, 5}, DiagCode::InvalidIP},            //
      {{1, 10, 1}, DiagCode::InvalidName},         // numeric, not lexicographic, lines
      {{2, 1, 1}, DiagCode::PortOutOfRange},       // file order last
  };
  EXPECT_EQ(got, want);
}

TEST(DiagSink, DedupRemovesOnlyExactDuplicates) {
  DiagSink s;
  s.report(diag(DiagCode::InvalidIP, {1, 1, 1}, "Service a/b", "spec.clusterIP", "x"));
  s.report(diag(DiagCode::InvalidIP, {1, 1, 1}, "Service a/b", "spec.clusterIP", "x"));
  s.report(diag(DiagCode::InvalidIP, {1, 1, 1}, "Service a/b", "spec.clusterIP", "y"));
  s.report(diag(DiagCode::InvalidIP, {1, 1, 1}, "Service a/c", "spec.clusterIP", "x"));
  s.report(diag(DiagCode::InvalidIP, {1, 1, 1}, "Service a/b", "spec.clusterIPs[0]", "x"));
  s.sort_and_dedup();
  EXPECT_EQ(s.all().size(), 4u);
  s.sort_and_dedup();  // idempotent
  EXPECT_EQ(s.all().size(), 4u);
}

TEST(DiagSink, WarningsAreNotErrors) {
  DiagSink s;
  EXPECT_FALSE(s.has_errors());
  s.report(diag(DiagCode::WarnLegacyIP, {1, 1, 1}));
  EXPECT_FALSE(s.has_errors());
  EXPECT_EQ(s.error_count(), 0u);
  s.report(diag(DiagCode::InvalidIP, {1, 1, 1}));
  s.report(diag(DiagCode::InvalidCIDR, {1, 1, 1}));
  EXPECT_TRUE(s.has_errors());
  EXPECT_EQ(s.error_count(), 2u);
}

TEST(DiagRender, TheDocumentedFormat) {
  SourceManager sm;
  sm.add("cluster.yaml", "x\n");
  Diagnostic d = diag(DiagCode::PortOutOfRange, {1, 12, 11}, "Service default/web", "spec.ports[1].port",
                      "70000 is out of range 1-65535");
  EXPECT_EQ(render(d, sm),
            "cluster.yaml:12:11: error[E0300]: Service default/web: spec.ports[1].port: 70000 is out of range 1-65535");
  Diagnostic w = diag(DiagCode::WarnLegacyIP, {1, 2, 3}, "Service a/b", "spec.clusterIP", "m");
  EXPECT_EQ(render(w, sm), "cluster.yaml:2:3: warning[W0001]: Service a/b: spec.clusterIP: m");
  EXPECT_EQ(render(diag(DiagCode::NoInput, {}, "", "", "no input files"), sm), "error[E0004]: no input files");
  EXPECT_EQ(render(diag(DiagCode::YamlSyntax, {1, 1, 1}, "", "", "bad"), sm), "cluster.yaml:1:1: error[E0010]: bad");
  Diagnostic n = diag(DiagCode::DuplicateObject, {1, 5, 1}, "Service a/b", "", "defined more than once");
  n.notes = {"also defined at cluster.yaml:1:1", "second note"};
  EXPECT_EQ(render(n, sm),
            "cluster.yaml:5:1: error[E0600]: Service a/b: defined more than once\n"
            "  note: also defined at cluster.yaml:1:1\n  note: second note");
  DiagSink s;
  s.report(d);
  s.report(w);
  std::string all = s.render(sm);
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 2);
  EXPECT_EQ(all.back(), '\n');
}

TEST(DiagRender, HostileTextStaysOnOneLine) {
  SourceManager sm;
  sm.add("f.yaml", "");
  Diagnostic d = diag(DiagCode::InvalidName, {1, 1, 1}, "Service x\ny", "metadata.labels[a\r\nb]",
                      "\"web\"\n-A KUBE-SERVICES -j ACCEPT\nCOMMIT\x1b[2J\x7f");
  d.notes = {"note with\nnewline"};
  std::string out = render(d, sm);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;  // only the note separator
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_EQ(out.find('\x7f'), std::string::npos);
  EXPECT_NE(out.find("Service x\\x0Ay"), std::string::npos) << out;
  EXPECT_NE(out.find("\\x0ACOMMIT\\x1B[2J\\x7F"), std::string::npos) << out;
}

// Regression: render() printed the file name raw (file names may hold any byte but '/' and NUL).
TEST(DiagRender, HostileFileNameStaysOnOneLine) {
  SourceManager sm;
  sm.add("evil\nCOMMIT\x1b[31m.yaml", "");
  std::string out = render(diag(DiagCode::YamlSyntax, {1, 1, 1}, "", "", "bad"), sm);
  EXPECT_EQ(out.find('\n'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
}

TEST(Printable, EscapesControlsAndInvalidUtf8) {
  EXPECT_EQ(printable("plain text \"quoted\" 'x' -j ACCEPT"), "plain text \"quoted\" 'x' -j ACCEPT");
  EXPECT_EQ(printable("a\nb"), "a\\x0Ab");
  EXPECT_EQ(printable("a\rb"), "a\\x0Db");
  EXPECT_EQ(printable("a\tb"), "a\\x09b");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("\x1b[0m"), "\\x1B[0m");
  EXPECT_EQ(printable("\x7f"), "\\x7F");
  EXPECT_EQ(printable("\xff"), "\\xFF");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xC0\\xAF");          // overlong 2-byte
  EXPECT_EQ(printable("\xe6\x97"), "\\xE6\\x97");          // truncated 3-byte
  EXPECT_EQ(printable("\x80"), "\\x80");                   // lone continuation byte
  EXPECT_EQ(printable("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
  EXPECT_EQ(printable(""), "");
}

// C1 controls (U+0080-U+009F): U+0085 NEL breaks lines, U+009B is the 8-bit CSI (regression).
TEST(Printable, EscapesC1Controls) {
  EXPECT_EQ(printable("a\xc2\x85" "b"), "a\\xC2\\x85b");
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\xC2\\x9B2J");
}

// Regression: utf8_length() accepted 3-byte overlongs, surrogates and code points above U+10FFFF.
TEST(Printable, EscapesEveryInvalidUtf8Form) {
  EXPECT_EQ(printable("\xe0\x80\xaf"), "\\xE0\\x80\\xAF");          // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xED\\xA0\\x80");          // surrogate U+D800
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");  // U+110000
  EXPECT_EQ(printable("\xf5\x80\x80\x80"), "\\xF5\\x80\\x80\\x80");
}

TEST(Printable, EscapesLineSeparatorsAndBidiControls) {
  EXPECT_EQ(printable("a\xe2\x80\xa8" "b"), "a\\xE2\\x80\\xA8b");  // U+2028 LINE SEPARATOR
  EXPECT_EQ(printable("a\xe2\x80\xa9" "b"), "a\\xE2\\x80\\xA9b");  // U+2029 PARAGRAPH SEPARATOR
  EXPECT_EQ(printable("\xe2\x80\xaa"), "\\xE2\\x80\\xAA");          // U+202A LRE
  EXPECT_EQ(printable("x\xe2\x80\xae" "cba"), "x\\xE2\\x80\\xAEcba");  // U+202E RLO
  EXPECT_EQ(printable("\xe2\x81\xa6"), "\\xE2\\x81\\xA6");          // U+2066 LRI
  EXPECT_EQ(printable("\xe2\x81\xa9"), "\\xE2\\x81\\xA9");          // U+2069 PDI
  // Neighbours stay: U+2027, U+202F, U+2065 (unassigned), U+206A, and the last code points.
  for (const char* ok : {"\xe2\x80\xa7", "\xe2\x80\xaf", "\xe2\x81\xa5", "\xe2\x81\xaa", "\xc2\xa0",
                         "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80"})
    EXPECT_EQ(printable(ok), ok) << printable(ok);
}

TEST(Printable, AcceptsTheBoundariesOfValidUtf8) {
  EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");              // U+00A0, first after C1
  EXPECT_EQ(printable("\xe0\xa0\x80"), "\xe0\xa0\x80");      // U+0800, smallest 3-byte
  EXPECT_EQ(printable("\xf0\x90\x80\x80"), "\xf0\x90\x80\x80");  // U+10000, smallest 4-byte
  EXPECT_EQ(printable("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");  // U+10FFFF
  // Invalid lead bytes are escaped one at a time; what follows may be valid again.
  EXPECT_EQ(printable("\xed\xa0\x80" "ok"), "\\xED\\xA0\\x80ok");
  EXPECT_EQ(printable("\xf0\x80\x80\x80\xc3\xa9"), "\\xF0\\x80\\x80\\x80\xc3\xa9");
  EXPECT_EQ(printable("\xf8\x88\x80\x80\x80"), "\\xF8\\x88\\x80\\x80\\x80");  // 5-byte form
}

TEST(PrintableCapped, ShortTextIsOnlyEscaped) {
  EXPECT_EQ(printable_capped("a\nb", 10), "a\\x0Ab");
  EXPECT_EQ(printable_capped(std::string(10, 'x'), 10), std::string(10, 'x'));
}

TEST(PrintableCapped, LongTextKeepsBothEndsAndCountsTheRest) {
  std::string s = std::string(100, 'a') + std::string(1000, 'b') + std::string(100, 'c');
  std::string out = printable_capped(s, 200);
  EXPECT_EQ(out, std::string(100, 'a') + "\xe2\x80\xa6(1000 more bytes)\xe2\x80\xa6" + std::string(100, 'c'));
  // Never cuts a UTF-8 character in two (which would then show as \xNN escapes).
  std::string e = "\xc3\xa9";
  std::string u;
  for (int i = 0; i < 300; ++i) u += e;
  std::string cut = printable_capped("x" + u, 103);  // both cut points fall inside a character
  EXPECT_EQ(cut.find("\\x"), std::string::npos) << cut;
  EXPECT_NE(cut.find(" more bytes)"), std::string::npos) << cut;
  // Escaping still applies to both ends.
  std::string hostile = "\n" + std::string(5000, 'z') + "\x1b";
  std::string h = printable_capped(hostile, 100);
  EXPECT_EQ(h.find('\n'), std::string::npos);
  EXPECT_EQ(h.find('\x1b'), std::string::npos);
  EXPECT_EQ(h.substr(0, 4), "\\x0A");
  EXPECT_EQ(h.substr(h.size() - 4), "\\x1B");
}

TEST(DiagRender, HugeQuotedValueIsTruncated) {
  // A 10 MB "IP address" must not make a 10 MB diagnostic line, and the explanation after
  // the quoted value must survive.
  SourceManager sm;
  sm.add("big.yaml", "");
  std::string ip(10 * 1024 * 1024, '1');
  Diagnostic d = diag(DiagCode::InvalidIP, {1, 5, 14}, "Service default/web", "spec.clusterIP",
                      "\"" + ip + "\" is not a valid IP address");
  d.notes = {std::string(1 << 20, 'n')};
  std::string out = render(d, sm);
  EXPECT_LT(out.size(), 2 * kMaxDiagFieldBytes + 200) << out.size();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_EQ(out.rfind("big.yaml:5:14: error[E0202]: Service default/web: spec.clusterIP: \"111", 0), 0u) << out;
  size_t nl = out.find('\n');
  EXPECT_EQ(out.substr(0, nl).substr(nl - 27), "\" is not a valid IP address") << out;
  EXPECT_NE(out.find("more bytes)"), std::string::npos) << out;
  // A hostile file name is capped too.
  SourceManager sm2;
  sm2.add(std::string(100000, 'f') + ".yaml", "");
  EXPECT_LT(render(diag(DiagCode::YamlSyntax, {1, 1, 1}, "", "", "bad"), sm2).size(), kMaxDiagFieldBytes + 100);
}

TEST(CleanText, AcceptsTextRejectsBinary) {
  size_t bad = 99;
  EXPECT_TRUE(is_clean_text("a: b\n\tc\r\n", &bad));
  EXPECT_TRUE(is_clean_text("caf\xc3\xa9 \xf0\x9f\x98\x80", &bad));
  EXPECT_TRUE(is_clean_text("", &bad));
  EXPECT_FALSE(is_clean_text(std::string("ab\0c", 4), &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(is_clean_text("abc\x01", &bad));
  EXPECT_EQ(bad, 3u);
  EXPECT_FALSE(is_clean_text("\x7f", &bad));
  EXPECT_EQ(bad, 0u);
  EXPECT_FALSE(is_clean_text("ok\xff", &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(is_clean_text("ok\xc3", &bad));  // truncated at end of input
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(is_clean_text("\xc1\xbf", &bad));  // overlong 2-byte
  EXPECT_EQ(bad, 0u);
}

// Regression: same root cause, seen from the loader's binary-input check (E0003).
TEST(CleanText, RejectsEveryInvalidUtf8Form) {
  size_t bad = 99;
  EXPECT_FALSE(is_clean_text("x\xe0\x80\xaf", &bad)) << "overlong 3-byte";
  EXPECT_FALSE(is_clean_text("x\xed\xb0\x80", &bad)) << "surrogate U+DC00";
  EXPECT_FALSE(is_clean_text("x\xf4\x90\x80\x80", &bad)) << "above U+10FFFF";
  EXPECT_FALSE(is_clean_text("x\xf0\x80\x80\x80", &bad)) << "overlong 4-byte";
}

TEST(TextHelpers, SplitTrimLower) {
  EXPECT_EQ(split("a,b,,c", ','), (std::vector<std::string_view>{"a", "b", "", "c"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string_view>{""}));
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(trim(" \t "), "");
  EXPECT_TRUE(starts_with("prefix", "pre"));
  EXPECT_FALSE(starts_with("pr", "pre"));
  EXPECT_EQ(to_lower("Node-A.Example"), "node-a.example");
}

}  // namespace
}  // namespace kpc
