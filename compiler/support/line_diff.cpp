#include "compiler/support/line_diff.h"

#include <algorithm>
#include <vector>

#include "compiler/support/text.h"

namespace kpc {
namespace {

// Lines with their newline (a last line without one differs from the same text with one).
std::vector<std::string_view> lines_of(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t e = s.find('\n', i);
    size_t end = e == std::string_view::npos ? s.size() : e + 1;
    out.push_back(s.substr(i, end - i));
    i = end;
  }
  return out;
}

enum class Op : char { Equal, Delete, Insert };
struct Edit {
  Op op;
  size_t a, b;  ///< line indexes: a for Equal/Delete, b for Equal/Insert
};

// Myers' O(ND) diff of a[a0,a1) and b[b0,b1), at most max_d edits: false when more are needed.
bool myers(const std::vector<std::string_view>& a, size_t a0, size_t a1, const std::vector<std::string_view>& b,
           size_t b0, size_t b1, size_t max_d, std::vector<Edit>* out) {
  const long n = static_cast<long>(a1 - a0), m = static_cast<long>(b1 - b0);
  const long limit = std::min<long>(n + m, static_cast<long>(max_d));
  std::vector<long> v(2 * static_cast<size_t>(limit) + 3, 0);
  const long off = limit + 1;
  std::vector<std::vector<long>> trace;  // v over [-d, d] after step d
  long found = -1;
  for (long d = 0; d <= limit && found < 0; ++d) {
    for (long k = -d; k <= d; k += 2) {
      long x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      long y = x - k;
      while (x < n && y < m && a[a0 + x] == b[b0 + y]) ++x, ++y;
      v[off + k] = x;
      if (x >= n && y >= m) found = d;
    }
    trace.emplace_back(v.begin() + (off - d), v.begin() + (off + d + 1));
  }
  if (found < 0) return false;
  std::vector<Edit> rev;
  long x = n, y = m;
  for (long d = found; d > 0; --d) {
    const auto& p = trace[static_cast<size_t>(d - 1)];  // indexes [-(d-1), d-1]
    auto at = [&](long k) { return p[static_cast<size_t>(k + d - 1)]; };
    long k = x - y;
    bool down = k == -d || (k != d && at(k - 1) < at(k + 1));
    long pk = down ? k + 1 : k - 1;
    long px = at(pk), py = px - pk;
    while (x > px && y > py) {
      --x, --y;
      rev.push_back({Op::Equal, a0 + x, b0 + y});
    }
    if (down) rev.push_back({Op::Insert, a0 + px, b0 + py});
    else rev.push_back({Op::Delete, a0 + px, b0 + py});
    x = px, y = py;
  }
  while (x > 0 && y > 0) {
    --x, --y;
    rev.push_back({Op::Equal, a0 + x, b0 + y});
  }
  out->insert(out->end(), rev.rbegin(), rev.rend());
  return true;
}

std::string show(std::string_view line, char mark, size_t max_bytes) {
  bool nl = !line.empty() && line.back() == '\n';
  if (nl) line.remove_suffix(1);
  std::string s = mark + printable_capped(line, max_bytes) + "\n";
  if (!nl) s += "\\ No newline at end of file\n";
  return s;
}

std::string range(size_t start, size_t count) {  // diff -u: 1-based start; an empty range names the line before
  std::string s = std::to_string(count == 0 ? start : start + 1);
  if (count != 1) s.append(",").append(std::to_string(count));
  return s;
}

}  // namespace

std::string unified_diff(std::string_view a_text, std::string_view b_text, std::string_view a_name,
                         std::string_view b_name, const UnifiedDiffOptions& o) {
  if (a_text == b_text) return "";
  auto a = lines_of(a_text), b = lines_of(b_text);
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  // The edit script over [pre - context, end - suf + context): changes and the context they need.
  size_t lead = std::min(pre, o.context), trail = std::min(suf, o.context);
  std::vector<Edit> edits;
  for (size_t i = pre - lead; i < pre; ++i) edits.push_back({Op::Equal, i, i});
  bool exact = myers(a, pre, a.size() - suf, b, pre, b.size() - suf, o.max_edits, &edits);
  if (!exact) {  // too many edits: the whole changed region, removed then added
    for (size_t i = pre; i < a.size() - suf; ++i) edits.push_back({Op::Delete, i, pre});
    for (size_t j = pre; j < b.size() - suf; ++j) edits.push_back({Op::Insert, a.size() - suf, j});
  }
  for (size_t t = 0; t < trail; ++t) edits.push_back({Op::Equal, a.size() - suf + t, b.size() - suf + t});
  // Hunks: changes closer than 2 * context lines share one.
  std::string out = "--- " + printable_capped(a_name, o.max_line_bytes) + "\n+++ " +
                    printable_capped(b_name, o.max_line_bytes) + "\n";
  if (!exact) out += "(more than " + std::to_string(o.max_edits) + " line edits: the changed region as one block)\n";
  size_t shown = 0, hidden = 0;
  size_t i = 0;
  while (i < edits.size()) {
    while (i < edits.size() && edits[i].op == Op::Equal) ++i;
    if (i == edits.size()) break;
    size_t start = i >= o.context ? i - o.context : 0;
    size_t end = i;  // one past the hunk's last change
    for (size_t j = i; j < edits.size(); ++j) {
      if (edits[j].op != Op::Equal) {
        end = j + 1;
      } else if (j - end + 1 > 2 * o.context) {
        break;
      }
    }
    size_t stop = std::min(edits.size(), end + o.context);
    size_t na = 0, nb = 0;
    for (size_t j = start; j < stop; ++j) na += edits[j].op != Op::Insert, nb += edits[j].op != Op::Delete;
    std::string body;
    for (size_t j = start; j < stop; ++j) {
      const Edit& e = edits[j];
      if (shown >= o.max_lines) {
        hidden += e.op != Op::Equal;
        continue;
      }
      ++shown;
      body += e.op == Op::Equal ? show(a[e.a], ' ', o.max_line_bytes)
              : e.op == Op::Delete ? show(a[e.a], '-', o.max_line_bytes)
                                   : show(b[e.b], '+', o.max_line_bytes);
    }
    if (!body.empty())
      out += "@@ -" + range(edits[start].a, na) + " +" + range(edits[start].b, nb) + " @@\n" + body;
    i = stop;
  }
  if (hidden) out += "... " + std::to_string(hidden) + " more changed lines not shown\n";
  return out;
}

}  // namespace kpc
