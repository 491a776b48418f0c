// Differential properties of the fast YAML reader (doc_yaml_fast.cpp) against the
// yaml-cpp reader: on random YAML-ish streams built from the supported grammar, on
// random mutations of them (inserted/deleted characters, changed indentation,
// duplicated lines) and under small depth/node limits, the fast path either declines
// cleanly or agrees exactly (trees with every position, diagnostics, result). A
// go-yaml-style emitter checks that kubectl-shaped output is never declined.
//
// Documents are drawn from a byte vector that rapidcheck generates ("choice stream"),
// so shrinking the vector shrinks the document: a failure is reported on a small input.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "compiler/model/doc.h"

namespace kpc {
namespace {

// ---- comparison (as in tests/unit/doc_yaml_fast_test.cpp) ------------------------------

std::string pos_str(const Pos& p) { return std::to_string(p.line) + ":" + std::to_string(p.col); }

std::string node_str(const DocNode& n) {
  return std::string(kind_name(n.kind)) + "@" + pos_str(n.pos) + (n.is_scalar() ? " \"" + n.text + "\"" : "");
}

// Empty if equal, else the first difference.
std::string tree_diff(const DocNode& a, const DocNode& b, const std::string& path) {
  if (a.kind != b.kind || a.pos != b.pos || a.text != b.text || a.items.size() != b.items.size() ||
      a.keys.size() != b.keys.size())
    return path + ": fast " + node_str(a) + " (" + std::to_string(a.items.size()) + ") vs yaml-cpp " + node_str(b) +
           " (" + std::to_string(b.items.size()) + ")";
  for (size_t i = 0; i < a.keys.size(); ++i)
    if (a.keys[i].name != b.keys[i].name || a.keys[i].pos != b.keys[i].pos)
      return path + ": key " + std::to_string(i) + " \"" + a.keys[i].name + "\"@" + pos_str(a.keys[i].pos) + " vs \"" +
             b.keys[i].name + "\"@" + pos_str(b.keys[i].pos);
  for (size_t i = 0; i < a.items.size(); ++i)
    if (std::string d = tree_diff(a.items[i], b.items[i], path + "/" + std::to_string(i)); !d.empty()) return d;
  return "";
}

std::string diag_str(const Diagnostic& d) { return std::string(diag_info(d.code).code) + "@" + pos_str(d.pos) + " " + d.message; }

struct Verdict {
  bool declined = false;
  bool ok = false;
  std::string diff;  // empty: agrees (or declined cleanly)
};

Verdict compare(const std::string& text, const ReadLimits& limits = {}) {
  SourceManager sm;
  uint32_t f = sm.add("t.yaml", text);
  Verdict v;
  DiagSink fd, rd;
  std::vector<DocNode> fo, ro;
  bool fok = read_yaml_fast(sm, f, limits, &fo, fd, &v.declined);
  if (v.declined) {
    if (fok || !fo.empty() || !fd.all().empty()) v.diff = "declined but produced output";
    return v;
  }
  bool rok = read_yaml_reference(sm, f, limits, &ro, rd);
  v.ok = fok;
  if (fok != rok) v.diff = "result " + std::to_string(fok) + " vs " + std::to_string(rok);
  else if (fd.all().size() != rd.all().size())
    v.diff = "diagnostics " + std::to_string(fd.all().size()) + " vs " + std::to_string(rd.all().size()) +
             (rd.all().empty() ? "" : " (yaml-cpp: " + diag_str(rd.all()[0]) + ")") +
             (fd.all().empty() ? "" : " (fast: " + diag_str(fd.all()[0]) + ")");
  else if (fo.size() != ro.size())
    v.diff = "documents " + std::to_string(fo.size()) + " vs " + std::to_string(ro.size());
  for (size_t i = 0; v.diff.empty() && i < fd.all().size(); ++i) {
    const Diagnostic &a = fd.all()[i], &b = rd.all()[i];
    if (a.code != b.code || a.pos != b.pos || a.message != b.message)
      v.diff = "diagnostic " + diag_str(a) + " vs " + diag_str(b);
  }
  for (size_t i = 0; v.diff.empty() && i < fo.size(); ++i) v.diff = tree_diff(fo[i], ro[i], "doc" + std::to_string(i));
  return v;
}

void check_agrees(const std::string& text, const ReadLimits& limits = {}) {
  Verdict v = compare(text, limits);
  if (!v.diff.empty())
    RC_FAIL(v.diff + "\nlimits: depth " + std::to_string(limits.max_depth) + ", nodes " +
            std::to_string(limits.max_nodes) + "\n--- input ---\n" + text + "\n--- end ---");
}

// ---- choice stream ----------------------------------------------------------------------

class Choices {
 public:
  explicit Choices(const std::vector<uint8_t>& bytes) : b_(bytes) {}
  // 0 when exhausted, which every caller treats as the simplest option.
  int pick(int n) { return i_ < b_.size() ? b_[i_++] % n : 0; }
  bool chance(int one_in) { return pick(one_in) == one_in - 1; }
  template <size_t N>
  const char* of(const char* const (&options)[N]) { return options[pick(static_cast<int>(N))]; }

