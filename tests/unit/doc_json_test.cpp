// The located JSON reader: values, escapes, surrogates, numbers, every syntax error
// with its line:column, limits, and a differential test against nlohmann-json.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/model/doc.h"
#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {

struct JsonResult {
  SourceManager sm;
  DiagSink diags;
  DocNode root;
  bool ok = false;
  const Diagnostic* diag() const { return diags.all().empty() ? nullptr : &diags.all()[0]; }
};

JsonResult read(std::string text, ReadLimits limits = {}) {
  JsonResult r;
  uint32_t f = r.sm.add("t.json", std::move(text));
  r.ok = read_json(r.sm, f, limits, &r.root, r.diags);
  return r;
}

std::string str_value(const std::string& json_string_literal) {
  auto r = read(json_string_literal);
  EXPECT_TRUE(r.ok) << json_string_literal;
  EXPECT_EQ(r.root.kind, DocNode::Kind::String);
  return r.root.text;
}

TEST(DocJson, ValuesKindsAndPositions) {
  std::string text = "{\n  \"a\": [1, -2.5, true, false, null, \"s\"],\n  \"b\": {}\n}";
  auto r = read(text);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.root.kind, DocNode::Kind::Map);
  EXPECT_EQ(r.root.pos, (Pos{1, 1, 1}));
  EXPECT_EQ(r.root.key_pos("a"), (Pos{1, 2, 3}));
  const DocNode* a = r.root.get("a");
  EXPECT_EQ(a->pos, (Pos{1, 2, 8}));
  std::vector<DocNode::Kind> kinds;
  for (const auto& n : a->items) kinds.push_back(n.kind);
  using K = DocNode::Kind;
  EXPECT_EQ(kinds, (std::vector<K>{K::Int, K::Float, K::Bool, K::Bool, K::Null, K::String}));
  EXPECT_EQ(a->items[1].text, "-2.5");
  EXPECT_EQ(a->items[1].pos, (Pos{1, 2, 12}));
  EXPECT_EQ(a->items[5].pos, loadtest::pos_of(text, "\"s\""));
  EXPECT_EQ(r.root.key_pos("b"), (Pos{1, 3, 3}));
  EXPECT_TRUE(r.root.get("b")->is_map());
  EXPECT_EQ(r.root.keys.size(), 2u);
}

TEST(DocJson, TopLevelScalarsAndWhitespace) {
  EXPECT_EQ(read("  42 \r\n\t").root.kind, DocNode::Kind::Int);
  EXPECT_EQ(read("\"x\"").root.kind, DocNode::Kind::String);
  EXPECT_EQ(read("null").root.kind, DocNode::Kind::Null);
  EXPECT_EQ(read("\n\n   [ ]").root.pos, (Pos{1, 3, 4}));
}

TEST(DocJson, NumbersKeepTheirText) {
  for (const char* s : {"0", "-0", "7", "-12", "123456789012345678901234567890"}) {
    auto r = read(s);
    ASSERT_TRUE(r.ok) << s;
    EXPECT_EQ(r.root.kind, DocNode::Kind::Int) << s;
    EXPECT_EQ(r.root.text, s);
  }
  for (const char* s : {"0.5", "-0.0", "1e5", "1E+5", "2.5e-3", "-1E-0"}) {
    auto r = read(s);
    ASSERT_TRUE(r.ok) << s;
    EXPECT_EQ(r.root.kind, DocNode::Kind::Float) << s;
    EXPECT_EQ(r.root.text, s);
  }
}

