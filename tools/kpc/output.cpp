// Writing `-o PATH` without damaging what PATH is.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "compiler/support/text.h"

#include "tools/kpc/commands.h"

namespace kpc::cli {

namespace {

// Where `-o PATH` writes. A regular file — existing, new, or named through symlinks — is
// replaced atomically; anything else that exists (a device, a FIFO, a socket, an open
// descriptor under /dev/fd) is a stream the user wants written, never replaced.
struct Target {
  bool replace = false;  ///< else: write to `path` (or `own_fd`) directly
  std::string file;      ///< replace: the file the symlinks lead to (may not exist yet)
  bool exists = false;
  struct stat st {};  ///< replace + exists: its mode and owner, kept
  int own_fd = -1;    ///< /dev/fd/N, /proc/self/fd/N, /dev/stdout: this process's descriptor N
};

std::string dir_of(const std::string& p) {
  size_t i = p.rfind('/');
  return i == std::string::npos ? "." : i == 0 ? "/" : p.substr(0, i);
}
std::string base_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// /proc/PID/fd or /proc/PID/task/TID/fd (/dev/fd and /proc/self/fd lead there): its
// entries are links to open descriptors (pipes, sockets, deleted files) that must be
// written through, never replaced. *ours: the directory is this process's own.
bool is_fd_dir(const std::string& dir, bool* ours) {
  char buf[PATH_MAX];
  if (!::realpath(dir.c_str(), buf)) return false;
  std::string_view r = buf;
  if (!r.starts_with("/proc/") || !r.ends_with("/fd")) return false;
  auto parts = split(r.substr(6, r.size() - 9), '/');  // "PID" or "PID/task/TID"
  bool shaped = (parts.size() == 1 && all_digits(parts[0])) ||
                (parts.size() == 3 && all_digits(parts[0]) && parts[1] == "task" && all_digits(parts[2]));
  if (!shaped) return false;
  *ours = parts[0] == std::to_string(::getpid());
  return true;
}

// Follows path's symlinks one at a time (as open() would), stopping at a descriptor link.
bool resolve(const std::string& path, Target* t, int* err) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    bool ours = false;
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT) return *err = errno, false;
      if (is_fd_dir(dir_of(p), &ours)) return *err = EBADF, false;  // /dev/fd/N: no such descriptor
      t->replace = true;  // a new file (or a dangling symlink's target): created as open(O_CREAT) would
      t->file = p;
      return true;
    }
    if (S_ISLNK(st.st_mode)) {
      if (is_fd_dir(dir_of(p), &ours)) {
        std::string n = base_of(p);
        if (ours && all_digits(n) && n.size() < 10) t->own_fd = std::stoi(n);
        return true;
      }
      std::vector<char> buf(static_cast<size_t>(st.st_size > 0 ? st.st_size : PATH_MAX) + 1);
      ssize_t len = ::readlink(p.c_str(), buf.data(), buf.size());
      if (len < 0) return *err = errno, false;
      if (static_cast<size_t>(len) >= buf.size()) return *err = ENAMETOOLONG, false;  // changed under us
      std::string target(buf.data(), static_cast<size_t>(len));
      p = target.starts_with("/") ? target : dir_of(p) + "/" + target;
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      t->replace = true;
      t->file = p;
      t->exists = true;
      t->st = st;
    }
    return true;  // a device, FIFO, socket (or a directory: opening it fails with EISDIR)
  }
  return *err = ELOOP, false;
}

bool write_all(int fd, std::string_view text, int* err) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return *err = errno, false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

mode_t current_umask() {
  mode_t m = ::umask(0);  // the only way to read it; the tool is single-threaded here
  ::umask(m);
  return m;
}

bool write_stream(const std::string& path, const Target& t, const std::string& text, int* err) {
  if (t.own_fd >= 0) return write_all(t.own_fd, text, err);  // as `>&N`: its offset and flags
  int fd;
  do fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);  // never O_CREAT: it exists
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return *err = errno, false;
  // Only a regular file reached through another process's descriptor link is truncated;
  // devices and FIFOs have nothing to truncate (and O_TRUNC on a tty is not wanted).
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 || (*err = errno, false);
  if (ok && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0) ok = (*err = errno, false);
  ok = ok && write_all(fd, text, err);
  if (::close(fd) != 0 && ok) ok = (*err = errno, false);
  return ok;
}

// A unique sibling temp file (two runs writing one path never share it), written, synced,
// given the old file's mode and owner, then renamed over the file: readers see the old
// program or the new one, never a part, and on failure the file is untouched.
bool replace_file(const Target& t, const std::string& text, int* err) {
  std::string dir = dir_of(t.file);
  std::string tmp = dir + "/." + base_of(t.file).substr(0, 200) + ".kpc-XXXXXX";  // fits NAME_MAX
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return *err = errno, false;
  bool ok = write_all(fd, text, err);
  if (ok && ::fsync(fd) != 0) ok = (*err = errno, false);
  if (ok && t.exists && (t.st.st_uid != ::geteuid() || t.st.st_gid != ::getegid()))
    (void)::fchown(fd, t.st.st_uid, t.st.st_gid);  // best effort: only root can give a file away
  // Before chmod: chown clears set-id bits.
  mode_t mode = t.exists ? (t.st.st_mode & 07777) : (0666 & ~current_umask());
  if (ok && ::fchmod(fd, mode) != 0) ok = (*err = errno, false);
  if (::close(fd) != 0 && ok) ok = (*err = errno, false);
  if (ok && ::rename(tmp.c_str(), t.file.c_str()) != 0) ok = (*err = errno, false);
  if (!ok) {
    ::unlink(tmp.c_str());
    return false;
  }
  // The rename itself survives a crash once the directory is synced (best effort).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

bool write_error(const std::string& path, int err) {
  DiagSink sink;
  sink.report(DiagCode::WriteError, Pos{}, "", "", path + ": " + std::strerror(err));
  print_diagnostics(sink, SourceManager{});
  return false;
}

}  // namespace

bool write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) return write_error("<stdout>", errno);
    return true;
  }
  Target t;
  int err = 0;
  if (!resolve(path, &t, &err)) return write_error(path, err);
  bool ok = t.replace ? replace_file(t, text, &err) : write_stream(path, t, text, &err);
  return ok || write_error(path, err);
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
