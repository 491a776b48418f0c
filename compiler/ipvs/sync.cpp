#include "compiler/ipvs/sync.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "compiler/ipvs/print.h"

namespace kpc::ipvs {

namespace {

using VsKey = std::tuple<Protocol, IPAddr, uint16_t>;
using RsKey = std::pair<IPAddr, uint16_t>;

std::string service_text(Protocol p, const IPAddr& a, uint16_t port) {
  return std::string(protocol_option(p)) + " " + host_port(a, port);
}

// graceful_termination.go IsRSGracefulTerminationNeeded: only TCP drains; UDP and SCTP
// connections expire at their next packet (expire_nodest_conn = 1) once the server is gone.
bool drains(Protocol p) { return p == Protocol::TCP; }

// A removed server may go now when it carries no connection. Counts not read are taken as
// live: deleting would cut connections kpc cannot see, weight 0 never does.
bool idle(const PriorRealServer& rs) { return rs.connections && *rs.connections == 0; }

bool same_service(const VirtualServer& want, const PriorVirtualServer& have) {
  return want.scheduler == have.scheduler && want.persistent == have.persistent &&
         (!want.persistent || want.timeout == have.timeout) &&
         std::string(want.source_port_hash ? "mh-port" : "") == have.flags;
}

void service_line(std::string& out, char op, const VirtualServer& vs) {
  out += std::string("-") + op + " " + service_text(vs.protocol, vs.address, vs.port) + " -s " + vs.scheduler;
  if (vs.persistent) out += " -p " + std::to_string(vs.timeout);
  if (vs.source_port_hash) out += " -b mh-port";
  out += '\n';
}

void server_line(std::string& out, char op, const std::string& svc, const IPAddr& a, uint16_t port,
                 std::optional<uint32_t> weight) {
  out += std::string("-") + op + " " + svc + " -r " + host_port(a, port);
  if (weight) out += " -m -w " + std::to_string(*weight);
  out += '\n';
}

// The real servers of one virtual server that exists on the node (syncEndpoint).
void sync_servers(std::string& out, const VirtualServer& want, const PriorVirtualServer& have, SyncStats& st,
                  std::vector<RemovedRealServer>& removed) {
  auto record = [&](const PriorRealServer& rs, RsFate fate) {
    removed.push_back({want.protocol, want.address, want.port, rs, fate});
  };
  std::string svc = service_text(want.protocol, want.address, want.port);
  std::map<RsKey, const PriorRealServer*> cur;
  for (const auto& rs : have.real_servers) cur[{rs.address, rs.port}] = &rs;
  std::set<RsKey> wanted;
  for (const auto& rs : want.real_servers) {
    wanted.insert({rs.address, rs.port});
    auto it = cur.find({rs.address, rs.port});
    if (it == cur.end()) {
      server_line(out, 'a', svc, rs.address, rs.port, rs.weight);
      ++st.rs_added;
    } else if (it->second->weight == 0 && rs.weight != 0) {
      // Back while draining: kube-proxy's graceful termination manager deletes the draining
      // server (MoveRSOutofGracefulDeleteList) and the sync adds it afresh.
      server_line(out, 'd', svc, rs.address, rs.port, std::nullopt);
      server_line(out, 'a', svc, rs.address, rs.port, rs.weight);
      ++st.rs_readded;
      record(*it->second, RsFate::Readded);
    } else if (it->second->weight != rs.weight || !it->second->masquerade) {
      server_line(out, 'e', svc, rs.address, rs.port, rs.weight);
      ++st.rs_edited;
    }
  }
  for (const auto& rs : have.real_servers) {
    if (wanted.count({rs.address, rs.port})) continue;
    if (!drains(want.protocol) || idle(rs)) {
      server_line(out, 'd', svc, rs.address, rs.port, std::nullopt);
      ++st.rs_deleted;
      record(rs, drains(want.protocol) ? RsFate::DeletedIdle : RsFate::DeletedAtOnce);
    } else {
      bool newly = rs.weight != 0 || !rs.masquerade;
      if (newly) {  // GracefulDeleteRS: weight 0, kept until idle
        server_line(out, 'e', svc, rs.address, rs.port, 0);
        ++st.rs_edited;
      }
      ++st.rs_draining;
      record(rs, rs.weight != 0 ? RsFate::Draining : RsFate::StillDraining);
    }
  }
}

// "10.0.0.1,tcp:80,10.1.0.9/32" and ipset save's "10.0.0.1,tcp:80,10.1.0.9" are one element:
// ipset prints a host network without its prefix length.
std::string element_key(std::string_view e) {
  std::string out;
  size_t pos = 0;
  while (pos <= e.size()) {
    size_t comma = e.find(',', pos);
    std::string_view part = e.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (part.ends_with("/32") && part.find(':') == std::string_view::npos) part.remove_suffix(3);
    else if (part.ends_with("/128")) part.remove_suffix(4);
    if (!out.empty() || pos) out += ',';
    out += part;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

bool sync_sets(std::string& out, const Program& full, const std::vector<PriorSet>& prior, SyncStats& st,
               std::string* error) {
  std::map<std::string, const PriorSet*> have;
  for (const auto& s : prior) have[s.name] = &s;
  for (const auto& s : full.sets) {
    auto it = have.find(s.name);
    std::string lines;
    if (it == have.end()) {
      lines += ipset_create_line(s, full.family);
      ++st.sets_created;
      for (const auto& e : s.entries) lines += "add " + s.name + " " + e + "\n";
      st.entries_added += s.entries.size();
    } else {
      if (it->second->type != set_type_name(s.type)) {
        *error = "set " + s.name + " is a " + it->second->type + " on the node, kube-proxy's is a " +
                 set_type_name(s.type) + " (kube-proxy cannot re-create it either while rules name it)";
        return false;
      }
      std::set<std::string> want_keys;
      for (const auto& e : s.entries) want_keys.insert(element_key(e));
      std::set<std::string> have_keys;
      for (const auto& e : it->second->entries) {
        have_keys.insert(element_key(e));
        if (!want_keys.count(element_key(e))) {
          lines += "del " + s.name + " " + e + "\n";
          ++st.entries_deleted;
        }
      }
      for (const auto& e : s.entries)
        if (!have_keys.count(element_key(e))) {
          lines += "add " + s.name + " " + e + "\n";
          ++st.entries_added;
        }
    }
    if (!lines.empty()) out += "# " + s.comment + "\n" + lines;
  }
  return true;
}

}  // namespace

const char* rs_fate_name(RsFate f) {
  switch (f) {
    case RsFate::Draining: return "draining";
    case RsFate::StillDraining: return "still_draining";
    case RsFate::DeletedIdle: return "deleted_idle";
    case RsFate::DeletedAtOnce: return "deleted_at_once";
    case RsFate::Readded: return "readded";
    case RsFate::DeletedWithVirtualServer: return "deleted_with_virtual_server";
  }
  return "?";
}

SyncResult sync_from_prior(const Program& full, const PriorState& prior) {
  SyncResult r;
  auto& st = r.stats;
  std::map<VsKey, const PriorVirtualServer*> cur;
  for (const auto& vs : prior.virtual_servers)
    if (vs.address.family == full.family) cur[{vs.protocol, vs.address, vs.port}] = &vs;
  std::set<VsKey> wanted;
  for (const auto& vs : full.virtual_servers) {
    VsKey k{vs.protocol, vs.address, vs.port};
    wanted.insert(k);
    auto it = cur.find(k);
    if (it == cur.end()) {  // a new virtual server: added with all its real servers
      service_line(r.ipvs_rules, 'A', vs);
      ++st.vs_added;
      std::string svc = service_text(vs.protocol, vs.address, vs.port);
      for (const auto& rs : vs.real_servers) server_line(r.ipvs_rules, 'a', svc, rs.address, rs.port, rs.weight);
      st.rs_added += vs.real_servers.size();
      continue;
    }
    if (!same_service(vs, *it->second)) {  // syncService: UpdateVirtualServer when not Equal
      service_line(r.ipvs_rules, 'E', vs);
      ++st.vs_edited;
    }
    sync_servers(r.ipvs_rules, vs, *it->second, st, r.removed);
  }
  // cleanLegacyService: the family's virtual servers no service port wants go, with every
  // real server (draining ones too), unless ipvs.excludeCIDRs holds their address.
  auto excluded = [&](const IPAddr& a) {
    return std::any_of(full.exclude_cidrs.begin(), full.exclude_cidrs.end(),
                       [&](const CIDR& c) { return c.family() == a.family && c.contains(a); });
  };
  for (const auto& vs : prior.virtual_servers) {
    if (vs.address.family != full.family || wanted.count({vs.protocol, vs.address, vs.port}) || excluded(vs.address))
      continue;
    r.ipvs_rules += "-D " + service_text(vs.protocol, vs.address, vs.port) + "\n";
    ++st.vs_deleted;
    for (const auto& rs : vs.real_servers)
      r.removed.push_back({vs.protocol, vs.address, vs.port, rs, RsFate::DeletedWithVirtualServer});
  }
  if (!prior.sets) {
    r.ipset_rules = print_ipsets(full);
    st.sets_created = full.sets.size();
    for (const auto& s : full.sets) st.entries_added += s.entries.size();
  } else if (!sync_sets(r.ipset_rules, full, *prior.sets, st, &r.error)) {
    r.ipvs_rules.clear();
    r.ipset_rules.clear();
    r.removed.clear();
  }
  return r;
}

}  // namespace kpc::ipvs