TEST(DocJson, Escapes) {
  EXPECT_EQ(str_value(R"("a\"b")"), "a\"b");
  EXPECT_EQ(str_value(R"("\\")"), "\\");
  EXPECT_EQ(str_value(R"("\/")"), "/");
  EXPECT_EQ(str_value(R"("\b\f\n\r\t")"), "\b\f\n\r\t");
  EXPECT_EQ(str_value(R"("\u0041\u00e9\u20AC")"), "A\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(str_value(R"("\u0000")"), std::string("\0", 1));
  EXPECT_EQ(str_value(R"("\u007f\u0080\u07ff\u0800\uffff")"), "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf");
  EXPECT_EQ(str_value("\"caf\xc3\xa9 \xf0\x9f\x98\x80\""), "caf\xc3\xa9 \xf0\x9f\x98\x80");  // raw UTF-8 is kept
  EXPECT_EQ(str_value("\"del\x7f\""), "del\x7f");  // DEL needs no escape in JSON
  EXPECT_EQ(str_value(R"("plain then \n escape then plain")"), "plain then \n escape then plain");
}

TEST(DocJson, SurrogatePairs) {
  EXPECT_EQ(str_value(R"("\ud83d\ude00")"), "\xf0\x9f\x98\x80");
  EXPECT_EQ(str_value(R"("\uD83D\uDE00")"), "\xf0\x9f\x98\x80");
  EXPECT_EQ(str_value(R"("\ud800\udc00")"), "\xf0\x90\x80\x80");  // U+10000
  EXPECT_EQ(str_value(R"("\udbff\udfff")"), "\xf4\x8f\xbf\xbf");  // U+10FFFF
  for (const char* bad : {R"("\ud800")", R"("\udc00")", R"("\ud800\u0041")", R"("\ud800x")", R"("\ud800\n")",
                          R"("\udbff\ud800")", R"("\ud83d\u")"}) {
    auto r = read(bad);
    EXPECT_FALSE(r.ok) << bad;
    ASSERT_TRUE(r.diag());
    EXPECT_EQ(r.diag()->code, DiagCode::JsonSyntax);
  }
}

TEST(DocJson, DuplicateKeys) {
  std::string text = "{\"a\": 1,\n \"b\": {\"x\": 1, \"x\": 2}}";
  auto r = read(text);
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.diags.all().size(), 1u);
  EXPECT_EQ(r.diag()->code, DiagCode::DuplicateKey);
  EXPECT_EQ(r.diag()->pos, loadtest::pos_of(text, "\"x\"", 1));  // the second "x"
  EXPECT_NE(r.diag()->message.find("\"x\""), std::string::npos);
  // Keys compare after unescaping.
  EXPECT_FALSE(read(R"({"a": 1, "\u0061": 2})").ok);
}

// Syntax errors: where each one is reported. cols is the accepted column range: the
// offending character, or (for escapes) anywhere within the offending escape sequence.
struct ErrCase {
  const char* text;
  uint32_t line, col_lo, col_hi;
};

void expect_error_at(const ErrCase& c) {
  auto r = read(c.text);
  EXPECT_FALSE(r.ok) << c.text;
  ASSERT_TRUE(r.diag()) << c.text;
  EXPECT_EQ(r.diags.all().size(), 1u) << c.text;
  EXPECT_EQ(r.diag()->code, DiagCode::JsonSyntax) << c.text;
  EXPECT_EQ(r.diag()->pos.file, 1u);
  EXPECT_EQ(r.diag()->pos.line, c.line) << c.text;
  EXPECT_GE(r.diag()->pos.col, c.col_lo) << c.text << " (" << r.diag()->message << ")";
  EXPECT_LE(r.diag()->pos.col, c.col_hi) << c.text << " (" << r.diag()->message << ")";
}

TEST(DocJson, SyntaxErrorsAreLocated) {
  for (const ErrCase& c : std::vector<ErrCase>{
           {"", 1, 1, 1},
           {"  \n ", 2, 2, 2},
           {"{\"a\": 1,}", 1, 9, 9},
           {"[1,]", 1, 4, 4},
           {"[,1]", 1, 2, 2},
           {"{\"a\" 1}", 1, 6, 6},
           {"{\"a\": }", 1, 7, 7},
           {"{\"a\": tru}", 1, 7, 7},
           {"{\"a\": nul}", 1, 7, 7},
           {"True", 1, 1, 1},
           {"{\"a\": 1} x", 1, 10, 10},
           {"[1] [2]", 1, 5, 5},
           {"{\"a\": \"b\tc\"}", 1, 9, 9},
           {"{\"a\": \"b\nc\"}", 1, 9, 9},
           {"{a: 1}", 1, 2, 2},
           {"{'a': 1}", 1, 2, 2},
           {"[1 2]", 1, 4, 4},
           {"{\"a\": 01}", 1, 8, 8},
           {"{\"a\": -}", 1, 8, 8},
           {"{\"a\": +1}", 1, 7, 7},
           {"{\"a\": .5}", 1, 7, 7},
           {"{\"a\": 1.}", 1, 9, 9},
           {"{\"a\": 1.e3}", 1, 9, 9},
           {"{\"a\": 1e}", 1, 9, 9},
           {"{\"a\": 1e+}", 1, 10, 10},
           {"{\"a\": 0x10}", 1, 8, 8},
           {"{\"a\": NaN}", 1, 7, 7},
           {"\v[]", 1, 1, 1},
           {"/* c */ 1", 1, 1, 1},
           {"{\n  \"a\": 1,\n  \"b\": [1, 2,, 3]\n}", 3, 14, 14},
           {"{\r\n\"a\": x}", 2, 6, 6},
           // Truncated input: reported where the input ends.
           {"{\n  \"a\": [\n    1,\n    2\n  ", 5, 3, 3},
           {"{\"a\": \"abc", 1, 11, 11},
           {"{\"a\"", 1, 5, 5},
           {"[", 1, 2, 2},
           {"{\"a\":\"\\u00", 1, 7, 11},
           // Escapes: within the offending escape sequence.
           {"{\"a\": \"\\u12G4\"}", 1, 8, 13},
           {"{\"a\": \"\\ud800\"}", 1, 8, 14},  // or where the low surrogate should start
       })
    expect_error_at(c);
}