 private:
  const std::vector<uint8_t>& b_;
  size_t i_ = 0;
};

rc::Gen<std::vector<uint8_t>> choice_bytes() {
  return rc::gen::resize(600, rc::gen::container<std::vector<uint8_t>>(rc::gen::arbitrary<uint8_t>()));
}

// ---- YAML-ish streams from the supported grammar (plus a little outside it) -------------

const char* const kWords[] = {"a", "b", "name", "x y", "80", "-1", "0", "1.5", "true", "no", "~", "null", "Null",
                              "10.0.0.1", "::1", "fd00::1", "a:b", "a#b", "http://x:80/p", "-x", "on", "0x1F", "007",
                              "1e3", "\xc3\xa9t\xc3\xa9", "a  b", "...", "x'y", "x\"y", "[x]", "-.5", "+1", "1.", "?x"};
const char* const kOdd[] = {"<<", ":x", "%x", "@x", "-", "--x", "!x", "&a x", "*a", "`x", "? x", ":", ">x", "|x"};
const char* const kSingle[] = {"a", "''", " ", "#", ":", "\"", "\\", ": ", " #", ",", "]", "}", "[{"};
const char* const kDouble[] = {"a",  "\\n", "\\\"", " ",  "\\x41", "\\u00e9", "\\t",         "'", "#",
                               "\\/", "\\\\", "\\e", "\\0", "\\ ",   ": ",     "\\U0001F600", ", ", "]}", "{["};
const char* const kBadEscapes[] = {"\\N", "\\q", "\\x4", "\\uD800", "\\L"};  // declined (or errors)

class StreamGen {
 public:
  explicit StreamGen(Choices& c) : c_(c) {}

  std::string stream() {
    std::string s;
    if (c_.chance(5)) s += "# head\n";
    int docs = 1 + c_.pick(3);
    for (int i = 0; i < docs; ++i) {
      if (i || c_.chance(2)) s += c_.chance(6) ? "--- # c\n" : "---\n";
      if (c_.chance(8)) continue;  // empty document
      doc(s);
      if (c_.chance(6)) s += "...\n";
    }
    // How the input ends matters to yaml-cpp's marks: a line break, none, or a last
    // line of spaces and/or a comment without one.
    static const char* const endings[] = {"", " ", "  ", "   ", "#", "# c", "  # c", "    #"};
    if (c_.chance(4)) {
      if (c_.chance(2) && !s.empty()) s.pop_back();
      else s += c_.of(endings);
    }
    return s;
  }

