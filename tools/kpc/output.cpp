#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>

#include "tools/kpc/commands.h"

namespace kpc::cli {

std::string read_text_file(const std::string& path) {
  if (path == "-") return std::string((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  // Rule files are tens of megabytes: read a regular file straight into a buffer of its
  // size (no regrowth copies), then whole blocks for whatever else there is (pipes, growth).
  std::string text;
  std::error_code ec;
  if (auto size = std::filesystem::file_size(path, ec); !ec && size > 0) {
    text.resize(size);
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<size_t>(in.gcount()));
  }
  char block[1 << 16];
  while (in && (in.read(block, sizeof block) || in.gcount() > 0)) text.append(block, static_cast<size_t>(in.gcount()));
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return text;
}

InputText::InputText(const std::string& path) {
  if (path != "-") {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(path + ": cannot open");
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      // MAP_POPULATE: the file is read from start to end at once, so map every page now
      // (one call instead of a fault per page). A file truncated while kpc reads it can
      // end the process with SIGBUS, as with any tool that maps its input (grep, ld).
      void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (p != MAP_FAILED) {
        map_ = p;
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    ::close(fd);
    if (map_) return;
  }
  owned_ = read_text_file(path);  // stdin, a pipe, an empty or special file, or mmap failed
}

InputText::~InputText() {
  if (map_) ::munmap(map_, size_);
}

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
