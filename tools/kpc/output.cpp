#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tools/kpc/commands.h"

namespace kpc::cli {

bool write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0;
  }
  // Write a sibling temp file and rename it: readers never see a partial program,
  // and on any failure the target is left untouched.
  std::string tmp = path + ".kpc-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out.flush()) {
      std::fprintf(stderr, "error[E0001]: %s: cannot write\n", tmp.c_str());
      std::filesystem::remove(tmp);
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::fprintf(stderr, "error[E0001]: %s: %s\n", path.c_str(), ec.message().c_str());
    std::filesystem::remove(tmp);
    return false;
  }
  return true;
}

void print_stats(const iptables::SyncResult& r, size_t bytes) {
  std::fprintf(stderr, "chains written: %zu, chains deleted: %zu, rules: %zu, bytes: %zu, endpoints: %zu%s\n",
               r.chains_written, r.deleted_chains, r.rules_written, bytes, r.total_endpoints,
               r.large_cluster ? " (large-cluster mode)" : "");
}

CLI::Option* add_backend_option(CLI::App* cmd, std::string& backend, const char* help) {
  return cmd->add_option("--backend", backend, help)->check(CLI::IsMember({"iptables", "ip6tables"}))->capture_default_str();
}

CLI::Option* add_flavor_option(CLI::App* cmd, std::string& flavor, const char* help) {
  return cmd->add_option("--flavor", flavor, help)->check(CLI::IsMember({"legacy", "nft"}))->capture_default_str();
}

CLI::Option* add_format_option(CLI::App* cmd, std::string& format) {
  return cmd->add_option("--format", format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
}

}  // namespace kpc::cli
