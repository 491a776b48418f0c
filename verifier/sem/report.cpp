#include "verifier/sem/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace kpc::verifier::sem {

namespace {

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

std::string service_key(const Difference& d) { return d.services.empty() ? "(no service)" : d.services[0]; }

// Differences grouped by service, in order of first appearance (the comparison's order is deterministic).
std::vector<std::pair<std::string, std::vector<const Difference*>>> by_service(const CompareResult& r) {
  std::vector<std::pair<std::string, std::vector<const Difference*>>> groups;
  std::map<std::string, size_t> index;
  for (const auto& d : r.differences) {
    std::string k = service_key(d);
    auto it = index.find(k);
    if (it == index.end()) {
      it = index.emplace(k, groups.size()).first;
      groups.push_back({k, {}});
    }
    groups[it->second].second.push_back(&d);
  }
  return groups;
}

}  // namespace

nlohmann::ordered_json probability_json(const Probability& p) {
  nlohmann::ordered_json j;
  j["percent"] = std::round(p.to_double() * 100 * 10000) / 10000;
  j["fraction"] =
      p.denominator_log2() <= 1024 ? p.fraction() : p.numerator().str() + "/2^" + std::to_string(p.denominator_log2());
  j["numerator"] = p.numerator().str();
  j["denominator_log2"] = p.denominator_log2();
  // The denominator itself, as nft's (non-dyadic) shares need it (tools/kpc/cmd_trace_nft.cpp):
  // 2^K in decimal, or "2^K" past 2^1024 as in the fraction.
  const std::string f = j["fraction"].get<std::string>();
  const size_t slash = f.find('/');
  j["denominator"] = slash == std::string::npos ? std::string("1") : f.substr(slash + 1);
  j["decimal"] = p.decimal(10);
  return j;
}

nlohmann::ordered_json share_json(const OutcomeShare& s) {
  nlohmann::ordered_json j;
  j["probability"] = probability_json(s.probability);
  j["verdict"] = trace::verdict_name(s.verdict);
  if (!s.route.empty()) j["route"] = s.route;
  if (!s.dnat.empty()) j["dnat"] = s.dnat;
  j["masquerade"] = s.masquerade;
  if (!s.snat.empty()) j["snat"] = s.snat;
  j["mark"] = hex(s.mark);
  if (!s.options.empty()) j["options"] = s.options;
  if (!s.affinity.empty()) j["affinity"] = s.affinity;
  if (!s.unknown.empty()) j["unknown"] = s.unknown;
  return j;
}

nlohmann::ordered_json difference_json(const Difference& d, const char* before_name, const char* after_name) {
  nlohmann::ordered_json j;
  j["undecided"] = d.undecided;
  j["origin"] = origin_name(d.origin);
  j["class"] = d.cls;
  const trace::Packet& p = d.witness_a;
  nlohmann::ordered_json w;
  w["text"] = d.witness_text;
  w["proto"] = trace::proto_name(p.proto);
  w["src"] = p.src.str();
  w["sport"] = p.sport.value_or(0);
  w["dst"] = p.dst.str();
  w["dport"] = p.dport;
  w["ctstate"] = ir::ctstate_text(p.ctstate);
  w["mark"] = hex(p.mark);
  if (p.in_iface && d.origin == Origin::Arriving) w["in_iface"] = *p.in_iface;
  if (p.in_bridge_port && d.origin == Origin::Arriving && p.in_bridge_port->size()) {
    w["in_bridge_port"] = *p.in_bridge_port;
    w["out_bridge_port"] = p.out_bridge_port ? *p.out_bridge_port : "";
  }
  if (!p.remembered.empty()) {
    w["remembered"] = p.remembered;
    w["remembered_age_seconds"] = p.remembered_age;
  }
  j["witness"] = w;
  j["services"] = d.services;
  if (!d.assumptions.empty()) j["assumptions"] = d.assumptions;
  auto arr = [](const std::vector<OutcomeShare>& v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& s : v) a.push_back(share_json(s));
    return a;
  };
  j[before_name] = arr(d.before);
  j[after_name] = arr(d.after);
  j[std::string("path_") + before_name] = d.path_before;
  j[std::string("path_") + after_name] = d.path_after;
  return j;
}