// Regression: escape errors were reported one character past the escape.
TEST(DocJson, EscapeErrorsPointAtTheEscape) {
  for (const ErrCase& c : std::vector<ErrCase>{
           {"{\"a\": \"\\x\"}", 1, 8, 9},
           {"{\"a\": \"\\'\"}", 1, 8, 9},
           {"{\"a\": \"\\udc00\"}", 1, 8, 13},
           {"{\"a\": \"\\ud800\\u0041\"}", 1, 14, 19},
       })
    expect_error_at(c);
}

TEST(DocJson, NestingLimit) {
  auto nest = [](int n) { return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']'); };
  ReadLimits lim;
  lim.max_depth = 4;
  EXPECT_TRUE(read(nest(4), lim).ok);
  auto r = read(nest(6), lim);
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.diag());
  EXPECT_EQ(r.diag()->code, DiagCode::NestingTooDeep);
  auto obj = read("{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":1}}}}}}", lim);
  EXPECT_FALSE(obj.ok);
  EXPECT_EQ(obj.diag()->code, DiagCode::NestingTooDeep);
}

// Regression: the JSON reader accepted max_depth + 1 nested collections; E0012 and the YAML
// reader stop at max_depth (64).
TEST(DocJson, NestingLimitMatchesYaml) {
  auto nest = [](int n) { return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']'); };
  ReadLimits lim;
  lim.max_depth = 4;
  auto r = read(nest(5), lim);
  EXPECT_FALSE(r.ok) << "5 levels accepted with max_depth 4";
  if (r.diag()) {
    EXPECT_EQ(r.diag()->pos, (Pos{1, 1, 5}));
  }
  EXPECT_TRUE(read(nest(64)).ok);
  EXPECT_FALSE(read(nest(65)).ok) << "65 levels accepted by default";
}

TEST(DocJson, OnlyCollectionsCountTowardsTheNestingLimit) {
  // As in the YAML reader: max_depth collections may nest, and a scalar inside the
  // innermost one is fine.
  ReadLimits lim;
  lim.max_depth = 3;
  EXPECT_TRUE(read("[[[1, \"s\", null]]]", lim).ok);
  EXPECT_TRUE(read("{\"a\": {\"b\": {\"c\": true}}}", lim).ok);
  auto r = read("{\"a\": {\"b\": {\"c\": {}}}}", lim);
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.diag());
  EXPECT_EQ(r.diag()->code, DiagCode::NestingTooDeep);
  EXPECT_EQ(r.diag()->pos, (Pos{1, 1, 19}));  // the fourth '{'
}

TEST(DocJson, ValueCountIsBounded) {
  ReadLimits lim;
  lim.max_nodes = 5;
  EXPECT_TRUE(read("[1, 2, 3, 4]", lim).ok);
  auto r = read("[1, 2, 3, 4, 5]", lim);
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.diag());
  EXPECT_EQ(r.diag()->pos, (Pos{1, 1, 14}));
}

// ---------------------------------------------------------------- differential vs nlohmann-json
nlohmann::json to_json(const DocNode& n) {
  switch (n.kind) {
    case DocNode::Kind::Null: return nullptr;
    case DocNode::Kind::Bool: return n.text == "true";
    case DocNode::Kind::Int: {
      int64_t i;
      auto [p, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), i);
      if (ec == std::errc() && p == n.text.data() + n.text.size()) return i;
      uint64_t u;
      auto [p2, ec2] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), u);
      if (ec2 == std::errc() && p2 == n.text.data() + n.text.size()) return u;
      return std::strtod(n.text.c_str(), nullptr);
    }
    case DocNode::Kind::Float: return std::strtod(n.text.c_str(), nullptr);
    case DocNode::Kind::String: return n.text;
    case DocNode::Kind::Seq: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& c : n.items) a.push_back(to_json(c));
      return a;
    }
    case DocNode::Kind::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (size_t i = 0; i < n.keys.size(); ++i) o[n.keys[i].name] = to_json(n.items[i]);
      return o;
    }
  }
  return nullptr;
}

