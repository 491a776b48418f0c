#include "verifier/trace/effects.h"

#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {

using ir::ArgKind;

RecentUse read_recent(const std::vector<ir::Arg>& args, size_t module_index, IPFamily family) {
  RecentUse r;
  for (size_t k = module_index + 1; k < args.size() && args[k].kind != ArgKind::Module; ++k) {
    const ir::Arg& a = args[k];
    switch (a.kind) {
      case ArgKind::RecentCmd:
        r.has_cmd = true;
        r.neg = a.neg;
        r.cmd = a.text == "set"      ? RecentUse::Cmd::Set
                : a.text == "update" ? RecentUse::Cmd::Update
                : a.text == "remove" ? RecentUse::Cmd::Remove
                                     : RecentUse::Cmd::Rcheck;
        break;
      case ArgKind::RecentName: r.list = a.text; break;
      case ArgKind::RecentSeconds: r.seconds = a.value; break;
      case ArgKind::RecentHitcount: r.hitcount = a.value; break;
      case ArgKind::RecentReap: r.reap = true; break;
      case ArgKind::RecentRttl: r.rttl = true; break;
      case ArgKind::RecentSide: r.rdest = a.text == "rdest"; break;
      case ArgKind::RecentMask: {
        // The kernel keys entries by address & mask: only the host mask keeps one
        // entry per client, which is what the client model assumes.
        bool host = true;
        size_t n = family == IPFamily::V4 ? 4 : 16;
        for (size_t i = 0; i < n; ++i) host &= a.cidr.addr.bytes[i] == 0xff;
        r.default_mask = host;
        if (!host) r.mask = a.cidr.addr.str();
        break;
      }
      default:
        break;
    }
  }
  return r;
}

std::string recent_unmodelled(const RecentUse& r) {
  if (!r.has_cmd) return "recent without a command";
  if (r.cmd == RecentUse::Cmd::Set) return "";
  if (r.hitcount || r.rttl) return "recent --hitcount/--rttl not modelled";
  if (r.rdest) return "recent --rdest not modelled";
  if (!r.default_mask) return "recent --mask " + r.mask + " (clients grouped by a network) not modelled";
  return "";
}

std::string affinity_effect_text(const RecentUse& r, const std::string& label) {
  const char* op = r.cmd == RecentUse::Cmd::Set      ? "set"
                   : r.cmd == RecentUse::Cmd::Update ? "update"
                   : r.cmd == RecentUse::Cmd::Remove ? "remove"
                                                     : "check";
  std::string s = std::string(op) + " " + label;
  if (r.rdest) s += " (rdest)";
  if (!r.default_mask) s += " (mask " + r.mask + ")";
  return s;
}

std::string target_options_text(const ir::Target& t, IPFamily family) {
  std::string s;
  switch (t.kind) {
    case ir::TargetKind::Reject: {
      const char* dflt = family == IPFamily::V4 ? "icmp-port-unreachable" : "icmp6-port-unreachable";
      if (!t.reject_with.empty() && t.reject_with != dflt) s = "reject-with " + t.reject_with;
      break;
    }
    case ir::TargetKind::Masquerade:
      if (!t.to_ports.empty()) s += " --to-ports " + t.to_ports;
      if (t.random) s += " --random";
      if (t.random_fully) s += " --random-fully";
      if (!s.empty()) s = "masquerade" + s;
      break;
    case ir::TargetKind::DNAT:
      if (t.random) s += " --random";
      if (t.persistent) s += " --persistent";
      if (!s.empty()) s = "dnat" + s;
      break;
    default:
      break;
  }
  return s;
}

std::string snat_outcome_text(const ir::Target& t) {
  std::string s;
  if (t.to_addr) {
    bool v6 = t.to_addr->family == IPFamily::V6;
    std::string a = t.to_addr->str();
    if (t.to_port_lo || t.to_port_hi || t.to_port_zero) {
      s = v6 ? "[" + a + "]" : a;
      s += ":" + std::to_string(t.to_port_lo);
      if (t.to_port_hi != t.to_port_lo) s += "-" + std::to_string(t.to_port_hi);
    } else {
      s = a;
    }
  } else if (t.to_port_lo || t.to_port_hi || t.to_port_zero) {
    s = ":" + std::to_string(t.to_port_lo);
    if (t.to_port_hi != t.to_port_lo) s += "-" + std::to_string(t.to_port_hi);
  }
  if (t.random) s += " --random";
  if (t.random_fully) s += " --random-fully";
  if (t.persistent) s += " --persistent";
  return s;
}

bool is_noop_target(std::string_view name) {
  return name == "LOG" || name == "NFLOG" || name == "TRACE" || name == "CHECKSUM";
}

CtTarget ct_target(const ir::Target& t) {
  if (t.kind != ir::TargetKind::Other) return CtTarget::NotCt;
  if (t.chain == "NOTRACK") return t.other_args.empty() ? CtTarget::Notrack : CtTarget::Unmodelled;
  if (t.chain != "CT") return CtTarget::NotCt;
  for (const auto& a : t.other_args)
    if (a == "--notrack") return CtTarget::Notrack;
  return CtTarget::Unmodelled;
}

void append_effect(std::string* to, const std::string& effect) {
  if (effect.empty()) return;
  if (!to->empty()) *to += "; ";
  *to += effect;
}

}  // namespace kpc::verifier::trace
