// A small, strict JSON reader (RFC 8259) that records line/column for every
// value and key. nlohmann-json is used elsewhere (JSON output, and as the
// differential reference in tests/unit/doc_json_test.cpp); it does not expose
// positions per value, which located diagnostics need, hence this reader.
#include <cstring>
#include <stdexcept>

#include "compiler/model/doc.h"

namespace kpc {
namespace {

struct JsonError {
  size_t offset;
  std::string message;
  DiagCode code = DiagCode::JsonSyntax;
  Pos pos;  ///< when known, overrides offset
};

class JsonReader {
 public:
  JsonReader(std::string_view text, const SourceManager& sm, uint32_t file, const ReadLimits& limits)
      : s_(text), sm_(sm), file_(file), limits_(limits) {}

  void parse(DocNode* out) {
    skip_ws();
    if (i_ == s_.size()) fail("empty input: expected a JSON value");
    value(out, 0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
  }

 private:
  [[noreturn]] void fail(std::string msg, DiagCode code = DiagCode::JsonSyntax) { fail_at(i_, std::move(msg), code); }
  [[noreturn]] void fail_at(size_t offset, std::string msg, DiagCode code = DiagCode::JsonSyntax) {
    throw JsonError{offset, std::move(msg), code, Pos{}};
  }
  Pos here() const { return sm_.position(file_, i_); }

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  void expect(char c) {
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected '") + c + "'" + found());
    ++i_;
  }

  std::string found() const {
    if (i_ >= s_.size()) return " but the input ended";
    char c = s_[i_];
    if (c >= 0x21 && c < 0x7F) return std::string(" but found '") + c + "'";
    return " but found a non-printable byte";
  }

  // depth = number of collections enclosing this value (0 for the root). Like the YAML
  // reader, only collections count: at most max_depth of them may nest.
  void value(DocNode* out, size_t depth) {
    if (++nodes_ > limits_.max_nodes) fail("too many values in one file", DiagCode::NestingTooDeep);
    out->pos = here();
    if (i_ >= s_.size()) fail("expected a value but the input ended");
    char c = s_[i_];
    if ((c == '{' || c == '[') && depth >= limits_.max_depth)
      fail("nesting deeper than " + std::to_string(limits_.max_depth) + " levels", DiagCode::NestingTooDeep);
    switch (c) {
      case '{': return object(out, depth);
      case '[': return array(out, depth);
      case '"':
        out->kind = DocNode::Kind::String;
        out->text = string();
        return;
      case 't': return literal(out, "true", DocNode::Kind::Bool);
      case 'f': return literal(out, "false", DocNode::Kind::Bool);
      case 'n': return literal(out, "null", DocNode::Kind::Null);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number(out);
        fail("expected a value" + found());
    }
  }

  void literal(DocNode* out, const char* word, DocNode::Kind kind) {
    size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) != 0) fail(std::string("invalid literal (expected '") + word + "')");
    out->kind = kind;
    out->text = word;
    i_ += n;
  }

  void number(DocNode* out) {
    size_t start = i_;
    bool is_float = false;
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (i_ < s_.size() && s_[i_] >= '1' && s_[i_] <= '9') {
      while (i_ < s_.size() && isdigit(s_[i_])) ++i_;
    } else {
      fail("invalid number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      is_float = true;
      ++i_;
      if (i_ >= s_.size() || !isdigit(s_[i_])) fail("invalid number: digit expected after '.'");
      while (i_ < s_.size() && isdigit(s_[i_])) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      is_float = true;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !isdigit(s_[i_])) fail("invalid number: digit expected in exponent");
      while (i_ < s_.size() && isdigit(s_[i_])) ++i_;
    }
    out->kind = is_float ? DocNode::Kind::Float : DocNode::Kind::Int;
    out->text.assign(s_.substr(start, i_ - start));
  }

  static bool isdigit(char c) { return c >= '0' && c <= '9'; }

  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("invalid \\u escape");  // at the offending character
      ++i_;
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    expect('"');
    std::string out;
    size_t run = i_;  // start of a run of plain characters, copied in one go
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        out.append(s_.substr(run, i_ - run));
        ++i_;
        return out;
      }
      if (c < 0x20) fail("control character in string (must be escaped)");
      if (c != '\\') {
        ++i_;
        continue;
      }
      out.append(s_.substr(run, i_ - run));
      const size_t esc = i_;  // the backslash: escape errors are reported here
      ++i_;
      if (i_ >= s_.size()) fail("unterminated string");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.compare(i_, 2, "\\u") != 0) fail_at(esc, "unpaired UTF-16 surrogate in \\u escape");
            const size_t lo_esc = i_;
            i_ += 2;
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail_at(lo_esc, "invalid UTF-16 surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail_at(esc, "unpaired UTF-16 surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail_at(esc, "invalid escape sequence");
      }
      run = i_;
    }
  }

  void object(DocNode* out, size_t depth) {
    out->kind = DocNode::Kind::Map;
    ++i_;
    skip_ws();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return;
    }
    for (;;) {
      skip_ws();
      Pos kpos = here();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key" + found());
      std::string key = string();
      skip_ws();
      expect(':');
      skip_ws();
      out->keys.push_back({std::move(key), kpos});
      out->items.emplace_back();
      value(&out->items.back(), depth + 1);
      skip_ws();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      expect('}');
      if (const DocNode::Key* dup = find_duplicate_key(*out))
        throw JsonError{0, "duplicate key \"" + dup->name + "\"", DiagCode::DuplicateKey, dup->pos};
      return;
    }
  }

  void array(DocNode* out, size_t depth) {
    out->kind = DocNode::Kind::Seq;
    ++i_;
    skip_ws();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return;
    }
    for (;;) {
      skip_ws();
      out->items.emplace_back();
      value(&out->items.back(), depth + 1);
      skip_ws();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      expect(']');
      return;
    }
  }

  std::string_view s_;
  const SourceManager& sm_;
  uint32_t file_;
  const ReadLimits& limits_;
  size_t i_ = 0;
  size_t nodes_ = 0;
};

}  // namespace

bool read_json(const SourceManager& sm, uint32_t file, const ReadLimits& limits, DocNode* out,
               DiagSink& diags) {
  const std::string& text = sm.text(file);
  try {
    JsonReader(text, sm, file, limits).parse(out);
    return true;
  } catch (const JsonError& e) {
    size_t off = e.offset > text.size() ? text.size() : e.offset;
    diags.report(e.code, e.pos.known() ? e.pos : sm.position(file, off), "", "", e.message);
    return false;
  }
}

}  // namespace kpc
