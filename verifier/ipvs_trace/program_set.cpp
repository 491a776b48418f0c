#include "verifier/ipvs_trace/program_set.h"

#include <algorithm>
#include <set>

#include "compiler/support/text.h"
#include "verifier/parse/parser.h"

namespace kpc::verifier::ipvs_trace {
namespace {

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> w;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t b = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > b) w.push_back(line.substr(b, i - b));
  }
  return w;
}

// "LINE: message" as the readers report -> a LoadError of `file`.
LoadError located(const std::string& file, const std::string& error) {
  LoadError e;
  e.file = file;
  size_t colon = error.find(':');
  uint32_t line = 0;
  bool num = colon != std::string::npos && colon > 0;
  for (size_t k = 0; num && k < colon; ++k) num = error[k] >= '0' && error[k] <= '9';
  if (num) {
    for (size_t k = 0; k < colon; ++k) line = line * 10 + uint32_t(error[k] - '0');
    e.line = line;
    e.message = error.substr(colon + 1);
    if (!e.message.empty() && e.message[0] == ' ') e.message.erase(0, 1);
  } else {
    e.message = error;
  }
  return e;
}

// `ipset restore` input -> `ipset save` form: `flush SET` right after its creation (what kpc and
// kube-proxy write for a full state) empties an empty set and is dropped; a flush after entries
// were added is refused (the reader models one moment's contents, not a sequence).
bool ipset_restore_to_save(std::string_view text, std::string* out, std::string* error) {
  std::set<std::string> filled;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    std::string_view line = text.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos);
    pos = e == std::string_view::npos ? text.size() : e + 1;
    ++line_no;
    auto w = words_of(line);
    if (!w.empty() && (w[0] == "flush" || w[0] == "-F")) {
      if (w.size() != 2) {
        *error = std::to_string(line_no) + ": flush takes one set name here";
        return false;
      }
      if (filled.count(std::string(w[1]))) {
        *error = std::to_string(line_no) + ": flush of " + std::string(w[1]) +
                 " after entries were added: a sequence of changes is not modelled";
        return false;
      }
      *out += "\n";  // keep the line numbers
      continue;
    }
    if (w.size() >= 2 && (w[0] == "add" || w[0] == "-A" || w[0] == "a")) filled.insert(std::string(w[1]));
    *out += line;
    *out += "\n";
  }
  return true;
}

bool read_node_plan(std::string_view text, IPFamily family, NodePlan* plan, std::string* error) {
  size_t pos = 0, line_no = 0;
  auto fail = [&](const std::string& m) {
    *error = std::to_string(line_no) + ": " + m;
    return false;
  };
  plan->present = true;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    std::string_view line = text.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos);
    pos = e == std::string_view::npos ? text.size() : e + 1;
    ++line_no;
    auto w = words_of(line);
    if (w.empty() || w[0][0] == '#') continue;
    if (w.size() >= 4 && w[0] == "ip" && w[1] == "link" && w[2] == "add" && w[3] == "kube-ipvs0") continue;
    if (w[0] == "ip" && w.size() >= 6 && w[1] == "addr" && w[2] == "add" && w[4] == "dev") {
      if (w[5] != "kube-ipvs0") return fail("an address bound to " + std::string(w[5]) + ", not kube-ipvs0");
      auto c = CIDR::parse(w[3], false, nullptr, true);
      if (!c) return fail("not an address: " + std::string(w[3]));
      if (c->addr.family != family) return fail("address " + std::string(w[3]) + " is not of the program's family");
      plan->bound.push_back(c->addr);
      continue;
    }
    if (w[0] == "ipvsadm" && w.size() == 5 && w[1] == "--set") continue;  // timeouts: not traced
    if (w.size() == 3 && w[1] == "=") {
      plan->sysctls[std::string(w[0])] = std::string(w[2]);
      continue;
    }
    return fail("not a line of a node plan (ip link/addr, sysctl NAME = VALUE, ipvsadm --set): " +
                std::string(line.substr(0, 80)));
  }
  return true;
}

}  // namespace

std::string LoadError::text() const {
  return file + (line ? ":" + std::to_string(line) : std::string()) + ": " + message;
}

