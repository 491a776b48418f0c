#include "applier/node/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <tuple>

extern char** environ;

namespace kpc::applier {

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdin_text) {
  return run_process(argv, stdin_text, ProcessOptions{});
}

namespace {

// environ with `extra` ("NAME=value") added; an entry of the same NAME is replaced.
std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  auto name_of = [](std::string_view e) { return e.substr(0, e.find('=')); };
  for (char** e = environ; e && *e; ++e) {
    std::string_view cur(*e);
    bool replaced = false;
    for (const auto& x : extra) replaced = replaced || name_of(x) == name_of(cur);
    if (!replaced) env.emplace_back(cur);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace

TimedProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdin_text,
                               const ProcessOptions& options) {
  TimedProcessResult r;
  if (argv.empty()) return r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  // A tool that quits before reading all its input must not kill the applier (EPIPE instead).
  static const bool sigpipe_ignored = (::signal(SIGPIPE, SIG_IGN), true);
  (void)sigpipe_ignored;
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return r;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return r;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_text;
  std::vector<char*> envp;
  if (!options.extra_env.empty()) {
    env_text = merged_environment(options.extra_env);
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.empty() ? environ : envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]), close(out[1]), close(err[1]);
  if (rc != 0) {
    close(in[1]), close(out[0]), close(err[0]);
    r.err = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  // Feed stdin and drain both outputs together (no deadlock on large programs).
  fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
  size_t written = 0;
  int in_fd = in[1];
  if (stdin_text.empty()) close(in_fd), in_fd = -1;
  int out_fd = out[0], err_fd = err[0];
  char buf[65536];
  while (out_fd >= 0 || err_fd >= 0 || in_fd >= 0) {
    pollfd p[3];
    int n = 0;
    int idx_in = -1, idx_out = -1, idx_err = -1;
    if (in_fd >= 0) idx_in = n, p[n++] = {in_fd, POLLOUT, 0};
    if (out_fd >= 0) idx_out = n, p[n++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) idx_err = n, p[n++] = {err_fd, POLLIN, 0};
    int wait_ms = -1;
    if (options.timeout_ms > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 && !r.timed_out) {
        // Too slow: kill it; its pipes close and the loop drains what it wrote.
        ::kill(pid, SIGKILL);
        r.timed_out = true;
      }
      wait_ms = r.timed_out ? -1 : static_cast<int>(left.count());
    }
    int ready = poll(p, n, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0) continue;  // the deadline: checked at the top
    if (idx_in >= 0 && p[idx_in].revents) {
      ssize_t w = write(in_fd, stdin_text.data() + written, stdin_text.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) written = stdin_text.size();  // EPIPE: the tool quit
      if (written >= stdin_text.size()) close(in_fd), in_fd = -1;
    }
    struct Out {
      int idx;
      int* fd;
      std::string* dst;
    };
    for (Out o : {Out{idx_out, &out_fd, &r.out}, Out{idx_err, &err_fd, &r.err}}) {
      int idx = o.idx;
      int* fd = o.fd;
      std::string* dst = o.dst;
      if (idx < 0 || !p[idx].revents) continue;
      ssize_t got = read(*fd, buf, sizeof buf);
      if (got > 0) dst->append(buf, static_cast<size_t>(got));
      else if (got == 0 || (errno != EINTR && errno != EAGAIN)) close(*fd), *fd = -1;
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // A tool killed by a signal (a supervisor's SIGTERM reaching the process group, the OOM
  // killer) writes nothing: say so, or the sync's error would be empty.
  if (WIFSIGNALED(status)) r.err += (r.err.empty() || r.err.back() == '\n' ? "" : "\n") + argv[0] + " killed by signal " + std::to_string(WTERMSIG(status));
  return r;
}

bool program_exists(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/sbin:/usr/bin:/sbin:/bin";
  for (size_t b = 0;;) {
    size_t e = p.find(':', b);
    std::string dir = p.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    if (e == std::string::npos) return false;
    b = e + 1;
  }
}

}  // namespace kpc::applier
