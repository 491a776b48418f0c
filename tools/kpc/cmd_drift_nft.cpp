// `kpc drift SNAPSHOT --state NODE.nft` for an nftables node: does the node's kube-proxy table
// (table ip kube-proxy, table ip6 kube-proxy) hold what kube-proxy's full sync of the snapshot
// writes? Only those tables count: every other table (a CNI's, firewalld's) is neither read nor
// touched. Per family: the object differences (chains, sets, rules, elements:
// applier/core/nft_repair.h), the smallest repair transaction (checked by the nft model before it
// is given), and what the repair changes for packets, by Service (the nft symbolic front end:
// the node as it is -> the node after the repair).
#include <cstdio>

#include "applier/core/nft_repair.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/drift_nft.h"
#include "tools/kpc/text_layout.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/sem/report.h"

namespace kpc::cli {
namespace {

namespace vn = verifier::nft;

struct FamilyDrift {
  IPFamily family = IPFamily::V4;
  std::vector<std::string> differences;
  applier::NftRepairResult repair;
  verifier::sem::CompareResult packets;
  std::vector<IPAddr> local;
};

const char* table_name(IPFamily f) { return f == IPFamily::V4 ? "table ip kube-proxy" : "table ip6 kube-proxy"; }

}  // namespace

int run_drift_nft(const NftDriftRequest& o) {
  SourceManager sm;
  DiagSink diags;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  lo.node_name = o.node;
  Snapshot snap;
  bool ok = load_snapshot(o.inputs, lo, sm, &snap, diags);
  // Kube-proxy's full transaction per family the node runs.
  std::vector<std::pair<IPFamily, std::string>> desired;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    if (!ok) break;
    DiagSink quiet;
    if (!nft_node_context(snap, f, quiet)) continue;
    auto c = compile_nftables(snap, f, {}, diags);
    if (!c) {
      ok = false;
      break;
    }
    desired.emplace_back(f, c->text);
  }
  if (ok && desired.empty()) {
    compile_nftables(snap, IPFamily::V4, {}, diags);  // let the compiler say why
    ok = false;
  }
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!ok) return kExitError;

  InputText text;
  InputError ie;
  if (!text.load(o.state, o.max_input_size, &ie)) {
    print_input_error(ie);
    return kExitError;
  }
  std::vector<FamilyDrift> fams;
  for (auto& [family, tx] : desired) {
    FamilyDrift fd;
    fd.family = family;
    applier::TableName only{family == IPFamily::V4 ? vn::Family::Ip : vn::Family::Ip6, "kube-proxy"};
    vn::NftState actual;
    std::string error;
    if (!applier::read_nft_state(text.view(), o.state, &actual, &error, &only)) {
      print_error(error);
      return kExitError;
    }
    vn::NftState want;
    if (auto r = vn::apply_script(want, tx, "desired.nft"); !r.ok) {
      print_error("internal error: kube-proxy's full transaction does not apply: " + r.error->to_string());
      return kExitInternal;
    }
    fd.differences = applier::nft_table_differences(want.find_table(only.family, only.name),
                                                    actual.find_table(only.family, only.name), SIZE_MAX);
    fd.repair = applier::repair_nft(actual, tx, only.family);
    if (!fd.repair.ok) {
      print_error("kpc drift: no repair of " + std::string(table_name(family)) + ": " + fd.repair.error);
      return kExitError;
    }
    vn::NftState repaired = actual;
    if (auto r = vn::apply_script(repaired, fd.repair.transaction, "repair.nft"); !r.ok) {
      print_error("internal error: the repair does not apply: " + r.error->to_string());
      return kExitInternal;
    }
    std::vector<IPAddr> derived;
    append_node_addresses(snap, family, &derived);
    std::vector<std::string> given;
    for (const auto& g : o.local_addresses)
      if (auto a = IPAddr::parse(g); !a || a->family == family) given.push_back(g);
    if (!choose_local_addresses(given, derived, family, "drift", &fd.local)) return kExitError;
    verifier::sem::CompareOptions co;
    co.local_addresses = fd.local;
    co.max_atoms = o.max_atoms;
    if (!fd.differences.empty()) fd.packets = verifier::nft_sym::compare_nft_states(actual, repaired, family, co);
    fams.push_back(std::move(fd));
  }

  bool drift = false;
  std::string repair;
  for (const auto& fd : fams) {
    drift = drift || !fd.differences.empty();
    repair += fd.repair.transaction;
  }
  verifier::sem::ReportOptions ro;
  ro.before_name = "node";
  ro.after_name = "full_sync";  // the JSON keys the iptables drift report uses
  std::string snapshot = o.inputs[0] + (o.inputs.size() > 1 ? " (+" + std::to_string(o.inputs.size() - 1) + ")" : "");
  if (!o.output.empty() && !write_output(o.output, repair)) return kExitError;
  if (o.format == "json") {
    auto doc = json_document("drift");
    doc["snapshot"] = snapshot;
    doc["state"] = o.state;
    doc["backend"] = "nftables";
    doc["drift"] = drift;
    nlohmann::ordered_json tables = nlohmann::ordered_json::array();
    for (const auto& fd : fams) {
      nlohmann::ordered_json t;
      t["table"] = table_name(fd.family);
      t["differences"] = fd.differences;
      nlohmann::ordered_json la = nlohmann::ordered_json::array();
      for (const auto& a : fd.local) la.push_back(a.str());
      t["local_addresses"] = la;
      t["packets"] = fd.differences.empty() ? nlohmann::ordered_json(nullptr)
                                            : verifier::sem::diff_json_object(fd.packets, ro);
      t["repair"] = fd.repair.transaction;
      t["repair_operations"] = fd.repair.stats.operations;
      tables.push_back(std::move(t));
    }
    doc["tables"] = std::move(tables);
    size_t written = 0, deleted = 0;
    for (const auto& fd : fams) {
      const auto& st = fd.repair.stats;
      written += st.chains_rewritten + st.chains_created + st.chains_recreated;
      deleted += st.chains_deleted;
    }
    doc["repair"] = {{"chains_written", written}, {"chains_deleted", deleted}, {"jumps_restored", 0}, {"program", repair}};
    print_json(std::move(doc));
    return drift ? kExitDifferent : kExitOk;
  }
  std::string out = "kpc drift " + snapshot + " --state " + o.state + " (nftables; kube-proxy's tables only)\n";
  out += drift ? "verdict: drift: the node's kube-proxy tables differ from a full sync of the snapshot\n"
               : "verdict: no drift\n";
  for (const auto& fd : fams) {
    out += "\n" + std::string(table_name(fd.family)) + ": ";
    if (fd.differences.empty()) {
      out += "as kube-proxy writes it\n";
      continue;
    }
    out += std::to_string(fd.differences.size()) + (fd.differences.size() == 1 ? " difference" : " differences") +
           " (node -> kube-proxy's)\n";
    size_t shown = 0;
    for (const auto& d : fd.differences) {
      if (!o.verbose && shown == 20) {
        out += "  ... " + std::to_string(fd.differences.size() - shown) + " more (--verbose lists all)\n";
        break;
      }
      out += "  " + d + "\n";
      ++shown;
    }
    out += "  repair: " + std::to_string(fd.repair.stats.operations) + " commands" +
           (o.output.empty() ? " (-o FILE writes them)" : " (written to " + o.output + ")") + "\n";
    if (fd.packets.equivalent()) {
      out += "  packets: none treated differently (the differences are not reachable by a packet)\n";
    } else {
      out += "  packets, by Service (node -> after the repair):\n";
      for (const auto& c : verifier::sem::service_changes(fd.packets, ro))
        out += "    " + c.service + ": " + c.words + " (" + std::to_string(c.classes) +
               (c.classes == 1 ? " class" : " classes") + ")\n";
    }
  }
  if (o.format == "markdown") {
    std::string md = "### kpc drift `" + snapshot + "` (nftables)\n\n```\n" + out + "```\n";
    std::fputs(md.c_str(), stdout);
  } else {
    std::fputs(o.verbose ? out.c_str() : reviewer_text(out).c_str(), stdout);
  }
  return drift ? kExitDifferent : kExitOk;
}

}  // namespace kpc::cli
