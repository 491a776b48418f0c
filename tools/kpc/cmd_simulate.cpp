// `kpc simulate [--state SAVE] [--noflush] PROGRAM... [--backend iptables|ip6tables] [--flavor legacy|nft]`:
// applies restore programs to a state (empty, or an iptables-save dump) as the
// real iptables-restore would, and prints the result as iptables-save prints it.
// Exit 0 applied, 1 a program fails as the real tool would (its message on
// stderr, the state after the tables committed so far on stdout), 2 bad input.
//
// `kpc simulate --backend nftables [--state LIST] TRANSACTION... [--format nft|knftables]`:
// applies nft scripts (each atomically, as `nft -f`) with the nft model (verifier/nft) and
// prints the result as `nft list ruleset` (or knftables' Fake.Dump()); with --state and no
// transaction, the state itself. Exit 0 applied,
// 2 a transaction fails (nft's error, naming the file) or bad input.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "compiler/driver/capabilities.h"
#include "compiler/driver/input_kind.h"
#include "tools/kpc/commands.h"
#include "verifier/nft/nft.h"
#include "verifier/state/state.h"

namespace kpc::cli {
namespace {

struct SimulateOptions {
  std::string state_file;
  std::vector<std::string> programs;
  bool noflush = false;
  std::string backend = "iptables";
  std::string flavor = "legacy";
  uint64_t max_input_size = kDefaultMaxInputSize;
  std::string format;          ///< nftables: nft (default) or knftables
  std::string family = "ipv4"; ///< nftables, --format knftables: the table's family
  std::string table = "kube-proxy";
  std::string output;
  bool handles = false;
};

std::string chomp(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// --format json: kpc.dev/simulate/v1 — the resulting state's text (as the text format prints it:
// iptables-save, or `nft list ruleset`), whether every program applied, the failure if one did not.
bool emit_state(const SimulateOptions& o, const std::string& state, const nlohmann::ordered_json* failure) {
  auto j = json_document("simulate");
  j["backend"] = o.backend;
  j["applied"] = failure == nullptr;
  j["failure"] = failure ? *failure : nlohmann::ordered_json(nullptr);
  bool to_stdout = o.output.empty() || o.output == "-";
  if (!to_stdout && !write_output(o.output, state)) return false;
  j["output"] = to_stdout ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.output);
  j["state"] = to_stdout ? nlohmann::ordered_json(state) : nlohmann::ordered_json(nullptr);
  print_json(std::move(j));
  return true;
}

// --backend nftables: the nft model. Every transaction is applied atomically; the first
// that fails stops the run (exit 2) with nft's messages.
int run_nftables(const SimulateOptions& o) {
  namespace nft = verifier::nft;
  nft::NftState state;
  InputError err;
  if (!o.state_file.empty()) {
    InputText text;
    if (!text.load(o.state_file, o.max_input_size, &err)) {
      print_input_error(err);
      return kExitError;
    }
    if (nft::looks_like_listing(text.view())) {
      nft::NftError e;
      if (!nft::parse_listing(text.view(), o.state_file, &state, &e)) {
        print_error("kpc simulate: " + o.state_file + ": not a loadable nft listing:\n" + chomp(e.render()));
        return kExitError;
      }
    } else {
      nft::ApplyResult r = nft::apply_script(state, text.view(), o.state_file);
      if (!r.ok) {
        std::string msg = "kpc simulate: " + o.state_file + ": the state script fails:";
        for (const auto& e : r.errors) msg += "\n" + chomp(e.render());
        print_error(msg);
        return kExitError;
      }
    }
  }
  std::vector<std::unique_ptr<InputText>> files;
  for (const auto& path : o.programs) {
    files.push_back(std::make_unique<InputText>());
    if (!files.back()->load(path, o.max_input_size, &err)) {
      print_input_error(err);
      return kExitError;
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    nft::ApplyResult r = nft::apply_script(state, files[i]->view(), o.programs[i]);
    if (!r.ok) {
      std::string msg = "kpc simulate: " + o.programs[i] +
                        (r.not_modelled() ? ": kpc cannot say what nft does with this transaction:"
                                          : ": the transaction fails (nothing of it is applied):");
      for (const auto& e : r.errors) msg += "\n" + chomp(e.render());
      print_error(msg);
      return kExitError;
    }
  }
  std::string out;
  if (o.format == "knftables") {
    out = nft::print_knftables_dump(state, o.family == "ipv6" ? nft::Family::Ip6 : nft::Family::Ip, o.table);
  } else {
    nft::PrintOptions po;
    po.handles = o.handles;
    out = nft::print_ruleset(state, po);
  }
  if (o.format == "json") return emit_state(o, out, nullptr) ? kExitOk : kExitError;
  return write_output(o.output, out) ? kExitOk : kExitError;
}

// The mode, decided once (compiler/driver/input_kind.h): --backend, else the content of the
// state and the programs (an empty one takes the others' mode), else iptables. False with the
// reason printed.
bool decide_mode(SimulateOptions& o, bool backend_given, bool flavor_given) {
  std::vector<InputEvidence> inputs;
  std::vector<std::string> paths = o.programs;
  if (!o.state_file.empty()) paths.insert(paths.begin(), o.state_file);
  for (const auto& path : paths) {
    InputEvidence ev;
    InputError ie;
    if (!classify_input(path, o.max_input_size, &ev, &ie)) {
      print_input_error(ie);
      return false;
    }
    if (ev.kind == InputKind::Snapshot || ev.kind == InputKind::IpvsProgramSet) {
      print_error((ev.kind == InputKind::Snapshot ? refusal("simulate", "any", kSnapshotDir)
                                                  : refusal("simulate", "ipvs", kProgram)) +
                  "\n  " + ev.where() + " is " + input_kind_phrase(ev.kind));
      return false;
    }
    inputs.push_back(std::move(ev));
  }
  ModeDecision d;
  if (!resolve_command_mode("kpc simulate", o.backend, backend_given, &o.flavor, flavor_given, std::move(inputs), false,
                            &d))
    return false;
  if (d.mode == BackendKind::NFTables) o.backend = "nftables";
  else if (o.backend == "nftables") o.backend = "iptables";
  return true;
}

int run(SimulateOptions& o, bool backend_given, bool flavor_given) {
  if (o.programs.empty() && o.state_file.empty()) {
    print_error("kpc simulate: give programs to apply, or --state to print it");
    return kExitError;
  }
  if (!decide_mode(o, backend_given, flavor_given)) return kExitError;
  if (o.backend == "nftables") return run_nftables(o);
  if ((!o.format.empty() && o.format != "json") || (!o.output.empty() && o.format != "json") || o.handles) {
    print_error("kpc simulate: --format nft|knftables, --handles, and -o without --format json are for --backend "
                "nftables");
    return kExitError;
  }
  IPFamily family = o.backend == "ip6tables" ? IPFamily::V6 : IPFamily::V4;
  verifier::Flavor flavor = o.flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  SourceManager sm;
  DiagSink diags;
  verifier::RulesetState state = verifier::RulesetState::empty(family);
  InputError err;
  if (!o.state_file.empty()) {
    InputText text;
    std::string load_err;
    if (!text.load(o.state_file, o.max_input_size, &err)) {
      print_input_error(err);
      return kExitError;
    }
    if (!verifier::load_save(text.view(), family, flavor, state, &load_err, state.store)) {
      print_error("kpc simulate: " + o.state_file + ": not a loadable iptables-save dump: " + load_err);
      return kExitError;
    }
  }
  // Read every program first (each size-checked before it is read): unreadable or
  // oversized input is an error (2), not a failed restore (1).
  std::vector<std::unique_ptr<InputText>> files;
  for (const auto& path : o.programs) {
    files.push_back(std::make_unique<InputText>());
    if (!files.back()->load(path, o.max_input_size, &err)) {
      print_input_error(err);
      return kExitError;
    }
  }
  verifier::ApplyOptions ao;
  ao.noflush = o.noflush;
  ao.flavor = flavor;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string_view text = files[i]->view();
    verifier::ParseError perr;
    perr.line = 0;
    verifier::ApplyResult r = verifier::apply_text(state, text, ao, &perr);
    if (perr.line && perr.kind == verifier::ParseErrorKind::Unsupported) {
      // Valid for iptables, but kpc cannot say what it does: not a verdict either way.
      uint32_t file = sm.add(o.programs[i], std::string(text));
      diags.report(DiagCode::RestoreSyntax, Pos{file, perr.line, perr.col ? perr.col : 1}, "", "",
                   "not modelled by kpc: " + perr.message);
      print_diagnostics(diags, sm);
      return kExitError;
    }
    if (!r.ok()) {
      std::fputs(r.error->message.c_str(), stderr);
      print_error(o.programs[i] + ":" + std::to_string(r.error->line) + ": error[E0900]: " + r.error->reason + " (" +
                  verifier::error_class_name(r.error->cls) + ")");
      if (o.format == "json") {
        nlohmann::ordered_json f = {{"program", o.programs[i]},
                                    {"line", r.error->line},
                                    {"reason", r.error->reason},
                                    {"class", verifier::error_class_name(r.error->cls)},
                                    {"message", r.error->message}};
        return emit_state(o, verifier::print_save(state, flavor), &f) ? kExitDifferent : kExitError;
      }
      std::fputs(verifier::print_save(state, flavor).c_str(), stdout);
      return kExitDifferent;
    }
  }
  if (o.format == "json") return emit_state(o, verifier::print_save(state, flavor), nullptr) ? kExitOk : kExitError;
  std::fputs(verifier::print_save(state, flavor).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_simulate(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Apply restore programs as iptables-restore would and print the result as iptables-save would "
                  "(exit 0 applied, 1 a program fails, 2 bad input)");
  cmd->add_option("programs", opts->programs,
                  "restore programs (nftables: nft transactions), applied in order ('-' for stdin); with "
                  "--backend nftables and --state, none prints the state as nft lists it");
  cmd->add_option("--state", opts->state_file,
                  "starting state: an iptables-save dump (nftables: `nft list ruleset` output, or a script "
                  "applied to an empty node) (default: empty)");
  cmd->add_flag("--noflush", opts->noflush, "as iptables-restore --noflush (kube-proxy always uses it)");
  cmd->add_option("--backend", opts->backend,
                  "iptables, ip6tables or nftables (nft -f transactions, nft 1.0.6 semantics)")
      ->check(CLI::IsMember({"iptables", "ip6tables", "nftables"}))
      ->capture_default_str();
  cmd->add_option("--format", opts->format,
                  "nftables: nft (as `nft list ruleset` prints the result, the default) or knftables (knftables' "
                  "Fake.Dump() of --family's --table, as kube-proxy's unit tests compare); any back end: json "
                  "(kpc.dev/simulate/v1: the resulting state as nft or iptables-save prints it, the failure, "
                  "diagnostics)")
      ->check(CLI::IsMember({"nft", "knftables", "json"}));
  cmd->add_option("--family", opts->family, "nftables, --format knftables: ipv4 (table ip) or ipv6 (table ip6)")
      ->check(CLI::IsMember({"ipv4", "ipv6"}))
      ->capture_default_str();
  cmd->add_option("--table", opts->table, "nftables, --format knftables: the table to dump")->capture_default_str();
  cmd->add_flag("--handles", opts->handles, "nftables: print handles, as `nft -a list ruleset`");
  cmd->add_option("-o,--output", opts->output,
                  "nftables (or --format json): write the result here (a file is replaced atomically; default stdout)");
  add_flavor_option(cmd, opts->flavor, "legacy (iptables-legacy-restore) or nft (iptables-nft-restore)");
  add_max_input_size_option(cmd, opts->max_input_size);
  cmd->footer(
      "Examples:\n"
      "  kpc simulate --noflush full.restore partial.restore      what the node holds after both\n"
      "  kpc simulate --state node.save --noflush repair.restore --flavor nft\n"
      "  kpc simulate --backend nftables --state ruleset.nft sync1.nft sync2.nft   nft -f of each, in order\n"
      "  kpc simulate --backend nftables tx.nft --format knftables     kube-proxy's unit-test dump\n"
      "  kpc simulate --backend nftables --state ruleset.nft --handles  the state re-printed (nft -a list ruleset)\n"
      "  kpc simulate --noflush full.restore --format json        the state and any failure as JSON\n"
      "Exit codes: 0 applied, 1 a program fails (the state committed so far is printed), 2 bad input;\n"
      "  with --backend nftables: 0 applied, 2 a transaction fails (nft's errors on stderr) or bad input.");
  cmd->callback([cmd, opts, &exit_code] {
    exit_code = run(*opts, cmd->count("--backend") > 0, cmd->count("--flavor") > 0);
  });
}

}  // namespace kpc::cli
