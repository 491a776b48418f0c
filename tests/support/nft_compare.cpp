#include "tests/support/nft_compare.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace kpc::test {
namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// One line with the words the order looks at (strings.Split(line, " "): empty words
// between repeated spaces count).
struct Line {
  std::string text;
  bool short_line = false;  // fewer than 5 words
  std::string type;         // word 2
  std::string name;         // word 5
};

Line make_line(std::string text) {
  Line l;
  auto words = split(text, ' ');
  l.short_line = words.size() < 5;
  if (!l.short_line) {
    l.type = words[1];
    l.name = words[4];
  }
  l.text = std::move(text);
  return l;
}

int object_order(const std::string& type) {
  if (type == "table") return 10;
  if (type == "chain") return 9;
  if (type == "rule") return 8;
  if (type == "set") return 7;
  if (type == "map") return 6;
  if (type == "element") return 5;
  return 0;
}

// kube-proxy's less(i, j), including its quirks (">=" on the type rank, so two
// different unknown types are each "less" than the other).
bool kube_proxy_less(const Line& i, const Line& j) {
  if (i.short_line || j.short_line) return false;
  if (i.type != j.type) return object_order(i.type) >= object_order(j.type);
  if (i.name != j.name) return i.name < j.name;
  if (i.type == "rule") return false;
  return i.text < j.text;
}

// Go's stable sort (sort.SliceStable: insertion sort on blocks of 20, then SymMerge
// passes), so that the result equals the Go helper's for any comparator.
class GoStable {
 public:
  explicit GoStable(std::vector<Line>& v) : v_(v) {}

  void sort() {
    int n = static_cast<int>(v_.size());
    int block = 20;
    int a = 0, b = block;
    while (b <= n) {
      insertion_sort(a, b);
      a = b;
      b += block;
    }
    insertion_sort(a, n);
    while (block < n) {
      a = 0;
      b = 2 * block;
      while (b <= n) {
        sym_merge(a, a + block, b);
        a = b;
        b += 2 * block;
      }
      if (int m = a + block; m < n) sym_merge(a, m, n);
      block *= 2;
    }
  }

 private:
  bool less(int i, int j) const { return kube_proxy_less(v_[i], v_[j]); }
  void swap(int i, int j) { std::swap(v_[i], v_[j]); }

  void insertion_sort(int a, int b) {
    for (int i = a + 1; i < b; ++i)
      for (int j = i; j > a && less(j, j - 1); --j) swap(j, j - 1);
  }

  void swap_range(int a, int b, int n) {
    for (int i = 0; i < n; ++i) swap(a + i, b + i);
  }

  void rotate(int a, int m, int b) {
    int i = m - a, j = b - m;
    while (i != j) {
      if (i > j) {
        swap_range(m - i, m, j);
        i -= j;
      } else {
        swap_range(m - i, m + j - i, i);
        j -= i;
      }
    }
    swap_range(m - i, m, i);
  }

  static int half(int x, int y) { return static_cast<int>(static_cast<unsigned>(x + y) >> 1); }

  void sym_merge(int a, int m, int b) {
    if (m - a == 1) {
      int i = m, j = b;
      while (i < j) {
        int h = half(i, j);
        if (less(h, a))
          i = h + 1;
        else
          j = h;
      }
      for (int k = a; k < i - 1; ++k) swap(k, k + 1);
      return;
    }
    if (b - m == 1) {
      int i = a, j = m;
      while (i < j) {
        int h = half(i, j);
        if (!less(m, h))
          i = h + 1;
        else
          j = h;
      }
      for (int k = m; k > i; --k) swap(k, k - 1);
      return;
    }
    int mid = half(a, b);
    int n = mid + m;
    int start, r;
    if (m > mid) {
      start = n - b;
      r = mid;
    } else {
      start = a;
      r = m;
    }
    int p = n - 1;
    while (start < r) {
      int c = half(start, r);
      if (!less(p - c, c))
        start = c + 1;
      else
        r = c;
    }
    int end = n - start;
    if (start < m && m < end) rotate(start, m, end);
    if (a < start && start < mid) sym_merge(a, start, mid);
    if (mid < end && end < b) sym_merge(mid, end, b);
  }

  std::vector<Line>& v_;
};

std::vector<std::string> kept_lines(std::string_view text) {
  std::vector<std::string> out;
  for (auto& l : split(text, '\n'))
    if (!l.empty() && l[0] != '#') out.push_back(std::move(l));
  return out;
}

size_t source_line_of(std::string_view text, const std::string& line) {
  auto lines = split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i] == line) return i + 1;
  return 0;
}

}  // namespace

std::string sort_nftables_transaction(std::string_view text) {
  std::vector<Line> lines;
  for (auto& l : kept_lines(text)) lines.push_back(make_line(std::move(l)));
  GoStable(lines).sort();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    out += lines[i].text;
  }
  return out;
}

