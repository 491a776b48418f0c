// `kpc golden SNAPSHOT... --expect DIR [--update] [--node NAME|all] [--backend B]... [--family F]...`:
// compiles every node x back end x family asked for and compares each program with
// DIR/<node>/<backend>-<family>.<ext> (fastpath: DIR/<node>/fastpath.nft). Exit 0 all
// equal, 1 any differs or is missing, 2 error (nothing written). --update rewrites the
// files (atomically, as -o does) and says which are new, changed and unchanged.
#include <cstdio>
#include <filesystem>

#include "compiler/driver/capabilities.h"
#include "compiler/model/loader.h"
#include "compiler/proxy/node_context.h"
#include "tools/kpc/commands.h"
#include "tools/kpc/golden.h"

namespace kpc::cli {
namespace {

using golden::FileResult;
using golden::Status;

struct GoldenOptions {
  std::vector<std::string> inputs;
  std::string expect;
  bool update = false;
  std::string node;  ///< "", a Node's name, or "all"
  std::vector<std::string> backends, families;
  std::string format = "text";
  std::string kube_proxy_version = "1.35";
  size_t diff_lines = 40;
  uint64_t max_input_size = kDefaultMaxInputSize;
};

// A node name becomes a directory: only what a Node may be called (DNS-1123 subdomain characters).
bool safe_dir_name(const std::string& n) {
  return !n.empty() && n[0] != '.' && n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") == std::string::npos;
}

// The targets asked for (before knowing which families a node has): --backend as given, each
// for every --family (ip6tables is IPv6, fastpath one file); without --backend the node's mode.
std::vector<Target> wanted_targets(const GoldenOptions& o, const Snapshot& snap, DiagSink& diags) {
  std::vector<IPFamily> fams;
  for (const auto& f : o.families) fams.push_back(*parse_family(f));
  if (fams.empty()) fams = {IPFamily::V4, IPFamily::V6};
  std::vector<Target> out;
  auto add = [&](Target t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  if (o.backends.empty()) {
    for (IPFamily f : fams)
      if (auto t = target_for_mode(snap, f, diags)) add(*t);
  }
  for (const auto& b : o.backends) {
    if (b == "fastpath") add({BackendKind::FastPath, IPFamily::V4});
    else if (b == "ip6tables") add({BackendKind::IPTables, IPFamily::V6});
    else
      for (IPFamily f : fams) add({b == "nftables" ? BackendKind::NFTables : BackendKind::IPTables, f});
  }
  return out;
}

// The files of one node (its name selected in snap): the targets it runs, compiled.
bool node_files(const GoldenOptions& o, const std::string& node, Snapshot& snap, bool many_nodes,
                std::vector<FileResult>* out, DiagSink& diags) {
  if (!safe_dir_name(node)) {
    diags.report(DiagCode::NodeUnknown, snap.config.pos, "", "",
                 "node name \"" + node + "\" cannot name a directory under --expect (DNS-1123 names only)");
    return false;
  }
  size_t before = out->size();
  DiagSink unavailable;  // a family the node has no address of: kube-proxy runs no such proxier there
  bool ok = true;
  auto targets = wanted_targets(o, snap, diags);
  if (targets.empty()) return false;  // the node's mode has no back end (reported)
  for (Target t : targets) {
    if (t.kind == BackendKind::IPVS) {
      print_error(refusal("golden", "ipvs", kSnapshotDir));
      return false;
    }
    DiagSink ctx;
    bool available = target_available(snap, t, ctx);
    for (const auto& d : ctx.all())
      (d.code == DiagCode::FamilyUnavailable && (o.families.empty() || many_nodes) ? unavailable : diags).report(d);
    if (!available) continue;
    auto text = compile_program(snap, t, o.kube_proxy_version, diags);
    if (!text) {
      ok = false;
      continue;
    }
    FileResult f;
    f.node = node;
    f.target = t;
    f.file = golden::golden_file_name(t);
    f.path = o.expect + "/" + node + "/" + f.file;
    f.compiled = std::move(*text);
    if (t.kind == BackendKind::IPTables || t.kind == BackendKind::NFTables) {
      std::vector<IPAddr> derived;
      append_node_addresses(snap, t.family, &derived);
      choose_local_addresses({}, derived, t.family, "golden", &f.local_addresses);
    }
    out->push_back(std::move(f));
  }
  if (out->size() == before && ok) {
    if (o.families.empty() || !many_nodes) {
      for (const auto& d : unavailable.all()) diags.report(d);
      return false;
    }
    std::fprintf(stderr, "note: Node %s has none of the families asked for: no files for it\n", node.c_str());
  }
  return ok;
}

// Reads the expected file of each program: missing, equal or different (explained).
bool compare_all(const GoldenOptions& o, std::vector<FileResult>& files) {
  bool ok = true;
  golden::ExplainOptions eo;
  eo.max_diff_lines = o.diff_lines;
  for (auto& f : files) {
    std::error_code ec;
    if (!std::filesystem::exists(f.path, ec) && !ec) {
      f.status = o.update ? Status::New : Status::Missing;
      continue;
    }
    InputText text;
    InputError err;
    if (!text.load(f.path, o.max_input_size, &err)) {
      print_input_error(err);
      ok = false;
      continue;
    }
    bool same = text.view() == f.compiled;
    if (o.update) {
      f.status = same ? Status::Unchanged : Status::Changed;
    } else if (same) {
      f.status = Status::Equal;
    } else {
      f.status = Status::Differs;
      golden::explain(f, text.view(), eo);
    }
  }
  return ok;
}

bool write_all(const std::vector<FileResult>& files) {
  for (const auto& f : files) {
    if (f.status == Status::Unchanged) continue;
    std::error_code ec;
    std::string dir = f.path.substr(0, f.path.rfind('/'));
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      print_error("error[E0005]: " + dir + ": " + ec.message());
      return false;
    }
    if (!write_output(f.path, f.compiled)) return false;
  }
  return true;
}

// kpc.dev/golden/v1: every file with its status and, for one that differs, the byte diff and the
// rows by Service (schemas/output/golden.schema.json).
nlohmann::ordered_json golden_json(const GoldenOptions& o, const std::vector<FileResult>& files) {
  auto j = json_document("golden");
  j["expect"] = o.expect;
  j["update"] = o.update;
  bool same = true;
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& f : files) {
    same &= f.status == Status::Equal;
    nlohmann::ordered_json x;
    x["node"] = f.node;
    x["backend"] = backend_kind_name(f.target.kind);
    x["family"] = f.target.kind == BackendKind::FastPath ? nlohmann::ordered_json(nullptr)
                                                          : nlohmann::ordered_json(f.target.family == IPFamily::V4 ? "ipv4" : "ipv6");
    x["file"] = f.file;
    x["path"] = f.path;
    x["status"] = golden::status_name(f.status);
    if (f.status == Status::Differs) {
      x["byte_diff"] = f.byte_diff;
      x["by"] = f.by_object ? "object" : "behaviour";
      x["note"] = f.summary_note.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.summary_note);
      x["services"] = nlohmann::ordered_json::array();
      for (const auto& r : f.services) x["services"].push_back({{"service", r.service}, {"change", r.words}});
      x["more_services"] = f.more_services;
    }
    arr.push_back(std::move(x));
  }
  j["equal"] = !o.update && same;
  j["files"] = std::move(arr);
  return j;
}