 private:
  std::string scalar(bool flow) {
    switch (c_.pick(9)) {
      case 1: {
        std::string s = "'";
        for (int i = c_.pick(4); i > 0; --i) s += c_.of(kSingle);
        return s + "'";
      }
      case 2: {
        std::string s = "\"";
        for (int i = c_.pick(4); i > 0; --i) s += c_.chance(15) ? c_.of(kBadEscapes) : c_.of(kDouble);
        return s + "\"";
      }
      case 3: return std::to_string(c_.pick(256) * 977);
      case 4: return c_.chance(2) ? "[]" : "{}";
      case 5: return "v" + std::to_string(c_.pick(10));
      default: {
        if (c_.chance(25)) return c_.of(kOdd);
        std::string w = c_.of(kWords);
        if (flow && (w == "[x]" || w == "?x" || w == "a:b" || w == "a#b")) w = "f";
        return w;
      }
    }
  }

  std::string flow(int depth) {
    if (depth > 2 || c_.pick(3) == 0) return scalar(true);
    std::string s;
    bool seq = c_.chance(2);
    s = seq ? "[" : "{";
    bool pad = c_.chance(6);
    if (pad) s += " ";
    for (int i = c_.pick(4); i > 0; --i) {
      if (s.size() > 2 || (s.size() == 2 && !pad)) s += c_.chance(4) ? "," : ", ";
      if (!seq) {
        bool quoted = c_.chance(5);
        s += quoted ? "\"k\"" : kWords[c_.pick(6)];
        s += (quoted && c_.chance(2)) || c_.chance(30) ? ":" : ": ";
      }
      s += flow(depth + 1);
    }
    if (pad) s += " ";
    return s + (seq ? "]" : "}");
  }

  std::string comment() {
    if (!c_.chance(4)) return "";
    return c_.chance(2) ? " # c" : "  #c: d";
  }

  std::string key() {
    int k = c_.pick(10);
    if (k == 8) return "\"q k\"";
    if (k == 9) return "'s'";
    std::string w = kWords[c_.pick(8)];
    if (c_.chance(3)) w += std::to_string(c_.pick(3));
    return w;
  }

  void block_scalar(std::string& out, int ind) {
    out += " ";
    static const char* const headers[] = {"|", "|-", "|+"};
    out += c_.chance(30) ? ">" : c_.of(headers);
    out += comment() + "\n";
    int bi = ind + 1 + c_.pick(3);
    for (int i = 0, n = 1 + c_.pick(3); i < n; ++i) {
      int k = i ? c_.pick(7) : 6;
      if (k == 0) out += "\n";
      else if (k == 1) out += std::string(size_t(bi + c_.pick(3)), ' ') + "more: x\n";
      else if (k == 2) out += std::string(size_t(c_.pick(bi + 3)), ' ') + "\n";
      else out += std::string(size_t(bi), ' ') + "line " + std::to_string(i) + (c_.chance(4) ? " # not a comment" : "") + "\n";
    }
    if (c_.chance(3)) out += "\n";
  }

  // After "key:" or "-": a same-line value, or a line break and a nested block.
  void value(std::string& out, int ind, int depth) {
    int k = depth > 6 ? 0 : c_.pick(12);
    if (k <= 3) out += " " + scalar(false) + comment() + "\n";
    else if (k == 4) out += " " + flow(0) + comment() + "\n";
    else if (k == 5) out += comment() + "\n";  // empty
    else if (k == 6) block_scalar(out, ind);
    else {
      out += comment() + "\n";
      if (c_.chance(3)) out += "\n";
      int step = c_.chance(4) ? 0 : 1 + c_.pick(3);
      if (k <= 8) seq(out, ind + step, depth + 1, false);
      else map(out, ind + (step ? step : 2), depth + 1, false);
    }
  }

  void map(std::string& out, int ind, int depth, bool first_inline) {
    for (int i = 0, n = 1 + c_.pick(4); i < n; ++i) {
      if (!(first_inline && i == 0)) out += std::string(size_t(ind), ' ');
      out += key() + (c_.chance(10) ? " :" : ":");
      value(out, ind, depth + 1);
      if (c_.chance(12)) out += std::string(size_t(c_.pick(6)), ' ') + "# comment line\n";
      if (c_.chance(15)) out += "\n";
    }
  }