namespace {

// "shop/web:http (12 classes): endpoint added 10.244.1.9:8080; shares 50.0% 50.0% -> 33.3% 33.3% 33.3%"
// — what changed for a Service, in words, from the outcomes of its first decided class (undecided ones
// are only counted).
ServiceChange change_of(const std::string& svc, const std::vector<const Difference*>& diffs, const ReportOptions& o) {
  ServiceChange c;
  c.service = svc;
  const Difference* first = nullptr;
  for (const auto* d : diffs) {
    c.undecided += d->undecided;
    if (!first && !d->undecided) first = d;
  }
  c.classes = diffs.size() - c.undecided;
  if (!first) {
    c.words = "cannot be decided (see below)";
    return c;
  }
  auto dnats = [](const std::vector<OutcomeShare>& v) {
    std::vector<std::string> out;
    for (const auto& x : v)
      if (!x.dnat.empty() && std::find(out.begin(), out.end(), x.dnat) == out.end()) out.push_back(x.dnat);
    return out;
  };
  auto shares = [](const std::vector<OutcomeShare>& v) {
    std::string t;
    for (const auto& x : v) {
      char b[16];
      std::snprintf(b, sizeof b, "%.1f%%", x.probability.to_double() * 100);
      t += (t.empty() ? "" : " ") + std::string(b);
    }
    return t;
  };
  auto verdicts = [](const std::vector<OutcomeShare>& v) {
    std::string t;
    for (const auto& x : v)
      if (t.find(trace::verdict_name(x.verdict)) == std::string::npos)
        t += (t.empty() ? "" : "/") + std::string(trace::verdict_name(x.verdict));
    return t;
  };
  auto masq = [](const std::vector<OutcomeShare>& v) {
    bool any = false, all = true;
    for (const auto& x : v) any |= x.masquerade, all &= x.masquerade;
    return all ? std::string("yes") : any ? std::string("partly") : std::string("no");
  };
  std::vector<std::string> parts;
  // A source range (loadBalancerSourceRanges): classes of some sources go from a DNAT to kube-proxy's
  // firewall DROP, or back, the Service's endpoints unchanged. Named by the classes' sources, not as
  // an endpoint change (a REJECT is kube-proxy's "no endpoints", which the endpoint words name).
  auto blocked_by = [](const std::vector<OutcomeShare>& v, trace::Verdict verdict) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [&](const OutcomeShare& x) { return x.verdict == verdict; });
  };
  auto source_of = [](const std::string& cls) {
    size_t at = cls.find("src ");
    if (at == std::string::npos || (at && cls[at - 1] != ' ')) return std::string();
    size_t end = cls.find(',', at);
    return cls.substr(at + 4, end == std::string::npos ? std::string::npos : end - at - 4);
  };
  std::vector<std::string> allowed, refused;
  std::vector<std::string> eps_before, eps_after;
  auto add_unique = [](std::vector<std::string>* v, const std::string& x) {
    if (!x.empty() && std::find(v->begin(), v->end(), x) == v->end()) v->push_back(x);
  };
  for (const auto* d : diffs) {
    if (d->undecided) continue;
    for (const auto& x : dnats(d->before)) add_unique(&eps_before, x);
    for (const auto& x : dnats(d->after)) add_unique(&eps_after, x);
    std::string src = source_of(d->cls);
    if (src.empty()) continue;
    if (blocked_by(d->before, trace::Verdict::Drop) && !dnats(d->after).empty()) add_unique(&allowed, src);
    if (!dnats(d->before).empty() && blocked_by(d->after, trace::Verdict::Drop)) add_unique(&refused, src);
  }
  std::sort(eps_before.begin(), eps_before.end());
  std::sort(eps_after.begin(), eps_after.end());
  const bool by_source = (!allowed.empty() || !refused.empty()) && eps_before == eps_after;
  if (by_source) {
    auto list = [](const std::vector<std::string>& v) {
      std::string t;
      for (size_t i = 0; i < v.size() && i < 3; ++i) t += (i ? ", " : "") + v[i];
      if (v.size() > 3) t += " and " + std::to_string(v.size() - 3) + " more";
      return t;
    };
    if (!allowed.empty()) parts.push_back("source " + list(allowed) + " now allowed");
    if (!refused.empty()) parts.push_back("source " + list(refused) + " no longer allowed");
  }
  if (by_source) {
    for (size_t i = 0; i < parts.size(); ++i) c.words += (i ? "; " : "") + parts[i];
    return c;
  }
  // Session affinity: every class is a remembered client, the endpoints unchanged, and the
  // client goes from its remembered endpoint to a fresh choice (its memory expired: a shorter
  // timeout, or affinity off), or back. Named by the client's age, not as endpoints added.
  bool remembered = eps_before == eps_after;
  for (const auto* d : diffs)
    if (!d->undecided && d->witness_text.find("client remembered") == std::string::npos) remembered = false;
  auto kept = [](const std::vector<OutcomeShare>& v) { return v.size() == 1 && !v[0].dnat.empty(); };
  if (remembered && kept(first->before) != kept(first->after)) {
    std::string age;
    size_t at = first->witness_text.find("last seen ");
    if (at != std::string::npos) age = first->witness_text.substr(at + 10, first->witness_text.find(" ago", at) - at - 10);
    c.words = std::string("session affinity: a client last seen ") + (age.empty() ? "earlier" : age + " ago") +
              (kept(first->before) ? " is no longer kept on its endpoint (a shorter timeout, or affinity off)"
                                   : " is now kept on its endpoint (a longer timeout, or affinity on)");
    return c;
  }
  // Endpoints added or removed: over every class of the Service, not the first one's (a class
  // that goes from a DROP to a DNAT names no endpoint that was added).
  auto b = dnats(first->before), a = dnats(first->after);
  for (const auto& x : a)
    if (std::find(eps_before.begin(), eps_before.end(), x) == eps_before.end() &&
        std::find(b.begin(), b.end(), x) == b.end())
      parts.push_back("endpoint added " + x);
  for (const auto& x : b)
    if (std::find(eps_after.begin(), eps_after.end(), x) == eps_after.end() &&
        std::find(a.begin(), a.end(), x) == a.end())
      parts.push_back("endpoint removed " + x);
  if (verdicts(first->before) != verdicts(first->after))
    parts.push_back("verdict " + verdicts(first->before) + " -> " + verdicts(first->after));
  if (shares(first->before) != shares(first->after))
    parts.push_back("shares " + shares(first->before) + " -> " + shares(first->after));
  if (masq(first->before) != masq(first->after))
    parts.push_back("masquerade " + masq(first->before) + " -> " + masq(first->after));
  std::string ab = first->before.empty() ? "" : first->before[0].affinity, aa = first->after.empty() ? "" : first->after[0].affinity;
  if (ab != aa) parts.push_back("affinity changed");
  if (parts.empty()) parts.push_back("outcomes differ (" + std::string(o.before_name) + " vs " + o.after_name + " below)");
  for (size_t i = 0; i < parts.size(); ++i) c.words += (i ? "; " : "") + parts[i];
  return c;
}

