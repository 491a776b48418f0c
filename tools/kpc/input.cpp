// Reading inputs in the tool: every rule file and node state goes through InputText,
// every snapshot through the loader, both bounded by the one --max-input-size.
#include <sys/mman.h>

#include <cstdlib>

#include "compiler/driver/capabilities.h"
#include "compiler/driver/input_kind.h"
#include "tools/kpc/commands.h"

namespace kpc::cli {

bool InputText::load(const std::string& path, uint64_t limit, InputError* err) {
  reset();
  InputFd in;
  if (!InputFd::open(path, limit, &in, err)) return false;  // a regular file over the limit: refused unread
  if (in.mappable() && in.size() > 0) {
    // MAP_POPULATE: the file is read from start to end at once, so map every page now
    // (one call instead of a fault per page). A file truncated while kpc reads it can
    // end the process with SIGBUS, as with any tool that maps its input (grep, ld).
    void* p = ::mmap(nullptr, static_cast<size_t>(in.size()), PROT_READ, MAP_PRIVATE | MAP_POPULATE, in.fd(), 0);
    if (p != MAP_FAILED) {
      map_ = p;
      size_ = static_cast<size_t>(in.size());
      return true;
    }
  }
  return in.read_shared(&owned_, err);  // stdin, a pipe, a FIFO, a device, an empty file, or mmap failed
}

void InputText::reset() {
  if (map_) ::munmap(map_, size_);
  map_ = nullptr;
  size_ = 0;
  owned_.reset();
}

namespace {

std::string not_a_size(const std::string& s) {
  return "not a size: '" + s + "' (bytes, or with a suffix: K, M, G, T or KiB, MiB, ... (x1024), KB, MB, ... (x1000))";
}

}  // namespace

CLI::Option* add_max_input_size_option(CLI::App* cmd, uint64_t& limit) {
  limit = kDefaultMaxInputSize;
  CLI::Validator size([](std::string& s) -> std::string {
    auto n = parse_byte_size(s);
    if (!n) return not_a_size(s);
    s = std::to_string(*n);
    return {};
  }, "SIZE");
  CLI::Option* flag =
      cmd->add_option("--max-input-size", limit,
                      std::string("largest accepted input file (snapshots, rule files, states), checked before it is "
                                  "read; default: $") + kMaxInputSizeEnv + ", else 256MiB")
          ->transform(size);
  // The environment only when the flag is absent (CLI11's envname would also read it for
  // every other subcommand, and fail on a bad value there). This runs once the command's
  // own arguments are parsed, before its callback: a bad value is a usage error (exit 2).
  cmd->parse_complete_callback([flag, &limit] {
    const char* env = std::getenv(kMaxInputSizeEnv);
    if (flag->count() || !env || !*env) return;
    auto n = parse_byte_size(env);
    if (!n) throw CLI::ValidationError(kMaxInputSizeEnv, not_a_size(env));
    limit = *n;
  });
  return flag;
}

bool resolve_command_mode(const std::string& command, const std::string& backend, bool backend_given,
                          std::string* flavor, bool flavor_given, std::vector<InputEvidence> inputs,
                          bool mixed_allowed, ModeDecision* out) {
  ModeRequest mr;
  mr.command = command;
  if (backend_given) {
    mr.flag = backend == "nftables" ? BackendKind::NFTables
              : backend == "ipvs"   ? BackendKind::IPVS
                                    : BackendKind::IPTables;
    mr.flag_text = "--backend " + backend;
  }
  if (flavor_given) mr.flavor_flag = *flavor == "nft";
  mr.inputs = std::move(inputs);
  mr.mixed_allowed = mixed_allowed;
  std::string error;
  if (!resolve_mode(mr, out, &error)) {
    print_error(error);
    return false;
  }
  if (!flavor_given && out->iptables_nft_flavor) *flavor = "nft";
  return true;
}

bool refuse_non_snapshots(const char* command, const std::vector<std::string>& inputs, uint64_t limit) {
  for (const auto& path : inputs) {
    InputEvidence ev;
    InputError ie;
    if (!classify_input(path, limit, &ev, &ie)) continue;  // the loader reports what it cannot read
    if (ev.kind == InputKind::Snapshot || ev.kind == InputKind::Empty) continue;
    std::string why = refusal(command, "any", ev.listing ? kNodeState : kProgram);
    if (why.empty()) continue;
    print_error(why + "\n  " + ev.where() + " is " + input_kind_phrase(ev.kind));
    return true;
  }
  return false;
}

CLI::Option* add_node_option(CLI::App* cmd, std::string& node, const char* all_help) {
  return cmd->add_option("--node", node,
                         std::string("compile for this Node of the snapshot, as kube-proxy's --hostname-override "
                                     "(replaces KubeProxyConfiguration.hostnameOverride; an unknown name is an error "
                                     "listing the snapshot's Nodes)") +
                             all_help)
      ->type_name("NAME");
}

}  // namespace kpc::cli