  void seq(std::string& out, int ind, int depth, bool first_inline) {
    for (int i = 0, n = 1 + c_.pick(4); i < n; ++i) {
      if (!(first_inline && i == 0)) out += std::string(size_t(ind), ' ');
      out += "-";
      int k = c_.pick(10);
      if (k < 4 && depth < 6) {
        int sp = c_.chance(5) ? 2 : 1;
        out += std::string(size_t(sp), ' ');
        map(out, ind + 1 + sp, depth + 1, true);
      } else if (k == 4 && depth < 6) {
        out += " ";
        seq(out, ind + 2, depth + 1, true);
      } else if (k == 5) {
        out += comment() + "\n";
      } else {
        value(out, ind, depth + 1);
      }
    }
  }

  void doc(std::string& out) {
    int k = c_.pick(10);
    int ind = c_.chance(8) ? c_.pick(3) : 0;
    if (k < 6) map(out, ind, 0, false);
    else if (k < 8) seq(out, ind, 0, false);
    else if (k == 8) out += scalar(false) + "\n";
    else out += flow(0) + "\n";
  }

  Choices& c_;
};

std::string generate(const std::vector<uint8_t>& bytes) {
  Choices c(bytes);
  return StreamGen(c).stream();
}

// Insertions of YAML-significant characters, deletions, indentation changes, duplicated
// and deleted lines.
struct Mutation {
  uint8_t kind;
  uint16_t at;
  uint8_t ch;
};

std::string mutate(std::string s, const std::vector<Mutation>& muts) {
  static const std::string alphabet = " -:#'\"[]{},|>&*!?\t\\\nab.~0\r%";
  for (const Mutation& m : muts) {
    if (s.empty()) break;
    size_t at = m.at % s.size();
    size_t ls = s.rfind('\n', at);
    ls = ls == std::string::npos ? 0 : ls + 1;
    size_t le = s.find('\n', at);
    le = le == std::string::npos ? s.size() : le + 1;
    switch (m.kind % 7) {
      case 0: s.insert(at, 1, alphabet[m.ch % alphabet.size()]); break;
      case 1: s.erase(at, 1); break;
      case 2: s.insert(ls, size_t(1 + m.ch % 2), ' '); break;  // indent a line
      case 3:
        if (s[ls] == ' ') s.erase(ls, 1);  // dedent a line
        break;
      case 4: s.insert(ls, s.substr(ls, le - ls)); break;  // duplicate a line
      case 5: s.erase(ls, le - ls); break;                 // delete a line
      case 6: s.insert(at, size_t(1 + m.ch % 3), ' '); break;
    }
  }
  return s;
}

rc::Gen<std::vector<Mutation>> mutations() {
  return rc::gen::resize(
      6, rc::gen::container<std::vector<Mutation>>(rc::gen::construct<Mutation>(
             rc::gen::arbitrary<uint8_t>(), rc::gen::arbitrary<uint16_t>(), rc::gen::arbitrary<uint8_t>())));
}

// ---- properties -------------------------------------------------------------------------

// Each case checks a batch of inputs (rapidcheck runs 100 cases per property, and these
// checks are cheap); rapidcheck shrinks within the batch too.
constexpr int kBatch = 25;

RC_GTEST_PROP(DocYamlFastProps, GeneratedStreamsDeclineOrAgree, ()) {
  const auto batch = *rc::gen::container<std::vector<std::vector<uint8_t>>>(kBatch, choice_bytes());
  for (const auto& bytes : batch) check_agrees(generate(bytes));
}

RC_GTEST_PROP(DocYamlFastProps, MutatedStreamsDeclineOrAgree, ()) {
  const auto bytes = *choice_bytes();
  const auto batch = *rc::gen::container<std::vector<std::vector<Mutation>>>(kBatch, mutations());
  const std::string text = generate(bytes);
  for (const auto& muts : batch) check_agrees(mutate(text, muts));
}

RC_GTEST_PROP(DocYamlFastProps, LimitsDeclineOrAgree, ()) {
  const auto bytes = *choice_bytes();
  const auto muts = *rc::gen::resize(2, mutations());
  const std::string text = mutate(generate(bytes), muts);
  const auto depths = *rc::gen::container<std::vector<size_t>>(kBatch, rc::gen::inRange<size_t>(1, 8));
  const auto counts = *rc::gen::container<std::vector<size_t>>(kBatch, rc::gen::inRange<size_t>(1, 60));
  for (int i = 0; i < kBatch; ++i) {
    ReadLimits limits;
    limits.max_depth = depths[size_t(i)];
    limits.max_nodes = counts[size_t(i)];
    check_agrees(text, limits);
  }
}

// ---- kubectl-shaped output: must be covered, not just not contradicted -------------------

// Emits a random object the way go-yaml v2 (kubectl -o yaml) prints: two-space maps,
// sequence items at their key's indentation, compact "- key: v" maps, {} and [] for
// empty collections, plain scalars where safe, single quotes for strings that would
// read as numbers or booleans, double quotes with escapes for special characters,
// literal blocks for multi-line strings.
class KubectlGen {
 public:
  explicit KubectlGen(Choices& c) : c_(c) {}

