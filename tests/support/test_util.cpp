#include "tests/support/test_util.h"

#include <algorithm>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kpc::test {

std::string source_path(const std::string& relative) { return std::string(KPC_SOURCE_DIR) + "/" + relative; }
std::string bin_path(const std::string& name) { return std::string(KPC_BIN_DIR) + "/" + name; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("kpc-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

CommandResult run(const std::vector<std::string>& argv, const std::string& stdin_text) {
  int in[2], out[2], err[2];
  // Close-on-exec: another test thread may start a process at the same moment (a long-running
  // kpc-applier), which would otherwise inherit these ends and keep this one's outputs open
  // forever (the ASan run of ApplierInProcess.ApplierConvergesOnAWatchedDirectory hung so).
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0), dup2(out[1], 1), dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(in[0]), close(out[1]), close(err[1]);
  CommandResult r;
  // Feed stdin and drain both outputs together so that no pipe fills up and blocks.
  size_t written = 0;
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  if (stdin_text.empty()) close(in[1]), in[1] = -1;
  bool out_open = true, err_open = true;
  char buf[1 << 16];
  while (out_open || err_open) {
    pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
    if (!out_open) fds[0].fd = -1;
    if (!err_open) fds[1].fd = -1;
    poll(fds, 3, -1);
    if (in[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = write(in[1], stdin_text.data() + written, stdin_text.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 || written == stdin_text.size()) close(in[1]), in[1] = -1;
    }
    for (int k = 0; k < 2; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n <= 0) {
        (k == 0 ? out_open : err_open) = false;
        continue;
      }
      (k == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
    }
  }
  if (in[1] >= 0) close(in[1]);
  close(out[0]), close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string first_difference(const std::string& a, const std::string& b, const std::string& a_label,
                             const std::string& b_label, size_t width) {
  if (a == b) return "";
  size_t at = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
  size_t from = a.rfind('\n', at == 0 ? 0 : at - 1);
  from = from == std::string::npos ? 0 : from + 1;
  std::string pad(std::max(a_label.size(), b_label.size()), ' ');
  return "differ at byte " + std::to_string(at) + "\n " + a_label + ": " + pad.substr(a_label.size()) +
         a.substr(from, width) + "\n " + b_label + ": " + pad.substr(b_label.size()) + b.substr(from, width);
}

}  // namespace kpc::test
