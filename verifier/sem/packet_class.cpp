#include "verifier/sem/packet_class.h"

#include <algorithm>
#include <cstdio>

#include "compiler/ir/rule.h"

namespace kpc::verifier::sem {

namespace {
constexpr uint32_t kBaseBits[kCtBases] = {ir::kCtInvalid, ir::kCtNew, ir::kCtEstablished, ir::kCtRelated,
                                          ir::kCtUntracked};
const char* const kBaseNames[kCtBases] = {"INVALID", "NEW", "ESTABLISHED", "RELATED", "UNTRACKED"};
}  // namespace

uint32_t ct_combo_bits(unsigned combo) {
  uint32_t b = kBaseBits[combo / 4];
  if (combo & 1) b |= ir::kCtSnat;
  if (combo & 2) b |= ir::kCtDnat;
  return b;
}

SmallSet ct_all_initial() {
  SmallSet s = SmallSet::all(kCtCombos);
  s.bits &= ~(uint64_t(0xe) << 4);  // NEW (base 1) has no NAT bits yet: combos 5, 6, 7 do not exist
  return s;
}

SmallSet ct_new_only() { return SmallSet{uint64_t(0xf) << 4}; }

unsigned ProtoSet::first() const {
  for (unsigned i = 0; i < 4; ++i)
    if (w[i]) return i * 64 + static_cast<unsigned>(__builtin_ctzll(w[i]));
  return 0;
}

// ------------------------------------------------------------------ ClientSet

bool ClientSet::has(uint32_t id) const {
  return std::binary_search(ids.begin(), ids.end(), id) != complement;
}
bool ClientSet::empty(uint32_t universe) const { return complement ? ids.size() >= universe : ids.empty(); }
ClientSet ClientSet::with_only(uint32_t id) const { return has(id) ? only(id) : ClientSet{false, {}}; }
ClientSet ClientSet::without(uint32_t id) const {
  ClientSet r = *this;
  auto it = std::lower_bound(r.ids.begin(), r.ids.end(), id);
  bool present = it != r.ids.end() && *it == id;
  if (complement && !present) r.ids.insert(it, id);
  if (!complement && present) r.ids.erase(it);
  return r;
}
ClientSet ClientSet::intersect(const ClientSet& o) const {
  ClientSet r{false, {}};
  if (!complement && !o.complement) {
    std::set_intersection(ids.begin(), ids.end(), o.ids.begin(), o.ids.end(), std::back_inserter(r.ids));
  } else if (complement && o.complement) {
    r.complement = true;
    std::set_union(ids.begin(), ids.end(), o.ids.begin(), o.ids.end(), std::back_inserter(r.ids));
  } else {
    const ClientSet& pos = complement ? o : *this;
    const ClientSet& neg = complement ? *this : o;
    std::set_difference(pos.ids.begin(), pos.ids.end(), neg.ids.begin(), neg.ids.end(), std::back_inserter(r.ids));
  }
  return r;
}
bool ClientSet::overlaps(const ClientSet& o, uint32_t universe) const {
  if (!complement && !o.complement) {  // a common id
    for (size_t a = 0, b = 0; a < ids.size() && b < o.ids.size();) {
      if (ids[a] == o.ids[b]) return true;
      ids[a] < o.ids[b] ? ++a : ++b;
    }
    return false;
  }
  if (complement && o.complement) {  // the union of the excluded ids leaves one out
    size_t n = 0;
    for (size_t a = 0, b = 0; a < ids.size() || b < o.ids.size(); ++n) {
      if (b == o.ids.size() || (a < ids.size() && ids[a] < o.ids[b])) ++a;
      else if (a == ids.size() || o.ids[b] < ids[a]) ++b;
      else ++a, ++b;
    }
    return n < universe;
  }
  const ClientSet& pos = complement ? o : *this;  // an id of pos that neg does not exclude
  const ClientSet& neg = complement ? *this : o;
  for (uint32_t id : pos.ids)
    if (!std::binary_search(neg.ids.begin(), neg.ids.end(), id)) return true;
  return false;
}

ClientSet ClientSet::subtract(const ClientSet& o) const {
  ClientSet inv = o;
  inv.complement = !o.complement;
  return intersect(inv);
}
uint32_t ClientSet::first(uint32_t universe) const {
  if (!complement) return ids.front();
  for (uint32_t i = 0; i < universe; ++i)
    if (!std::binary_search(ids.begin(), ids.end(), i)) return i;
  return 0;
}

// ------------------------------------------------------------------ classes

PacketClass PacketClass::everything(const Universe& u) {
  PacketClass c;
  c.src = AddrSet::range(0, u.addr_max);
  c.dst = AddrSet::range(0, u.addr_max);
  c.ct = ct_all_initial();
  c.in_iface = SmallSet::all(static_cast<unsigned>(u.ifaces.size()));
  c.out_iface = c.in_iface;
  c.bridge_in = SmallSet::all(static_cast<unsigned>(u.bridge_ports.size()));
  c.bridge_out = c.bridge_in;
  c.age = SmallSet::all(u.age_buckets());
  return c;
}

bool PacketClass::empty(const Universe& u) const {
  return src.empty() || dst.empty() || proto.empty() || sport.empty() || dport.empty() || ct.empty() ||
         in_iface.empty() || out_iface.empty() || bridge_in.empty() || bridge_out.empty() || client.empty(static_cast<uint32_t>(u.affinity_keys.size())) ||
         age.empty();
}

bool PacketClass::overlaps(const PacketClass& o, const Universe& u) const {
  uint32_t both = mark_known & o.mark_known;
  uint64_t pboth = pred_known & o.pred_known;
  if ((mark_value & both) != (o.mark_value & both) || (pred_value & pboth) != (o.pred_value & pboth)) return false;
  if (!(ct.bits & o.ct.bits) || !(in_iface.bits & o.in_iface.bits) || !(out_iface.bits & o.out_iface.bits) ||
      !(bridge_in.bits & o.bridge_in.bits) || !(bridge_out.bits & o.bridge_out.bits) || !(age.bits & o.age.bits) ||
      (proto & o.proto).empty())
    return false;
  return dport.overlaps(o.dport) && dst.overlaps(o.dst) && sport.overlaps(o.sport) && src.overlaps(o.src) &&
         client.overlaps(o.client, static_cast<uint32_t>(u.affinity_keys.size()));
}

PacketClass PacketClass::intersect(const PacketClass& o) const {
  PacketClass r;
  r.src = src.intersect(o.src);
  r.dst = dst.intersect(o.dst);
  r.proto = proto & o.proto;
  r.sport = sport.intersect(o.sport);
  r.dport = dport.intersect(o.dport);
  r.ct = SmallSet{ct.bits & o.ct.bits};
  // Mark: known bits must agree where both know them; otherwise the intersection is empty.
  uint32_t both = mark_known & o.mark_known;
  if ((mark_value & both) != (o.mark_value & both)) r.ct = SmallSet{};  // empty
  r.mark_known = mark_known | o.mark_known;
  r.mark_value = (mark_value & mark_known) | (o.mark_value & o.mark_known);
  r.in_iface = SmallSet{in_iface.bits & o.in_iface.bits};
  r.out_iface = SmallSet{out_iface.bits & o.out_iface.bits};
  r.bridge_in = SmallSet{bridge_in.bits & o.bridge_in.bits};
  r.bridge_out = SmallSet{bridge_out.bits & o.bridge_out.bits};
  r.client = client.intersect(o.client);
  r.age = SmallSet{age.bits & o.age.bits};
  uint64_t pboth = pred_known & o.pred_known;
  if ((pred_value & pboth) != (o.pred_value & pboth)) r.ct = SmallSet{};  // empty
  r.pred_known = pred_known | o.pred_known;
  r.pred_value = (pred_value & pred_known) | (o.pred_value & o.pred_known);
  return r;
}

std::vector<PacketClass> PacketClass::subtract(const PacketClass& o, const Universe& u) const {
  std::vector<PacketClass> out;
  if (!overlaps(o, u)) {
    out.push_back(*this);
    return out;
  }
  // Peel one field at a time: the part outside o's field, then narrow to inside. A piece
  // whose peeled field is empty is empty: it is not built (copying `rest` is what costs).
  PacketClass rest = *this;
  auto emit = [&](PacketClass&& piece) {
    if (!piece.empty(u)) out.push_back(std::move(piece));
  };
  if (auto outside = rest.src.subtract(o.src); !outside.empty()) {
    PacketClass p = rest;
    p.src = std::move(outside);
    emit(std::move(p));
  }
  rest.src = rest.src.intersect(o.src);
  if (auto outside = rest.dst.subtract(o.dst); !outside.empty()) {
    PacketClass p = rest;
    p.dst = std::move(outside);
    emit(std::move(p));
  }
  rest.dst = rest.dst.intersect(o.dst);
  if (auto outside = rest.proto.minus(o.proto); !outside.empty()) {
    PacketClass p = rest;
    p.proto = outside;
    emit(std::move(p));
  }
  rest.proto = rest.proto & o.proto;
  if (auto outside = rest.sport.subtract(o.sport); !outside.empty()) {
    PacketClass p = rest;
    p.sport = std::move(outside);
    emit(std::move(p));
  }
  rest.sport = rest.sport.intersect(o.sport);
  if (auto outside = rest.dport.subtract(o.dport); !outside.empty()) {
    PacketClass p = rest;
    p.dport = std::move(outside);
    emit(std::move(p));
  }
  rest.dport = rest.dport.intersect(o.dport);
  if (uint64_t outside = rest.ct.bits & ~o.ct.bits) {
    PacketClass p = rest;
    p.ct = SmallSet{outside};
    emit(std::move(p));
  }
  rest.ct = SmallSet{rest.ct.bits & o.ct.bits};
  // Mark: for each bit o knows and rest does not, the half with the other value is outside.
  for (unsigned b = 0; b < 32; ++b) {
    uint32_t bit = 1u << b;
    if (!(o.mark_known & bit) || (rest.mark_known & bit)) continue;
    PacketClass p = rest;
    p.mark_known |= bit;
    p.mark_value = (p.mark_value & ~bit) | (~o.mark_value & bit);
    emit(std::move(p));
    rest.mark_known |= bit;
    rest.mark_value = (rest.mark_value & ~bit) | (o.mark_value & bit);
  }
  if (uint64_t outside = rest.in_iface.bits & ~o.in_iface.bits) {
    PacketClass p = rest;
    p.in_iface = SmallSet{outside};
    emit(std::move(p));
  }
  rest.in_iface = SmallSet{rest.in_iface.bits & o.in_iface.bits};
  if (uint64_t outside = rest.out_iface.bits & ~o.out_iface.bits) {
    PacketClass p = rest;
    p.out_iface = SmallSet{outside};
    emit(std::move(p));
  }
  rest.out_iface = SmallSet{rest.out_iface.bits & o.out_iface.bits};
  if (uint64_t outside = rest.bridge_in.bits & ~o.bridge_in.bits) {
    PacketClass p = rest;
    p.bridge_in = SmallSet{outside};
    emit(std::move(p));
  }
  rest.bridge_in = SmallSet{rest.bridge_in.bits & o.bridge_in.bits};
  if (uint64_t outside = rest.bridge_out.bits & ~o.bridge_out.bits) {
    PacketClass p = rest;
    p.bridge_out = SmallSet{outside};
    emit(std::move(p));
  }
  rest.bridge_out = SmallSet{rest.bridge_out.bits & o.bridge_out.bits};
  if (auto outside = rest.client.subtract(o.client); !outside.empty(static_cast<uint32_t>(u.affinity_keys.size()))) {
    PacketClass p = rest;
    p.client = std::move(outside);
    emit(std::move(p));
  }
  rest.client = rest.client.intersect(o.client);
  if (uint64_t outside = rest.age.bits & ~o.age.bits) {
    PacketClass p = rest;
    p.age = SmallSet{outside};
    emit(std::move(p));
  }
  rest.age = SmallSet{rest.age.bits & o.age.bits};
  // Predicates: as mark bits.
  for (unsigned b = 0; b < 64; ++b) {
    uint64_t bit = uint64_t(1) << b;
    if (!(o.pred_known & bit) || (rest.pred_known & bit)) continue;
    PacketClass p = rest;
    p.pred_known |= bit;
    p.pred_value = (p.pred_value & ~bit) | (~o.pred_value & bit);
    emit(std::move(p));
    rest.pred_known |= bit;
    rest.pred_value = (rest.pred_value & ~bit) | (o.pred_value & bit);
  }
  return out;
}

std::string PacketClass::key() const {
  std::string k;
  auto put = [&](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  auto put_set = [&](const auto& s) {
    uint32_t n = static_cast<uint32_t>(s.intervals().size());
    put(&n, sizeof n);
    for (const auto& i : s.intervals()) {
      put(&i.first, sizeof i.first);
      put(&i.second, sizeof i.second);
    }
  };
  put_set(src);
  put_set(dst);
  put(proto.w, sizeof proto.w);
  put_set(sport);
  put_set(dport);
  put(&ct.bits, sizeof ct.bits);
  put(&mark_known, 4);
  uint32_t mv = mark_value & mark_known;
  put(&mv, 4);
  put(&in_iface.bits, 8);
  put(&out_iface.bits, 8);
  put(&bridge_in.bits, 8);
  put(&bridge_out.bits, 8);
  k += client.complement ? 'c' : 'p';
  for (uint32_t id : client.ids) put(&id, 4);
  put(&age.bits, 8);
  put(&pred_known, 8);
  uint64_t pv = pred_value & pred_known;
  put(&pv, 8);
  return k;
}

// ------------------------------------------------------------------ witnesses

namespace {

template <typename T>
T prefer(const RangeSet<T>& s, std::initializer_list<T> wanted) {
  for (T w : wanted)
    if (s.contains(w)) return w;
  // Not the first value of a range when it has others: port 0 and network
  // addresses (10.0.0.0, 127.0.0.0) read oddly in a witness.
  const auto& first = s.intervals()[0];
  return first.second > first.first ? T(first.first + 1) : first.first;
}

}  // namespace

Witness pick_witness(const PacketClass& c, const Universe& u) {
  Witness w;
  bool v4 = u.family == IPFamily::V4;
  // A documentation address reads as "some external client"; 10.x as a pod.
  u128 ext = v4 ? addr_value(IPAddr::v4(203, 0, 113, 10)) : addr_value(*IPAddr::parse("2001:db8:ffff::10"));
  w.src = addr_from_value(prefer<u128>(c.src, {ext}), u.family);
  w.dst = addr_from_value(prefer<u128>(c.dst, {}), u.family);
  if (c.proto.has(6))
    w.proto = 6;
  else if (c.proto.has(17))
    w.proto = 17;
  else if (c.proto.has(132))
    w.proto = 132;
  else
    w.proto = static_cast<uint8_t>(c.proto.first());
  w.sport = static_cast<uint16_t>(prefer<uint32_t>(c.sport, {40000}));
  w.dport = static_cast<uint16_t>(prefer<uint32_t>(c.dport, {80, 443}));
  w.ct_combo = c.ct.has(4) ? 4 : c.ct.first();  // NEW
  w.mark = c.mark_value & c.mark_known;
  w.in_iface = static_cast<int>(c.in_iface.first());
  w.out_iface = static_cast<int>(c.out_iface.first());
  w.bridge_in = c.bridge_in.first();
  w.bridge_out = c.bridge_out.first();
  // Read naturally: a bridged packet entered a port, and leaves by another one.
  if (w.bridge_out != 0 && w.bridge_in == 0 && (c.bridge_in.bits & ~uint64_t(1)))
    w.bridge_in = SmallSet{c.bridge_in.bits & ~uint64_t(1)}.first();
  if (w.bridge_out != 0 && w.bridge_out == w.bridge_in) {
    uint64_t other_out = c.bridge_out.bits & ~(uint64_t(1) << w.bridge_in) & ~uint64_t(1);
    uint64_t other_in = c.bridge_in.bits & ~(uint64_t(1) << w.bridge_out) & ~uint64_t(1);
    if (other_out)
      w.bridge_out = SmallSet{other_out}.first();
    else if (other_in)
      w.bridge_in = SmallSet{other_in}.first();
  }
  w.client = c.client.first(static_cast<uint32_t>(u.affinity_keys.size()));
  w.age_bucket = c.age.first();
  w.preds = c.pred_value & c.pred_known;
  return w;
}

// ------------------------------------------------------------------ descriptions

namespace {

std::string interval_text(u128 lo, u128 hi, IPFamily f) {
  size_t bits = f == IPFamily::V4 ? 32 : 128;
  // A CIDR if [lo, hi] is aligned.
  for (size_t len = 0; len <= bits; ++len) {
    size_t host = bits - len;
    u128 span = host >= 128 ? ~u128(0) : ((u128(1) << host) - 1);
    if ((lo & span) == 0 && (lo | span) == hi) {
      std::string a = addr_from_value(lo, f).str();
      return len == bits ? a : a + "/" + std::to_string(len);
    }
  }
  return addr_from_value(lo, f).str() + "-" + addr_from_value(hi, f).str();
}

std::string addr_set_text(const AddrSet& s, const Universe& u) {
  AddrSet all = AddrSet::range(0, u.addr_max);
  if (s == all) return "";
  AddrSet comp = all.subtract(s);
  const AddrSet& shown = comp.intervals().size() < s.intervals().size() ? comp : s;
  std::string out = &shown == &comp ? "not " : "";
  size_t n = 0;
  for (const auto& i : shown.intervals()) {
    if (n++) out += ",";
    if (n > 6) {
      out += "... (" + std::to_string(shown.intervals().size()) + " ranges)";
      break;
    }
    out += interval_text(i.first, i.second, u.family);
  }
  return out;
}

std::string port_set_text(const PortSet& s) {
  if (s == PortSet::range(0, 65535)) return "";
  PortSet comp = PortSet::range(0, 65535).subtract(s);
  const PortSet& shown = comp.intervals().size() < s.intervals().size() ? comp : s;
  std::string out = &shown == &comp ? "not " : "";
  size_t n = 0;
  for (const auto& i : shown.intervals()) {
    if (n++) out += ",";
    out += std::to_string(i.first);
    if (i.second != i.first) out += ":" + std::to_string(i.second);
  }
  return out;
}

}  // namespace

std::string describe(const PacketClass& c, const Universe& u) {
  std::vector<std::string> parts;
  if (!c.proto.full()) {
    ProtoSet all = ProtoSet::all();
    ProtoSet comp = all.minus(c.proto);
    bool neg = !comp.empty() && __builtin_popcountll(comp.w[0]) + __builtin_popcountll(comp.w[1]) +
                                            __builtin_popcountll(comp.w[2]) + __builtin_popcountll(comp.w[3]) <
                                        __builtin_popcountll(c.proto.w[0]) + __builtin_popcountll(c.proto.w[1]) +
                                            __builtin_popcountll(c.proto.w[2]) + __builtin_popcountll(c.proto.w[3]);
    const ProtoSet& shown = neg ? comp : c.proto;
    std::string p = neg ? "proto not " : "proto ";
    int n = 0;
    for (unsigned i = 0; i < 256; ++i)
      if (shown.has(i)) {
        if (n++) p += ",";
        p += i == 6 ? "tcp" : i == 17 ? "udp" : i == 132 ? "sctp" : std::to_string(i);
      }
    parts.push_back(p);
  }
  if (auto s = addr_set_text(c.src, u); !s.empty()) parts.push_back("src " + s);
  if (auto s = addr_set_text(c.dst, u); !s.empty()) parts.push_back("dst " + s);
  if (auto s = port_set_text(c.sport); !s.empty()) parts.push_back("sport " + s);
  if (auto s = port_set_text(c.dport); !s.empty()) parts.push_back("dport " + s);
  if (c.ct != ct_all_initial()) {
    std::string s = "ct ";
    int n = 0;
    for (unsigned i = 0; i < kCtCombos; ++i)
      if (c.ct.has(i)) {
        if (n++) s += "|";
        s += kBaseNames[i / 4];
        if (i & 1) s += "+SNAT";
        if (i & 2) s += "+DNAT";
      }
    parts.push_back(s);
  }
  if (c.mark_known) {
    char b[64];
    std::snprintf(b, sizeof b, "mark 0x%x/0x%x", c.mark_value & c.mark_known, c.mark_known);
    parts.push_back(b);
  }
  auto ifs = [&](const SmallSet& s, const char* what) {
    if (s == SmallSet::all(static_cast<unsigned>(u.ifaces.size()))) return;
    std::string t = std::string(what) + " ";
    int n = 0;
    for (unsigned i = 0; i < u.ifaces.size(); ++i)
      if (s.has(i)) {
        if (n++) t += ",";
        t += u.ifaces[i];
      }
    parts.push_back(t);
  };
  ifs(c.in_iface, "in");
  ifs(c.out_iface, "out");
  auto ports = [&](const SmallSet& s, const char* what, const char* none) {
    if (s == SmallSet::all(static_cast<unsigned>(u.bridge_ports.size()))) return;
    std::string t = std::string(what) + " ";
    int n = 0;
    for (unsigned i = 0; i < u.bridge_ports.size(); ++i)
      if (s.has(i)) {
        if (n++) t += ",";
        t += i == 0 ? std::string(none) : u.bridge_ports[i];
      }
    parts.push_back(t);
  };
  ports(c.bridge_in, "bridge port in", "(none)");
  ports(c.bridge_out, "bridged to", "(routed)");
  if (!(c.client == ClientSet::all())) {
    std::string t = c.client.complement ? "client not " : "client ";
    int n = 0;
    for (uint32_t id : c.client.ids) {
      if (n++) t += ",";
      t += id < u.affinity_keys.size() ? u.affinity_keys[id] : "?";
    }
    parts.push_back(t);
  }
  if (!(c.age == SmallSet::all(u.age_buckets())) && !(c.client == ClientSet::only(0))) {
    // Ages as ranges of whole buckets: "last seen 5 s to < 600 s ago".
    std::string t = "last seen";
    int n = 0;
    for (unsigned b = 0; b < u.age_buckets();) {
      if (!c.age.has(b)) {
        ++b;
        continue;
      }
      unsigned e = b;
      while (e + 1 < u.age_buckets() && c.age.has(e + 1)) ++e;
      t += n++ ? ", " : " ";
      t += std::to_string(u.age_bucket_start(b)) + " s";
      t += e + 1 < u.age_buckets() ? " to < " + std::to_string(u.age_bucket_start(e + 1)) + " s" : " or more";
      b = e + 1;
    }
    parts.push_back(t + " ago");
  }
  for (unsigned b = 0; b < 64 && b < u.preds.size(); ++b)
    if (c.pred_known & (uint64_t(1) << b))
      parts.push_back(std::string(c.pred_value & (uint64_t(1) << b) ? "if " : "unless ") + "[" + u.preds[b] + "]");
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "every packet" : out;
}

}  // namespace kpc::verifier::sem
