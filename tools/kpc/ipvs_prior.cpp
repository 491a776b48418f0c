// The conversion of what the verifier's readers read (verifier/ipvs, verifier/ipset) into the
// compiler's input for the IPVS sync (compiler/ipvs/sync.h): the tool layer's job, so that the
// compiler never depends on the verifier (ipvs_state.h).
#include <map>

#include "compiler/support/text.h"
#include "tools/kpc/ipvs_state.h"
#include "verifier/ipset/ipset.h"
#include "verifier/ipvs/ipvsadm.h"

namespace kpc::cli {

namespace {

Protocol protocol_of(verifier::ipvs::Proto p) {
  using verifier::ipvs::Proto;
  return p == Proto::TCP ? Protocol::TCP : p == Proto::UDP ? Protocol::UDP : Protocol::SCTP;
}

// "ipvs.save:3: message" from the readers' "3: message".
std::string located(const std::string& file, const std::string& error) {
  size_t colon = error.find(": ");
  if (colon == std::string::npos) return file + ": error[E0900]: " + error;
  return file + ":" + error.substr(0, colon) + ": error[E0900]: " + error.substr(colon + 2);
}

}  // namespace

bool ipvs_prior_from_text(std::string_view save, std::string_view stats, bool have_stats, ipvs::PriorState* out,
                          std::string* error) {
  verifier::ipvs::Table table;
  std::string e;
  if (!verifier::ipvs::parse_save(save, &table, &e)) {
    *error = located("ipvs.save", e);
    return false;
  }
  if (have_stats && !verifier::ipvs::read_counts(stats, &table, &e)) {
    *error = located("ipvs.stats", e);
    return false;
  }
  out->virtual_servers.clear();
  for (const auto& [key, vs] : table.services) {
    ipvs::PriorVirtualServer p;
    p.protocol = protocol_of(key.proto);
    p.address = key.vip.address;
    p.port = key.vip.port;
    p.scheduler = vs.scheduler;
    p.persistent = vs.persistent;
    p.timeout = vs.timeout;
    p.flags = vs.flags;
    for (const auto& rs : vs.real_servers)
      p.real_servers.push_back({rs.dest.address, rs.dest.port, rs.weight,
                                rs.forward == verifier::ipvs::Forward::Masq, rs.connections(), rs.active,
                                rs.inactive});
    out->virtual_servers.push_back(std::move(p));
  }
  return true;
}

bool ipset_prior_from_text(std::string_view save, std::vector<ipvs::PriorSet>* out, std::string* error) {
  verifier::ipset::Table table;
  std::string e;
  if (!verifier::ipset::parse_save(save, &table, &e)) {  // validates every line first
    *error = located("ipset.save", e);
    return false;
  }
  out->clear();
  std::map<std::string, size_t> index;
  for (const auto& [name, set] : table.sets) {
    index[name] = out->size();
    out->push_back({name, set.type, {}});
  }
  // The entries as ipset prints them (the verifier's model keeps ranges): "add NAME ELEMENT ...".
  size_t pos = 0;
  while (pos < save.size()) {
    size_t nl = save.find('\n', pos);
    std::string_view line = save.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? save.size() : nl + 1;
    std::vector<std::string_view> w;
    for (auto part : split(line, ' '))
      if (!trim(part).empty()) w.push_back(trim(part));
    if (w.size() >= 3 && (w[0] == "add" || w[0] == "-A")) {
      auto it = index.find(std::string(w[1]));
      if (it != index.end()) (*out)[it->second].entries.emplace_back(w[2]);
    }
  }
  return true;
}

}  // namespace kpc::cli