int run(GoldenOptions o) {
  if (refuse_non_snapshots("golden", o.inputs, o.max_input_size)) return kExitError;
  while (o.expect.size() > 1 && o.expect.back() == '/') o.expect.pop_back();
  SourceManager sm;
  DiagSink diags;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  bool all = o.node == "all";
  if (!all) lo.node_name = o.node;
  Snapshot snap;
  bool ok = load_snapshot(o.inputs, lo, sm, &snap, diags);
  std::vector<FileResult> files;
  if (ok && all) {
    if (snap.nodes.empty()) diags.report(DiagCode::NodeUnknown, {}, "", "", "--node all: the snapshot has no Node objects");
    std::vector<std::string> names;
    for (const auto& n : snap.nodes) names.push_back(n.meta.name);
    for (const auto& name : names)
      ok = select_node(&snap, name, sm, diags) && node_files(o, name, snap, true, &files, diags) && ok;
  } else if (ok) {
    auto name = proxy::resolve_node_name(snap, diags);  // --node NAME was applied as hostnameOverride
    ok = name && node_files(o, *name, snap, false, &files, diags);
  }
  diags.sort_and_dedup();
  print_diagnostics(diags, sm);
  if (!ok || diags.has_errors()) return kExitError;
  if (!compare_all(o, files)) return kExitError;
  bool markdown = o.format == "markdown";
  if (o.update) {
    if (!write_all(files)) return kExitError;
    if (o.format == "json") {
      print_json(golden_json(o, files));
      return kExitOk;
    }
    std::fputs(golden::update_text(files, markdown).c_str(), stdout);
    return kExitOk;
  }
  std::string title = "kpc golden --expect " + o.expect;
  if (o.format == "json")
    print_json(golden_json(o, files));
  else
    std::fputs((markdown ? golden::report_markdown(files, title) : golden::report_text(files, title)).c_str(), stdout);
  bool internal = false, same = true;
  for (const auto& f : files) internal |= f.internal_error, same &= f.status == Status::Equal;
  return internal ? kExitInternal : same ? kExitOk : kExitDifferent;
}

}  // namespace

