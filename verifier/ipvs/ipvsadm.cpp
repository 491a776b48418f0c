#include "verifier/ipvs/ipvsadm.h"

#include <algorithm>

namespace kpc::verifier::ipvs {

const char* proto_name(Proto p) { return p == Proto::TCP ? "TCP" : p == Proto::UDP ? "UDP" : "SCTP"; }

std::optional<uint64_t> RealServer::connections() const {
  if (!active || !inactive) return std::nullopt;
  return *active + *inactive;  // each fits the kernel's 32-bit counters: no overflow
}

RealServer* VirtualServer::find(const HostPort& d) {
  for (auto& rs : real_servers)
    if (rs.dest == d) return &rs;
  return nullptr;
}
const RealServer* VirtualServer::find(const HostPort& d) const {
  for (const auto& rs : real_servers)
    if (rs.dest == d) return &rs;
  return nullptr;
}

size_t Table::real_server_count() const {
  size_t n = 0;
  for (const auto& [k, vs] : services) n += vs.real_servers.size();
  return n;
}

namespace {

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// A decimal number no greater than max (no sign, no leading "+", at most 20 digits).
std::optional<uint64_t> number(std::string_view s, uint64_t max) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = uint64_t(c - '0');
    if (v > (max - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// What one ipvsadm line says, before it is applied.
struct Command {
  char op = 0;  // A E D a e d C
  std::optional<ServiceKey> service;
  std::optional<std::string> scheduler;
  std::optional<uint32_t> timeout;  // -p given (300 when bare, ipvsadm's default)
  std::optional<std::string> flags;
  std::optional<HostPort> server;
  std::optional<Forward> forward;
  std::optional<uint32_t> weight;
};

bool is_service_op(char op) { return op == 'A' || op == 'E' || op == 'D'; }

bool parse_command(const std::vector<std::string_view>& w, Command* c, std::string* why) {
  static const std::pair<std::string_view, char> kOps[] = {
      {"-A", 'A'}, {"--add-service", 'A'}, {"-E", 'E'}, {"--edit-service", 'E'}, {"-D", 'D'},
      {"--delete-service", 'D'}, {"-a", 'a'}, {"--add-server", 'a'}, {"-e", 'e'}, {"--edit-server", 'e'},
      {"-d", 'd'}, {"--delete-server", 'd'}, {"-C", 'C'}, {"--clear", 'C'}};
  for (const auto& [name, op] : kOps)
    if (w[0] == name) c->op = op;
  if (!c->op) {
    *why = "not an ipvsadm command: " + std::string(w[0]);
    return false;
  }
  for (size_t i = 1; i < w.size(); ++i) {
    std::string_view o = w[i];
    auto arg = [&](std::string_view* v) {
      if (i + 1 >= w.size()) {
        *why = "option " + std::string(o) + " needs an argument";
        return false;
      }
      *v = w[++i];
      return true;
    };
    auto once = [&](bool given) {
      if (given) *why = "option " + std::string(o) + " given twice";
      return !given;
    };
    std::string_view v;
    if (o == "-t" || o == "--tcp-service" || o == "-u" || o == "--udp-service" || o == "--sctp-service") {
      if (!once(c->service.has_value()) || !arg(&v)) return false;
      auto hp = parse_host_port(v);
      if (!hp) {
        *why = "not an address:port: " + std::string(v);
        return false;
      }
      Proto p = o == "-t" || o == "--tcp-service" ? Proto::TCP : o == "-u" || o == "--udp-service" ? Proto::UDP
                                                                                                    : Proto::SCTP;
      c->service = ServiceKey{p, *hp};
    } else if (o == "-f" || o == "--fwmark-service") {
      *why = "fwmark services are not modelled (kube-proxy makes none)";
      return false;
    } else if (o == "-s" || o == "--scheduler") {
      if (!once(c->scheduler.has_value()) || !arg(&v)) return false;
      bool ok = !v.empty() && v.size() < 16;  // IP_VS_SCHEDNAME_MAXLEN
      for (char ch : v) ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-');
      if (!ok) {
        *why = "not a scheduler name: " + std::string(v);
        return false;
      }
      c->scheduler = std::string(v);
    } else if (o == "-p" || o == "--persistent") {
      if (!once(c->timeout.has_value())) return false;
      c->timeout = 300;
      if (i + 1 < w.size() && !w[i + 1].starts_with("-")) {
        auto t = number(w[++i], UINT32_MAX);
        if (!t || *t == 0) {
          *why = "not a persistence timeout: " + std::string(w[i]);
          return false;
        }
        c->timeout = uint32_t(*t);
      }
    } else if (o == "-b" || o == "--sched-flags") {
      if (!once(c->flags.has_value()) || !arg(&v)) return false;
      bool ok = !v.empty();
      for (char ch : v) ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == ',');
      if (!ok) {
        *why = "not scheduler flags: " + std::string(v);
        return false;
      }
      c->flags = std::string(v);
    } else if (o == "-r" || o == "--real-server") {
      if (!once(c->server.has_value()) || !arg(&v)) return false;
      auto hp = parse_host_port(v);
      if (!hp) {
        *why = "not an address:port: " + std::string(v);
        return false;
      }
      c->server = *hp;
    } else if (o == "-g" || o == "--gatewaying" || o == "-i" || o == "--ipip" || o == "-m" || o == "--masquerading") {
      if (!once(c->forward.has_value())) return false;
      c->forward = o == "-g" || o == "--gatewaying" ? Forward::Gate : o == "-i" || o == "--ipip" ? Forward::Ipip
                                                                                                 : Forward::Masq;
    } else if (o == "-w" || o == "--weight") {
      if (!once(c->weight.has_value()) || !arg(&v)) return false;
      auto n = number(v, 65535);
      if (!n) {
        *why = "not a weight (0-65535): " + std::string(v);
        return false;
      }
      c->weight = uint32_t(*n);
    } else if (o == "-x" || o == "--u-threshold" || o == "-y" || o == "--l-threshold") {
      if (!arg(&v) || !number(v, UINT32_MAX)) {  // thresholds: read, not modelled (kube-proxy sets none)
        if (why->empty()) *why = "not a threshold: " + std::string(v);
        return false;
      }
    } else {
      *why = "option not modelled: " + std::string(o);
      return false;
    }
  }
  bool service_opts = c->scheduler || c->timeout || c->flags;
  bool server_opts = c->forward || c->weight;
  if (c->op == 'C') {
    if (c->service || service_opts || server_opts || c->server) {
      *why = "-C takes no options";
      return false;
    }
    return true;
  }
  if (!c->service) {
    *why = "no virtual service (-t, -u or --sctp-service)";
    return false;
  }
  if (is_service_op(c->op)) {
    if (c->server || server_opts || (c->op == 'D' && service_opts)) {
      *why = std::string("option not allowed with -") + c->op;
      return false;
    }
    return true;
  }
  if (!c->server) {
    *why = "no real server (-r)";
    return false;
  }
  if (service_opts || (c->op == 'd' && server_opts)) {
    *why = std::string("option not allowed with -") + c->op;
    return false;
  }
  if (c->server->address.family != c->service->vip.address.family) {
    *why = "real server and virtual service of different families";
    return false;
  }
  return true;
}

bool apply_command(const Command& c, Table* t, std::string* why) {
  if (c.op == 'C') {
    t->services.clear();
    return true;
  }
  auto it = t->services.find(*c.service);
  auto set_service = [&](VirtualServer& vs) {  // -A and -E: what is not given is ipvsadm's default
    vs.scheduler = c.scheduler.value_or("wlc");
    vs.persistent = c.timeout.has_value();
    vs.timeout = c.timeout.value_or(0);
    vs.flags = c.flags.value_or("");
  };
  switch (c.op) {
    case 'A': {
      if (it != t->services.end()) {
        *why = "virtual service already exists";
        return false;
      }
      VirtualServer vs;
      vs.key = *c.service;
      set_service(vs);
      t->services.emplace(vs.key, std::move(vs));
      return true;
    }
    case 'E':
    case 'D':
    case 'a':
    case 'e':
    case 'd':
      break;
    default:
      return false;
  }
  if (it == t->services.end()) {
    *why = "no such virtual service";
    return false;
  }
  VirtualServer& vs = it->second;
  if (c.op == 'E') {
    set_service(vs);
    return true;
  }
  if (c.op == 'D') {
    t->services.erase(it);
    return true;
  }
  RealServer* rs = vs.find(*c.server);
  if (c.op == 'a') {
    if (rs) {
      *why = "destination already exists";
      return false;
    }
    RealServer n;
    n.dest = *c.server;
    n.forward = c.forward.value_or(Forward::Gate);
    n.weight = c.weight.value_or(1);
    vs.real_servers.push_back(n);
    return true;
  }
  if (!rs) {
    *why = "no such destination";
    return false;
  }
  if (c.op == 'e') {
    rs->forward = c.forward.value_or(Forward::Gate);
    rs->weight = c.weight.value_or(1);
    return true;
  }
  vs.real_servers.erase(vs.real_servers.begin() + (rs - vs.real_servers.data()));
  return true;
}

template <typename F>
bool each_line(std::string_view text, std::string* error, F&& f) {
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    std::string why;
    if (line.find('\0') != std::string_view::npos) why = "NUL byte in the line";
    else if (f(line, &why)) continue;
    if (why.empty()) why = "unreadable line";
    *error = std::to_string(line_no) + ": " + why;
    return false;
  }
  return true;
}

bool apply(std::string_view text, Table* t, std::string* error, bool save_only) {
  return each_line(text, error, [&](std::string_view line, std::string* why) {
    auto w = words(line);
    if (w.empty()) return true;
    Command c;
    if (!parse_command(w, &c, why)) return false;
    if (save_only && c.op != 'A' && c.op != 'a') {
      *why = "ipvsadm -S writes only -A and -a lines";
      return false;
    }
    return apply_command(c, t, why);
  });
}

}  // namespace

std::optional<HostPort> parse_host_port(std::string_view s) {
  std::string_view addr, port;
  if (s.starts_with("[")) {
    size_t close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') return std::nullopt;
    addr = s.substr(1, close - 1);
    port = s.substr(close + 2);
    auto a = IPAddr::parse(addr);
    if (!a || a->family != IPFamily::V6) return std::nullopt;
    auto p = number(port, 65535);
    if (!p) return std::nullopt;
    return HostPort{*a, uint16_t(*p)};
  }
  size_t colon = s.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto a = IPAddr::parse(s.substr(0, colon));
  auto p = number(s.substr(colon + 1), 65535);
  if (!a || a->family != IPFamily::V4 || !p) return std::nullopt;
  return HostPort{*a, uint16_t(*p)};
}

bool parse_save(std::string_view text, Table* out, std::string* error) {
  out->services.clear();
  return apply(text, out, error, true);
}

bool apply_script(std::string_view text, Table* t, std::string* error) { return apply(text, t, error, false); }

bool read_counts(std::string_view text, Table* t, std::string* error) {
  VirtualServer* current = nullptr;
  return each_line(text, error, [&](std::string_view line, std::string* why) {
    auto w = words(line);
    if (w.empty()) return true;
    // The header: "IP Virtual Server version ...", "Prot LocalAddress:Port Scheduler Flags",
    // "  -> RemoteAddress:Port Forward Weight ActiveConn InActConn".
    if (line.starts_with("IP Virtual Server version") || (w[0] == "Prot" && w.size() > 1 && w[1] == "LocalAddress:Port") ||
        (w[0] == "->" && w.size() > 1 && w[1] == "RemoteAddress:Port"))
      return true;
    if (w[0] == "->") {
      if (!current) {
        *why = "a real server before any virtual service";
        return false;
      }
      if (w.size() < 6) {
        *why = "expected: -> ADDRESS:PORT FORWARD WEIGHT ACTIVECONN INACTCONN";
        return false;
      }
      auto hp = parse_host_port(w[1]);
      auto active = number(w[4], UINT32_MAX), inactive = number(w[5], UINT32_MAX);
      if (!hp || !number(w[3], 65535) || !active || !inactive) {
        *why = "expected: -> ADDRESS:PORT FORWARD WEIGHT ACTIVECONN INACTCONN (numbers)";
        return false;
      }
      RealServer* rs = current->find(*hp);
      if (!rs) {
        *why = "real server " + std::string(w[1]) + " is not in the saved table (ipvs.save)";
        return false;
      }
      rs->active = *active;
      rs->inactive = *inactive;
      return true;
    }
    if (w[0] == "FWM") {
      *why = "fwmark services are not modelled (kube-proxy makes none)";
      return false;
    }
    std::optional<Proto> p = w[0] == "TCP" ? std::optional(Proto::TCP) : w[0] == "UDP" ? std::optional(Proto::UDP)
                                         : w[0] == "SCTP" ? std::optional(Proto::SCTP) : std::nullopt;
    if (!p || w.size() < 2) {
      *why = "expected a virtual service line (TCP|UDP|SCTP ADDRESS:PORT SCHEDULER ...) or a real server line";
      return false;
    }
    auto hp = parse_host_port(w[1]);
    if (!hp) {
      *why = "not an address:port: " + std::string(w[1]);
      return false;
    }
    auto it = t->services.find(ServiceKey{*p, *hp});
    if (it == t->services.end()) {
      *why = "virtual service " + std::string(w[0]) + " " + std::string(w[1]) + " is not in the saved table (ipvs.save)";
      return false;
    }
    current = &it->second;
    return true;
  });
}

}  // namespace kpc::verifier::ipvs