NftDiff diff_nftables_transaction(std::string_view expected, std::string_view actual) {
  std::string se = sort_nftables_transaction(expected), sa = sort_nftables_transaction(actual);
  NftDiff d;
  if (se == sa) return d;
  d.equal = false;
  // An empty sorted text has no lines (strings.Split("") gives one empty line in Go, but
  // cmp.Diff compares the joined strings, so only presence matters here).
  auto le = se.empty() ? std::vector<std::string>{} : split(se, '\n');
  auto la = sa.empty() ? std::vector<std::string>{} : split(sa, '\n');
  size_t i = 0;
  while (i < le.size() && i < la.size() && le[i] == la[i]) ++i;
  d.line = i + 1;
  d.expected_ended = i >= le.size();
  d.actual_ended = i >= la.size();
  if (!d.expected_ended) {
    d.expected = le[i];
    d.expected_source_line = source_line_of(expected, d.expected);
  }
  if (!d.actual_ended) {
    d.actual = la[i];
    d.actual_source_line = source_line_of(actual, d.actual);
  }
  return d;
}

std::string describe(const NftDiff& d) {
  if (d.equal) return "";
  std::string s = "nftables texts differ after sortNFTablesTransaction at sorted line " + std::to_string(d.line) + ":\n";
  s += "  expected: " + (d.expected_ended ? std::string("<end of text>") : d.expected);
  if (d.expected_source_line) s += "   (expected input line " + std::to_string(d.expected_source_line) + ")";
  s += "\n  actual:   " + (d.actual_ended ? std::string("<end of text>") : d.actual);
  if (d.actual_source_line) s += "   (actual input line " + std::to_string(d.actual_source_line) + ")";
  s += "\n";
  return s;
}

std::string nftables_dump_order(std::string_view text) {
  std::vector<std::string> tables, others;
  std::map<std::string, std::vector<std::string>> chains, sets, maps;  // declarations by name
  std::map<std::string, std::vector<std::string>> rules, elements;     // by chain / container
  for (auto& line : kept_lines(text)) {
    Line l = make_line(line);
    if (l.short_line) {
      others.push_back(line);
      continue;
    }
    if (l.type == "table")
      tables.push_back(line);
    else if (l.type == "chain")
      chains[l.name].push_back(line);
    else if (l.type == "set")
      sets[l.name].push_back(line);
    else if (l.type == "map")
      maps[l.name].push_back(line);
    else if (l.type == "rule")
      rules[l.name].push_back(line);
    else if (l.type == "element")
      elements[l.name].push_back(line);
    else
      others.push_back(line);
  }
  std::string out;
  auto emit = [&out](const std::vector<std::string>& v) {
    for (const auto& l : v) out += l + "\n";
  };
  emit(tables);
  for (const auto& [_, v] : chains) emit(v);
  for (const auto& [_, v] : sets) emit(v);
  for (const auto& [_, v] : maps) emit(v);
  // Rules chain by chain in chain-name order (a chain that only has rules sorts in too).
  for (const auto& [_, v] : rules) emit(v);
  for (const auto& [name, v] : elements)
    if (!maps.count(name)) emit(v);  // set elements (and elements of undeclared containers)
  for (const auto& [name, v] : elements)
    if (maps.count(name)) emit(v);
  emit(others);
  return out;
}

std::string normalized_nft_listing(std::string_view text) {
  std::vector<std::string> lines;
  for (auto& l : split(text, '\n')) {
    if (size_t h = l.find(" # handle "); h != std::string::npos) l.erase(h);
    lines.push_back(std::move(l));
  }
  std::string out, block;
  std::vector<std::string> blocks;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("table ", 0) == 0 || l == "}") {
      std::sort(blocks.begin(), blocks.end());
      for (const auto& b : blocks) out += b;
      blocks.clear();
      out += l + "\n";
      continue;
    }
    if (l.rfind("\t\telements = { ", 0) == 0) {  // gather the (wrapped) list and sort its items
      std::string all = l.substr(std::string("\t\telements = { ").size());
      while (all.find(" }") == std::string::npos && i + 1 < lines.size()) {
        const std::string& next = lines[++i];
        size_t b = next.find_first_not_of(" \t");
        all += " " + (b == std::string::npos ? std::string() : next.substr(b));
      }
      all = all.substr(0, all.rfind(" }"));
      std::vector<std::string> items;
      for (size_t p = 0;;) {
        size_t c = all.find(", ", p);
        items.push_back(all.substr(p, c == std::string::npos ? std::string::npos : c - p));
        if (c == std::string::npos) break;
        p = c + 2;
      }
      std::sort(items.begin(), items.end());
      block += "\t\telements = {";
      for (const auto& it : items) block += " " + it + ",";
      block += " }\n";
      continue;
    }
    if (l.empty()) continue;
    block += l + "\n";
    if (l == "\t}") {
      blocks.push_back(block);
      block.clear();
    }
  }
  return out;
}

}  // namespace kpc::test