void add_golden(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<GoldenOptions>();
  CLI::App* cmd = app.add_subcommand(
      "golden", "Compare the programs a snapshot compiles to with expected files, per node, back end and family "
                "(exit 0 all equal, 1 any differs or is missing, 2 error); --update rewrites them");
  cmd->add_option("inputs", o->inputs, "snapshot files or directories (one snapshot)")->required();
  cmd->add_option("--expect", o->expect,
                  "the expected files: DIR/<node>/<backend>-<family>.<ext> (iptables-ipv4.restore, "
                  "nftables-ipv6.nft, ...; fastpath: DIR/<node>/fastpath.nft)")
      ->required()
      ->type_name("DIR");
  cmd->add_flag("--update", o->update,
                "write the compiled programs to the expected files (atomically; DIR/<node>/ created as needed) and "
                "say which are new, changed or unchanged; exit 0");
  cmd->add_option("--backend", o->backends,
                  "iptables, ip6tables (= iptables, IPv6), nftables or fastpath (one file for both families); "
                  "repeatable; default: the snapshot's KubeProxyConfiguration.mode, as on a node")
      ->check(CLI::IsMember({"iptables", "ip6tables", "nftables", "fastpath"}))
      ->type_name("B");
  cmd->add_option("--family", o->families,
                  "ipv4 or ipv6; repeatable; default: every family the node has an address of")
      ->check(CLI::IsMember({"ipv4", "ipv6"}))
      ->type_name("F");
  cmd->add_option("--format", o->format,
                  "text, markdown (a table by file and Service for a PR comment), or json (kpc.dev/golden/v1)")
      ->check(CLI::IsMember({"text", "markdown", "json"}))
      ->capture_default_str();
  cmd->add_option("--diff-lines", o->diff_lines, "lines of byte diff shown per file at most")
      ->check(cli_checks::whole_number_at_least(0))  // a size_t would take -1 as 2^64-1
      ->capture_default_str();
  cmd->add_option("--kube-proxy-version", o->kube_proxy_version,
                  "the kube-proxy release whose nftables layout to write (1.33-1.35 share one)")
      ->capture_default_str();
  add_max_input_size_option(cmd, o->max_input_size);
  add_node_option(cmd, o->node,
                  "; `--node all`: every Node, each in DIR/<node>/ (default: the snapshot's node, as compile "
                  "chooses it; <node> is its name)");
  cmd->footer(
      "Examples:\n"
      "  kpc golden cluster/ --expect golden/                       the snapshot's mode, every family of its node\n"
      "  kpc golden cluster/ --expect golden/ --update              write (or refresh) the expected files\n"
      "  kpc golden cluster/ --expect golden/ --node all --backend iptables --backend nftables\n"
      "  kpc golden cluster/ --expect golden/ --backend fastpath    golden/<node>/fastpath.nft\n"
      "  kpc golden cluster/ --expect golden/ --format markdown     a PR comment: a table by file and Service\n"
      "A file that differs is shown as a byte diff (unified, capped at --diff-lines) and by Service: for\n"
      "iptables by behaviour (as kpc diff: \"shop/web:http: endpoint removed 10.244.2.6:8080\"), for nftables\n"
      "and fastpath by object (which per-service chains, sets and elements appear or disappear).\n"
      "Exit codes: 0 all equal (--update: written), 1 a file differs or is missing, 2 error (located\n"
      "diagnostics on stderr; nothing written), 3 internal error.");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace kpc::cli