  std::string document() {
    std::string out;
    map_body(out, 0, 0, false);
    return out;
  }

 private:
  std::string key() {
    static const char* const keys[] = {"apiVersion", "kind", "metadata", "name", "namespace", "labels", "spec",
                                       "ports", "port", "targetPort", "kubernetes.io/service-name", "f:spec",
                                       "k:{\"port\":80,\"protocol\":\"TCP\"}", ".", "app.kubernetes.io/part-of",
                                       "clusterIPs", "nodeName", "addresses", "conditions", "ready"};
    return c_.of(keys);
  }

  std::string scalar(int ind) {
    switch (c_.pick(12)) {
      case 0: return std::to_string(c_.pick(256) * 131);
      case 1: return c_.chance(2) ? "true" : "false";
      case 2: return "null";
      case 3: return "'" + std::to_string(c_.pick(256)) + "'";  // a string that reads as an int
      case 4: return "'true'";
      case 5: return "\"2024-05-01T10:00:00Z\"";
      case 6: return "\"tab\\there \\\"q\\\" caf\\u00e9\"";
      case 7: return "''";
      case 8: return "'it''s: #1'";
      case 9: {  // a literal block
        std::string s = c_.chance(2) ? "|\n" : "|-\n";
        for (int i = 0, n = 1 + c_.pick(3); i < n; ++i) {
          if (i && c_.chance(4)) s += "\n";
          s += std::string(size_t(ind + 2 + (i && c_.chance(5) ? 2 : 0)), ' ') + "{\"line\": " + std::to_string(i) + "}\n";
        }
        return s;
      }
      case 10: return c_.chance(2) ? "10.96." + std::to_string(c_.pick(256)) + ".1" : "fd00::" + std::to_string(c_.pick(99));
      default: {
        static const char* const words[] = {"web", "TCP", "ClusterIP", "web-7d4b9c-abcde", "node-1", "IPv4", "v1",
                                            "discovery.k8s.io/v1", "Service", "EndpointSlice", "us-east-1a"};
        return c_.of(words);
      }
    }
  }

  // A value after "key:" (inline_col: where the key started, for nested blocks).
  void value_after_key(std::string& out, int ind, int depth) {
    int k = depth >= 6 ? 0 : c_.pick(6);
    if (k <= 2) {
      std::string s = scalar(ind);
      out += " " + s + (s[0] == '|' ? "" : "\n");
    } else if (k == 3) {
      out += c_.chance(2) ? " {}\n" : " []\n";
    } else if (k == 4) {
      out += "\n";
      map_body(out, ind + 2, depth + 1, false);
    } else {
      out += "\n";
      seq_body(out, ind, depth + 1);  // kubectl: items at the key's indentation
    }
  }