std::string summary_line(const std::string& svc, const std::vector<const Difference*>& diffs, const ReportOptions& o) {
  ServiceChange c = change_of(svc, diffs, o);
  return "  " + svc + " (" + std::to_string(c.classes) + " classes" +
         (c.undecided ? ", " + std::to_string(c.undecided) + " undecided" : "") + "): " + c.words + "\n";
}

}  // namespace

std::vector<ServiceChange> service_changes(const CompareResult& r, const ReportOptions& o) {
  std::vector<ServiceChange> out;
  for (const auto& [svc, diffs] : by_service(r)) out.push_back(change_of(svc, diffs, o));
  return out;
}

std::string service_summary(const CompareResult& r, const ReportOptions& o) {
  std::string out = "by Service, for the first class of each:\n";
  for (const auto& [svc, diffs] : by_service(r)) out += summary_line(svc, diffs, o);
  return out;
}

std::string diff_text(const CompareResult& r, const ReportOptions& o) {
  std::string out;
  if (r.equivalent()) {
    out += "equivalent: no packet is treated differently";
    if (!o.verbose) return out + "\n";
    out += r.equivalent_by_hash ? " (" + r.narrowing + ")\n"
                                : " (" + r.narrowing + "; " + std::to_string(r.classes_compared) +
                                      " start classes, " + std::to_string(r.leaves) + " leaves)\n";
    return out;
  }
  auto groups = by_service(r);
  // Every service with a differing class, listed or not (the listing stops at max_reported).
  const size_t services = std::max(groups.size(), r.services_differing.size());
  out += std::to_string(r.differing_classes) + " packet classes behave differently, " +
         std::to_string(r.undecided_classes) + " undecided, in " + std::to_string(services) +
         (services == 1 ? " service" : " services") + "\n";
  if (o.verbose)
    out += "(" + r.narrowing + "; " + std::to_string(r.classes_compared) + " start classes, " +
           std::to_string(r.leaves) + " leaves)\n";
  if (r.differences.size() < r.differing_classes + r.undecided_classes)
    out += "(showing the first " + std::to_string(r.differences.size()) + " classes, of " +
           std::to_string(groups.size()) + (groups.size() == 1 ? " service" : " services") + ")\n";
  if (r.sampled) out += "(a sample of the destinations: classes of the others are not listed)\n";
  out += "\n" + service_summary(r, o);
  for (const auto& [svc, diffs] : groups) {
    out += "\n" + svc + ": " + std::to_string(diffs.size()) + (diffs.size() == 1 ? " class\n" : " classes\n");
    size_t n = 0;
    for (const Difference* d : diffs) {
      if (++n > o.max_per_service) {
        out += "  ... " + std::to_string(diffs.size() - o.max_per_service) + " more (--format json lists all)\n";
        break;
      }
      if (o.verbose)
        out += std::string("  ") + (d->undecided ? "UNDECIDED " : "") + origin_name(d->origin) + ": " + d->cls + "\n";
      else if (d->undecided)
        out += "  undecided:\n";
      out += "    witness: " + d->witness_text + "\n";
      for (const auto& a : d->assumptions) out += "    assuming " + a + "\n";
      for (const auto& s : d->before) out += std::string("    ") + o.before_name + ": " + format_share(s) + "\n";
      for (const auto& s : d->after) out += std::string("    ") + o.after_name + ": " + format_share(s) + "\n";
      if (o.paths && o.verbose && n == 1) {  // one path per service: the rest differ only in the class
        for (const auto& l : d->path_before) out += std::string("      ") + o.before_name + " path: " + l + "\n";
        for (const auto& l : d->path_after) out += std::string("      ") + o.after_name + " path: " + l + "\n";
      }
    }
  }
  for (const auto& f : r.self_check_failures) out += "internal error: " + f + "\n";
  return out;
}

