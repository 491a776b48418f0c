#include "verifier/trace/effects.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

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

namespace {

// A 32-bit value as iptables reads one (strtoul base 0: 0x.., 0.., decimal).
bool read_u32(const std::string& s, uint32_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(s.c_str(), &end, 0);
  if (errno || *end || x > 0xffffffffull || s[0] == '-' || s[0] == '+') return false;
  *v = static_cast<uint32_t>(x);
  return true;
}

// "V" or "V/M" (M defaults to dflt).
bool read_value_mask(const std::string& s, uint32_t* v, uint32_t* m, uint32_t dflt) {
  size_t slash = s.find('/');
  *m = dflt;
  if (slash == std::string::npos) return read_u32(s, v);
  return read_u32(s.substr(0, slash), v) && read_u32(s.substr(slash + 1), m);
}

}  // namespace

ConnmarkOp read_connmark_target(const ir::Target& t) {
  ConnmarkOp op;
  const auto& a = t.other_args;
  bool has_mode = false;
  auto bad = [&](std::string why) {
    op.why = std::move(why);
    return op;
  };
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& w = a[i];
    auto arg = [&](std::string* out) {
      if (i + 1 >= a.size()) return false;
      *out = a[++i];
      return true;
    };
    std::string v;
    uint32_t x = 0, m = 0;
    if (w == "--set-xmark" || w == "--set-mark") {
      if (!arg(&v) || !read_value_mask(v, &x, &m, ~0u)) return bad("CONNMARK " + w + " value not understood");
      op.kind = ConnmarkOp::Kind::Set;
      op.value = x;
      op.ctmask = w == "--set-mark" ? (m | x) : m;
    } else if (w == "--and-mark" || w == "--or-mark" || w == "--xor-mark") {
      if (!arg(&v) || !read_u32(v, &x)) return bad("CONNMARK " + w + " value not understood");
      op.kind = ConnmarkOp::Kind::Set;
      op.value = w == "--and-mark" ? 0 : x;
      op.ctmask = w == "--and-mark" ? ~x : w == "--or-mark" ? x : 0;
    } else if (w == "--save-mark" || w == "--restore-mark") {
      op.kind = w == "--save-mark" ? ConnmarkOp::Kind::Save : ConnmarkOp::Kind::Restore;
    } else if (w == "--mask" || w == "--nfmask" || w == "--ctmask") {
      if (!arg(&v) || !read_u32(v, &x)) return bad("CONNMARK " + w + " value not understood");
      if (w != "--ctmask") op.nfmask = x;
      if (w != "--nfmask") op.ctmask = x;
      continue;
    } else {
      return bad("CONNMARK option " + w + " not modelled");
    }
    if (has_mode) return bad("CONNMARK with more than one mode");
    has_mode = true;
  }
  if (!has_mode) return bad("CONNMARK without a mode");
  return op;
}

ConnmarkTest read_connmark_match(const std::vector<ir::Arg>& args, size_t module_index) {
  ConnmarkTest t;
  bool seen = false;
  for (size_t k = module_index + 1; k < args.size() && args[k].kind == ir::ArgKind::Unknown; ++k) {
    const ir::Arg& a = args[k];
    if (a.text2 != "--mark" || seen || !read_value_mask(a.text, &t.value, &t.mask, ~0u)) {
      t.why = "-m connmark " + a.text2 + " " + a.text + " not understood";
      return t;
    }
    seen = true;
    t.neg = a.neg;
  }
  if (!seen) t.why = "-m connmark without --mark";
  return t;
}

std::string connmark_effect_text(uint32_t value, uint32_t known) {
  char b[96];
  int n = std::snprintf(b, sizeof b, "connmark 0x%x/0x%x", value & known, known);
  if (value & ~known) std::snprintf(b + n, sizeof b - n, " (earlier mark ^ 0x%x)", value & ~known);
  return b;
}

void append_effect(std::string* to, const std::string& effect) {
  if (effect.empty()) return;
  if (!to->empty()) *to += "; ";
  *to += effect;
}

}  // namespace kpc::verifier::trace