const std::vector<IpvsJump>& ipvs_mode_jumps() {
  static const std::vector<IpvsJump> jumps = {
      {ir::TableId::Nat, "OUTPUT", "kubernetes service portals", "KUBE-SERVICES"},
      {ir::TableId::Nat, "PREROUTING", "kubernetes service portals", "KUBE-SERVICES"},
      {ir::TableId::Nat, "POSTROUTING", "kubernetes postrouting rules", "KUBE-POSTROUTING"},
      {ir::TableId::Filter, "FORWARD", "kubernetes forwarding rules", "KUBE-FORWARD"},
      {ir::TableId::Filter, "INPUT", "kubernetes health check rules", "KUBE-NODE-PORT"},
      {ir::TableId::Filter, "INPUT", "kube-proxy firewall rules", "KUBE-PROXY-FIREWALL"},
      {ir::TableId::Filter, "FORWARD", "kube-proxy firewall rules", "KUBE-PROXY-FIREWALL"},
      {ir::TableId::Filter, "INPUT", "kubernetes ipvs access filter", "KUBE-IPVS-FILTER"},
      {ir::TableId::Filter, "OUTPUT", "kubernetes ipvs access filter", "KUBE-IPVS-OUT-FILTER"},
  };
  return jumps;
}

int ProgramSet::sysctl(const std::string& name) const {
  auto it = plan.sysctls.find(name);
  if (it != plan.sysctls.end()) {
    int v = 0;
    for (char c : it->second) {
      if (c < '0' || c > '9') return 0;
      v = v * 10 + (c - '0');
    }
    return v;
  }
  return name == "net.ipv4.vs.conn_reuse_mode" ? 1 : 0;
}

bool load_program_set(const ProgramTexts& texts, std::optional<IPFamily> family, ProgramSet* out, LoadError* err) {
  *out = ProgramSet{};
  std::string error;
  if (!ipvs::parse_save(texts.ipvs, &out->ipvs, &error)) {
    *err = located(texts.ipvs_name, error);
    return false;
  }
  if (!family) {
    if (!out->ipvs.services.empty()) family = out->ipvs.services.begin()->first.vip.address.family;
  }
  if (!family && texts.node_plan) {
    // The first bound address names it (an empty program: IPv4).
    NodePlan probe;
    std::string ignored;
    for (IPFamily f : {IPFamily::V4, IPFamily::V6})
      if (read_node_plan(*texts.node_plan, f, &probe, &ignored) && !probe.bound.empty() && !family) family = f;
  }
  out->family = family.value_or(IPFamily::V4);
  for (const auto& [key, vs] : out->ipvs.services) {
    if (key.vip.address.family != out->family) {
      *err = {texts.ipvs_name, 0, "virtual server " + key.vip.address.str() + " is not of the program's family"};
      return false;
    }
    for (const auto& rs : vs.real_servers)
      if (rs.dest.address.family != out->family) {
        *err = {texts.ipvs_name, 0, "real server " + rs.dest.address.str() + " is not of the program's family"};
        return false;
      }
  }
  std::string save;
  if (!ipset_restore_to_save(texts.ipset, &save, &error) || !ipset::parse_save(save, &out->sets, &error)) {
    *err = located(texts.ipset_name, error);
    return false;
  }
  out->iptables = RulesetState::empty(out->family);
  ApplyOptions ao;
  ao.noflush = true;
  ao.discard_on_failure = true;
  ParseError pe;
  auto r = apply_text(out->iptables, texts.iptables, ao, &pe);
  if (!r.ok()) {
    *err = {texts.iptables_name, r.error->line, r.error->reason};
    return false;
  }
  // The jumps kube-proxy ensures outside its restore input, each prepended when missing.
  std::string blocks[2];
  for (const auto& j : ipvs_mode_jumps()) {
    int k = j.table == ir::TableId::Nat;
    // createAndLinkKubeChain: EnsureChain, then EnsureRule(Prepend).
    if (!out->iptables.find(j.table, j.to) && blocks[k].find(std::string("-N ") + j.to + "\n") == std::string::npos)
      blocks[k] += std::string("-N ") + j.to + "\n";
    std::string args = std::string("-m comment --comment \"") + j.comment + "\" -j " + j.to;
    blocks[k] += "-I " + std::string(j.from) + " 1 " + args + "\n";
  }
  std::string prog = "*filter\n" + blocks[0] + "COMMIT\n*nat\n" + blocks[1] + "COMMIT\n";
  auto jr = apply_text(out->iptables, prog, ao, &pe);
  if (!jr.ok()) {
    *err = {texts.iptables_name, 0, "kube-proxy's jump rules do not load: " + jr.error->reason};
    return false;
  }
  if (texts.node_plan && !read_node_plan(*texts.node_plan, out->family, &out->plan, &error)) {
    *err = located(texts.node_plan_name, error);
    return false;
  }
  return true;
}

}  // namespace kpc::verifier::ipvs_trace