std::string diff_json(const CompareResult& r, const ReportOptions& o) { return diff_json_object(r, o).dump(2) + "\n"; }

std::vector<std::pair<std::string, std::vector<const Difference*>>> differences_by_service(const CompareResult& r) {
  return by_service(r);
}

nlohmann::ordered_json diff_json_object(const CompareResult& r, const ReportOptions& o) {
  nlohmann::ordered_json j;
  j["schema"] = "kpc.dev/diff/v1";
  j["equivalent"] = r.equivalent();
  j["differing_classes"] = r.differing_classes;
  j["sampled"] = r.sampled;
  j["undecided_classes"] = r.undecided_classes;
  j["narrowing"] = r.narrowing;
  j["atoms"] = r.atoms;
  j["atoms_explored"] = r.atoms_explored;
  j["start_classes"] = r.classes_compared;
  j["leaves"] = r.leaves;
  j["services_differing"] = std::max(by_service(r).size(), r.services_differing.size());
  j["services"] = nlohmann::ordered_json::array();
  for (const auto& [svc, diffs] : by_service(r)) {
    nlohmann::ordered_json g;
    g["service"] = svc;
    g["change"] = change_of(svc, diffs, o).words;
    g["differences"] = nlohmann::ordered_json::array();
    for (const Difference* d : diffs) g["differences"].push_back(difference_json(*d, o.before_name, o.after_name));
    j["services"].push_back(std::move(g));
  }
  j["self_check_failures"] = r.self_check_failures;
  return j;
}