  void map_body(std::string& out, int ind, int depth, bool first_inline) {
    std::vector<std::string> used;
    for (int i = 0, n = 1 + c_.pick(4); i < n; ++i) {
      std::string k = key();
      if (std::find(used.begin(), used.end(), k) != used.end()) continue;  // kubectl never repeats keys
      used.push_back(k);
      if (!(first_inline && used.size() == 1)) out += std::string(size_t(ind), ' ');
      out += k + ":";
      value_after_key(out, ind, depth);
    }
  }

  void seq_body(std::string& out, int ind, int depth) {
    for (int i = 0, n = 1 + c_.pick(3); i < n; ++i) {
      out += std::string(size_t(ind), ' ') + "-";
      int k = depth >= 6 ? 0 : c_.pick(5);
      if (k <= 1) {
        std::string s = scalar(ind);
        out += " " + s + (s[0] == '|' ? "" : "\n");
      } else if (k == 2) {
        out += c_.chance(2) ? " {}\n" : " []\n";
      } else {
        out += " ";
        map_body(out, ind + 2, depth + 1, true);
      }
    }
  }

  Choices& c_;
};

RC_GTEST_PROP(DocYamlFastProps, KubectlStyleOutputIsCoveredAndAgrees, ()) {
  const auto batch = *rc::gen::container<std::vector<std::vector<uint8_t>>>(kBatch, choice_bytes());
  for (const auto& bytes : batch) {
    Choices c(bytes);
    KubectlGen gen(c);
    std::string text;
    for (int i = 0, n = 1 + c.pick(3); i < n; ++i) text += (i ? "---\n" : "") + gen.document();
    Verdict v = compare(text);
    if (v.declined) RC_FAIL("declined (" + yaml_fast_decline_reason() + ")\n--- input ---\n" + text + "\n--- end ---");
    if (!v.diff.empty()) RC_FAIL(v.diff + "\n--- input ---\n" + text + "\n--- end ---");
  }
}

// ---- the generators are not vacuous ------------------------------------------------------

// A differential property that always declines proves nothing: most generated streams
// must be read by the fast path, and a fair share of mutated ones and of the limit runs
// must end in errors the fast path reports itself.
TEST(DocYamlFastProps, GeneratorsExerciseTheFastPath) {
  std::mt19937 rng(20261121);
  int accepted = 0, mutated_accepted = 0, errors = 0;
  const int n = 1000;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> bytes(600);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    std::string text = generate(bytes);
    Verdict v = compare(text);
    EXPECT_TRUE(v.diff.empty()) << v.diff << "\n" << text;
    if (!v.declined) ++accepted;
    std::vector<Mutation> muts(1 + rng() % 3);
    for (auto& m : muts) m = {static_cast<uint8_t>(rng()), static_cast<uint16_t>(rng()), static_cast<uint8_t>(rng())};
    std::string mutated = mutate(text, muts);
    Verdict mv = compare(mutated);
    EXPECT_TRUE(mv.diff.empty()) << mv.diff << "\n--- input ---\n" << mutated << "\n--- end ---";
    if (!mv.declined) ++mutated_accepted;
    ReadLimits lim;
    lim.max_depth = 1 + rng() % 6;
    lim.max_nodes = 1 + rng() % 50;
    Verdict lv = compare(text, lim);
    EXPECT_TRUE(lv.diff.empty()) << lv.diff << "\n--- input ---\n" << text << "\n--- end ---";
    if (!lv.declined && !lv.ok) ++errors;
  }
  EXPECT_GE(accepted, n * 2 / 5) << "generated streams accepted";
  EXPECT_GE(mutated_accepted, n / 5) << "mutated streams accepted";
  EXPECT_GE(errors, n / 5) << "limit errors reported by the fast path";
}

}  // namespace
}  // namespace kpc
