// `kpc diff OLD NEW`: a behavioural diff of two rule sets (pre-upgrade checks).
// Each side is a rule file (iptables-save dump or restore program) or a snapshot
// (YAML/JSON file or directory), which is compiled first. Chain names, comments,
// counters and the order of rules that match disjoint traffic do not count; any
// packet class whose outcome changes does, reported by service with a witness.
// Exit 0 equivalent, 1 differences (or classes kpc cannot decide), 2 error.
#include <cstdio>
#include <filesystem>
#include <thread>

#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "tools/kpc/commands.h"
#include "verifier/symbolic/report.h"
#include "verifier/trace/tracer.h"

namespace kpc::cli {
namespace {

struct DiffOptions {
  std::string old_input, new_input;
  std::string backend = "iptables";
  std::string flavor = "legacy";
  std::string format = "text";
  std::vector<std::string> local_addresses;
  std::string jumps = "auto";
  bool all_atoms = false;
  uint64_t max_input_size = kDefaultMaxInputSize;  ///< every input: rule files and snapshots
  bool backend_given = false;
};

// A rule file's first line that is not blank or a comment starts a table ("*nat"). A text
// with no such line is an empty rule set (what iptables-save prints on a node without
// tables); as a snapshot it could never compile (no node).
bool looks_like_rules(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t e = text.find('\n', i);
    std::string_view line(text.data() + i, (e == std::string::npos ? text.size() : e) - i);
    i = e == std::string::npos ? text.size() : e + 1;
    if (line.empty() || line[0] == '#') continue;
    return line[0] == '*';
  }
  return true;
}

// One side as given: a directory (a snapshot), or a file read once — size-checked before
// it is read, mapped if regular — and told apart by its first line. Reading it once is
// what lets a side be a pipe (`kpc diff <(iptables-save) new.restore`).
struct Side {
  std::string path;
  bool directory = false;
  bool rules = false;
  InputText text;
};

bool open_side(const std::string& path, uint64_t limit, Side* side) {
  side->path = path;
  std::error_code ec;
  side->directory = path != "-" && std::filesystem::is_directory(path, ec);
  if (side->directory) return true;
  InputError err;
  if (!side->text.load(path, limit, &err)) {
    std::fprintf(stderr, "%s\n", render(err).c_str());
    return false;
  }
  side->rules = looks_like_rules(side->text.view());
  return true;
}

// One side's state and, for snapshots, the node's addresses.
bool read_side(Side& side, const DiffOptions& o, verifier::RulesetState* out, std::vector<IPAddr>* local,
               std::string* label, std::shared_ptr<verifier::RuleStore> store = nullptr) {
  Backend backend = *backend_from_name(o.backend);
  IPFamily family = backend_family(backend);
  auto flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  *label = side.path;
  if (side.rules) {
    std::string error;
    if (!read_state_text(side.text.view(), side.path, family, flavor, out, &error, store)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return false;
    }
    return true;
  }
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  LoadOptions lo;
  lo.max_input_size = o.max_input_size;
  bool ok = false;
  if (side.directory) {
    ok = load_snapshot({side.path}, lo, sm, &snap, diags);
  } else {
    std::string name = side.path == "-" ? "<stdin>" : side.path;
    std::vector<std::pair<std::string, std::string>> files{{name, std::string(side.text.view())}};
    side.text.reset();  // the loader keeps its own copy
    ok = load_snapshot_text(files, lo, sm, &snap, diags);
  }
  std::optional<CompileResult> c;
  if (ok) ok = check_configured_mode(snap, o.backend_given, backend, diags);
  if (ok) c = compile_iptables(snap, backend, {}, diags);
  if (c) append_node_addresses(snap, family, local);
  diags.sort_and_dedup();
  std::fputs(diags.render(sm).c_str(), stderr);
  if (!c) return false;
  *out = verifier::RulesetState::empty(family);
  verifier::ApplyOptions ao;
  ao.noflush = true;
  ao.flavor = flavor;
  if (auto res = verifier::apply_text(*out, c->text, ao); !res.ok()) {
    std::fprintf(stderr, "internal error: the compiled program fails: %s\n", res.error->reason.c_str());
    return false;
  }
  return true;
}

int run(const DiffOptions& o) {
  verifier::RulesetState before, after;
  std::vector<IPAddr> local;
  std::string lb, la;
  std::vector<IPAddr> local_new;
  bool ok_new = false, ok_old = false;
  Side old_side, new_side;
  bool opened_old = open_side(o.old_input, o.max_input_size, &old_side);  // both, to report both
  bool opened_new = open_side(o.new_input, o.max_input_size, &new_side);
  if (!opened_old || !opened_new) return kExitError;
  if (old_side.rules && new_side.rules) {
    // Two rule files share most of their lines: one store, read one after the other,
    // so the new side's lines are known from the old side (and rules compare by id).
    // Reading a large file parses on two threads already (apply_text).
    auto store = std::make_shared<verifier::RuleStore>();
    ok_old = read_side(old_side, o, &before, &local, &lb, store);
    ok_new = read_side(new_side, o, &after, &local_new, &la, store);
  } else {
    // Snapshots are compiled first: the two sides are independent, read on two threads.
    std::thread reader([&] { ok_new = read_side(new_side, o, &after, &local_new, &la); });
    ok_old = read_side(old_side, o, &before, &local, &lb);
    reader.join();
  }
  if (!ok_old || !ok_new) return kExitError;
  local.insert(local.end(), local_new.begin(), local_new.end());
  if (!choose_local_addresses(o.local_addresses, local, before.family, "diff", &local)) return kExitError;
  for (auto* st : {&before, &after}) {
    bool add = o.jumps == "yes" || (o.jumps == "auto" && verifier::trace::builtin_chains_empty(*st));
    std::string err;
    if (add && !verifier::trace::add_kube_proxy_jumps(*st, &err)) {
      std::fprintf(stderr, "kpc diff: cannot add kube-proxy's jumps: %s\n", err.c_str());
      return kExitError;
    }
  }
  verifier::symbolic::CompareOptions co;
  co.local_addresses = local;
  co.explore_all = o.all_atoms;
  auto r = verifier::symbolic::compare_states(before, after, co);
  verifier::symbolic::ReportOptions ro;
  ro.before_name = "old";
  ro.after_name = "new";
  std::string report = o.format == "json" ? verifier::symbolic::diff_json(r, ro) : verifier::symbolic::diff_text(r, ro);
  if (o.format == "text") {
    std::string head = "kpc diff " + lb + " -> " + la + " (" + o.backend + ", local addresses:";
    for (const auto& a : local) head += " " + a.str();
    report = head + ")\n" + report;
  }
  std::fputs(report.c_str(), stdout);
  if (!r.self_check_failures.empty()) return kExitInternal;
  return r.equivalent() ? kExitOk : kExitDifferent;
}

}  // namespace

void add_diff(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "Behavioural diff of two rule sets or snapshots: packet classes whose outcome changes, by service "
              "(exit 0 equivalent, 1 differences, 2 error)");
  cmd->add_option("old", o->old_input,
                  "the old side: a rule file (save dump / restore program), or a snapshot file or directory")
      ->required();
  cmd->add_option("new", o->new_input, "the new side")->required();
  add_backend_option(cmd, o->backend);
  add_flavor_option(cmd, o->flavor, "legacy or nft restore semantics for rule files");
  add_format_option(cmd, o->format);
  cmd->add_option("--local-address", o->local_addresses,
                  "the node's addresses (default: the snapshots' node addresses, else one address no rule names)");
  cmd->add_option("--jumps", o->jumps,
                  "add kube-proxy's jumps from the built-in chains: auto (when a side has none), yes, no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  cmd->add_flag("--all-atoms", o->all_atoms, "explore every destination class (skip the semantic-hash narrowing)");
  add_max_input_size_option(cmd, o->max_input_size);
  cmd->callback([cmd, o, &exit_code] {
    o->backend_given = cmd->count("--backend") > 0;
    exit_code = run(*o);
  });
}

}  // namespace kpc::cli