std::string diff_markdown(const CompareResult& r, const ReportOptions& o) {
  std::string s;
  if (r.equivalent()) return "No packet is treated differently.\n";
  s += std::to_string(r.differing_classes) + " packet classes behave differently, " +
       std::to_string(r.undecided_classes) + " undecided" + (r.sampled ? " (a sample of the destinations)" : "") +
       ".\n\n";
  s += std::string("| Service | classes | example packet | ") + o.before_name + " | " + o.after_name + " |\n";
  s += "|---|---|---|---|---|\n";
  auto cell = [](const std::vector<OutcomeShare>& v) {
    std::string c;
    for (const auto& x : v) {
      if (!c.empty()) c += "<br>";
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.1f%% ", x.probability.to_double() * 100);
      c += pct + format_outcome(x);
    }
    for (auto& ch : c)
      if (ch == '|') ch = '/';
    return c;
  };
  for (const auto& [svc, diffs] : by_service(r)) {
    size_t undecided = 0;
    for (const auto* d : diffs) undecided += d->undecided;
    s += "| " + svc + " | " + std::to_string(diffs.size()) + (undecided ? " (" + std::to_string(undecided) + " undecided)" : "") +
         " | `" + diffs[0]->witness_text + "` | " + cell(diffs[0]->before) + " | " + cell(diffs[0]->after) + " |\n";
  }
  ReportOptions text = o;
  text.paths = false;
  text.verbose = true;  // the collapsible block is the detail
  s += "\n<details><summary>every class</summary>\n\n```\n" + diff_text(r, text) + "```\n</details>\n";
  return s;
}

std::string verify_behaviour_text(const CompareResult& b, bool verbose) {
  std::string out;
  out += "packets: " + std::to_string(b.differing_classes) + " classes treated differently, " +
         std::to_string(b.undecided_classes) + " undecided" +
         (verbose ? " (" + b.narrowing + "; " + std::to_string(b.classes_compared) + " start classes compared)" : "") +
         "\n";
  if (!b.differences.empty()) {
    ReportOptions ro;
    ro.before_name = "full";
    ro.after_name = "partial";
    out += service_summary(b, ro);
  }
  size_t shown = 0;
  for (const auto& d : b.differences) {
    if (++shown > 10) {
      out += "  ... " + std::to_string(b.differences.size() - 10) + " more (--format json lists all)\n";
      break;
    }
    out += std::string(d.undecided ? "  undecided: " : "  witness: ") + d.witness_text + "\n";
    if (verbose) out += "    class: " + d.cls + "\n";
    if (!d.services.empty()) {
      out += "    service:";
      for (const auto& s : d.services) out += " " + s;
      out += "\n";
    }
    for (const auto& s : d.before) out += "    full:    " + format_share(s) + "\n";
    for (const auto& s : d.after) out += "    partial: " + format_share(s) + "\n";
  }
  for (const auto& f : b.self_check_failures) out += "internal error: " + f + "\n";
  return out;
}

}  // namespace kpc::verifier::sem
