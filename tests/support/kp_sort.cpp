#include "tests/support/kp_sort.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace kpc::test {
namespace {

struct Chain {
  std::string name;
  std::vector<std::string> rules;
  bool deleted = false;
};
struct Table {
  std::string name;
  std::vector<Chain> chains;
  Chain& get(const std::string& n) {
    for (auto& c : chains)
      if (c.name == n) return c;
    chains.push_back({n, {}, false});
    return chains.back();
  }
};

std::vector<Table> parse(const std::string& text) {
  std::vector<Table> tables;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '*') {
      tables.push_back({line.substr(1), {}});
    } else if (line[0] == ':' && !tables.empty()) {
      tables.back().get(line.substr(1, line.find(' ') - 1));
    } else if (line.rfind("-A ", 0) == 0 && !tables.empty()) {
      std::string chain = line.substr(3, line.find(' ', 3) - 3);
      tables.back().get(chain).rules.push_back(line);
    } else if (line.rfind("-X ", 0) == 0 && !tables.empty()) {
      tables.back().get(line.substr(3)).deleted = true;
    }
  }
  return tables;
}

// The comment value up to its first space or ':' ("ns1/svc1").
std::string service_name_of(const std::string& rule) {
  auto p = rule.find("--comment ");
  if (p == std::string::npos) return "";
  std::string c = rule.substr(p + 10);
  if (!c.empty() && c[0] == '"') c = c.substr(1);
  auto e = c.find_first_of(" :\"");
  return c.substr(0, e);
}

int chain_rank(const std::string& n) {
  if (n == "KUBE-NODEPORTS") return 0;
  if (n == "KUBE-SERVICES") return 1;
  if (n.rfind("KUBE-", 0) == 0) return 2;
  return 3;
}

void sort_rules(std::vector<std::string>& rules, bool keep_last_rule_last) {
  auto is_last = [&](const std::string& r) {
    return keep_last_rule_last && r.find("must be the last rule") != std::string::npos;
  };
  std::stable_sort(rules.begin(), rules.end(), [&](const std::string& a, const std::string& b) {
    if (is_last(a) || is_last(b)) return !is_last(a) && is_last(b);
    std::string na = service_name_of(a), nb = service_name_of(b);
    if (na.empty() || nb.empty()) return false;
    return na < nb;
  });
}

}  // namespace

std::string sort_iptables_rules(const std::string& text) {
  auto tables = parse(text);
  std::sort(tables.begin(), tables.end(), [](const Table& a, const Table& b) { return a.name < b.name; });
  std::string out;
  for (auto& t : tables) {
    std::stable_sort(t.chains.begin(), t.chains.end(), [](const Chain& a, const Chain& b) {
      int ra = chain_rank(a.name), rb = chain_rank(b.name);
      if (ra != rb) return ra < rb;
      return ra >= 2 && a.name < b.name;
    });
    for (auto& c : t.chains) {
      if ((t.name == "filter" && (c.name == "KUBE-NODEPORTS" || c.name == "KUBE-SERVICES")) ||
          (t.name == "nat" && c.name == "KUBE-NODEPORTS"))
        sort_rules(c.rules, false);
      if (t.name == "nat" && c.name == "KUBE-SERVICES") sort_rules(c.rules, true);
    }
    out += "*" + t.name + "\n";
    for (const auto& c : t.chains) out += ":" + c.name + " - [0:0]\n";
    for (const auto& c : t.chains)
      for (const auto& r : c.rules) out += r + "\n";
    for (const auto& c : t.chains)
      if (c.deleted) out += "-X " + c.name + "\n";
    out += "COMMIT\n";
  }
  return out;
}

std::vector<std::string> check_restore_consistency(const std::string& text) {
  static const std::set<std::string> builtin_targets = {"ACCEPT", "DROP", "RETURN", "REJECT", "DNAT",
                                                        "SNAT", "MASQUERADE", "MARK"};
  std::vector<std::string> problems;
  std::istringstream in(text);
  std::string line, table;
  std::set<std::string> declared;
  std::vector<std::pair<std::string, std::string>> jumps;  // (line, target)
  auto flush = [&] {
    for (const auto& [l, target] : jumps)
      if (!declared.count(target)) problems.push_back(table + ": jump to undeclared chain " + target + ": " + l);
    jumps.clear();
    declared.clear();
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '*') table = line.substr(1);
    else if (line == "COMMIT") flush();
    else if (line[0] == ':') {
      std::string name = line.substr(1, line.find(' ') - 1);
      if (!declared.insert(name).second) problems.push_back(table + ": chain declared twice: " + name);
    } else if (line.rfind("-X ", 0) == 0) {
      if (!declared.count(line.substr(3))) problems.push_back(table + ": -X of undeclared chain: " + line);
    } else {
      for (const char* flag : {" -j ", " -g "}) {
        auto p = line.find(flag);
        if (p == std::string::npos) continue;
        std::string target = line.substr(p + 4, line.find(' ', p + 4) - (p + 4));
        if (!builtin_targets.count(target)) jumps.emplace_back(line, target);
      }
    }
  }
  return problems;
}

std::vector<std::string> chain_rules(const std::string& text, const std::string& table, const std::string& chain) {
  for (auto& t : parse(text))
    if (t.name == table)
      for (auto& c : t.chains)
        if (c.name == chain) return c.rules;
  return {};
}

}  // namespace kpc::test