const std::vector<std::string>& differential_corpus() {
  static const std::vector<std::string> corpus = {
      // valid
      "0", "-0", "1", "-1", "1.5", "-1.5e-3", "1E3", "1e+3", "0.0", "1e-400", "123456789012345678",
      "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
      "-9223372036854775808", "-9223372036854775809", "1e308", "5e-324", "true", "false", "null", "\"\"",
      R"("a\"b")", R"("\\")", R"("\/")", R"("\b\f\n\r\t")", R"("\u0000")", R"("\u0041\u00e9\u20ac")",
      R"("\ud83d\ude00")", R"("\uD83D\uDE00")", R"("\uffff")", "\"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80\"",
      "\"\x7f\"", "[]", "{}", "[[]]", "[{}]", R"({"":0})", " \t\r\n[ 1 , 2 ]\n ", R"({"a":{"b":[1,{"c":null}]}})",
      R"([1,"2",true,null,{},[]])", R"({"a b": "c\nd", "k": [0.5, -0, 1e2]})", "[[[[[[[[[[1]]]]]]]]]]",
      R"({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})",
      // invalid
      "", " ", "[", "]", "{", "}", "[1,]", "[,1]", "[1 2]", R"({"a":1,})", "{,}", R"({"a"})", R"({"a":})",
      R"({"a" 1})", "{1:2}", "{a:1}", "{'a':1}", "'a'", "\"a", R"("a\")", R"("\x")", R"("\u12")", R"("\u12G4")",
      R"("\ud800")", R"("\udc00")", R"("\ud800\u0041")", R"("\ud800x")", "\"a\tb\"", "\"a\nb\"", "\"\x01\"", "01",
      "00", "-", "-a", "+1", ".5", "1.", "1.e3", "1e", "1e+", "0x10", "Infinity", "-Infinity", "NaN", "tru",
      "true1", "True", "nul", "nulll", "[1]]", "[1] [2]", "{}{}", "\v[]", "\f[]", "[1,\n]", "/* c */ 1", "// c\n1",
      "[1,2", R"({"a":[1,2})", "1 2", "[\"a\",]", "\"\\", R"(["\u"])", std::string("[1,\0]", 5),
  };
  return corpus;
}

TEST(DocJsonDifferential, AgreesWithNlohmannJson) {
  ReadLimits generous;
  generous.max_depth = 1000;
  for (const auto& text : differential_corpus()) {
    auto ours = read(text, generous);
    nlohmann::json theirs = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    bool they_accept = !theirs.is_discarded();
    EXPECT_EQ(ours.ok, they_accept) << "`" << text << "`: kpc " << (ours.ok ? "accepts" : "rejects")
                                    << ", nlohmann " << (they_accept ? "accepts" : "rejects")
                                    << (ours.diag() ? " (" + ours.diag()->message + ")" : "");
    if (ours.ok && they_accept) {
      EXPECT_EQ(to_json(ours.root), theirs) << "`" << text << "`";
    }
  }
}

TEST(DocJsonDifferential, KnownDeliberateDifferences) {
  // Duplicate keys: nlohmann keeps the last value, kpc rejects (the API server's strict decoding does too).
  EXPECT_FALSE(nlohmann::json::parse(R"({"a":1,"a":2})", nullptr, false).is_discarded());
  EXPECT_FALSE(read(R"({"a":1,"a":2})").ok);
  // Nesting: kpc bounds depth, nlohmann does not.
  std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_FALSE(nlohmann::json::parse(deep, nullptr, false).is_discarded());
  EXPECT_EQ(read(deep).diag()->code, DiagCode::NestingTooDeep);
  // A UTF-8 BOM: nlohmann skips it; kpc (like Go's encoding/json) rejects it.
  EXPECT_FALSE(nlohmann::json::parse("\xEF\xBB\xBF[1]", nullptr, false).is_discarded());
  EXPECT_FALSE(read("\xEF\xBB\xBF[1]").ok);
  // Numbers beyond double range: nlohmann rejects them; kpc keeps the text (any such
  // number is out of range for every integer field, reported by the decoder).
  EXPECT_TRUE(nlohmann::json::parse("1e400", nullptr, false).is_discarded());
  EXPECT_TRUE(read("1e400").ok);
  // Invalid UTF-8 inside strings: nlohmann rejects; read_json leaves it to the loader's
  // binary-input check (E0003), which runs before any reader.
  EXPECT_TRUE(nlohmann::json::parse("\"\xff\"", nullptr, false).is_discarded());
  auto l = loadtest::load_json("{\"kind\": \"\xff\"}");
  ASSERT_TRUE(l.first(DiagCode::BinaryInput)) << l.rendered();
  EXPECT_EQ(l.first(DiagCode::BinaryInput)->pos, (Pos{1, 1, 11}));
}

}  // namespace
}  // namespace kpc
