// Helpers shared by the loader/doc/names/net/diag unit tests (header only). In their own
// namespace so they never collide with tests/support/test_util.h (kpc::test).
#pragma once

#include <gtest/gtest.h>

#include <iterator>
#include <stdexcept>

#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/model/loader.h"
#include "compiler/support/diag.h"
#include "tests/support/test_util.h"

namespace kpc::loadtest {

/// The result of one load: keeps the SourceManager alive for rendering.
struct Loaded {
  SourceManager sm;
  Snapshot snap;
  DiagSink diags;
  bool ok = false;

  std::string rendered() const { return diags.render(sm); }
  std::vector<const Diagnostic*> with(DiagCode code) const {
    std::vector<const Diagnostic*> out;
    for (const auto& d : diags.all())
      if (d.code == code) out.push_back(&d);
    return out;
  }
  const Diagnostic* first(DiagCode code) const {
    auto v = with(code);
    return v.empty() ? nullptr : v.front();
  }
  const Diagnostic* find(DiagCode code, std::string_view path) const {
    for (const auto& d : diags.all())
      if (d.code == code && d.path == path) return &d;
    return nullptr;
  }
  std::vector<std::string> codes() const {
    std::vector<std::string> out;
    for (const auto& d : diags.all()) out.emplace_back(diag_info(d.code).code);
    return out;
  }
};

inline Loaded load_files(std::vector<std::pair<std::string, std::string>> files, LoadOptions opts = {}) {
  Loaded l;
  l.ok = load_snapshot_text(files, opts, l.sm, &l.snap, l.diags);
  return l;
}
inline Loaded load_yaml(std::string text, std::string name = "in.yaml") {
  return load_files({{std::move(name), std::move(text)}});
}
inline Loaded load_json(std::string text, std::string name = "in.json") {
  return load_files({{std::move(name), std::move(text)}});
}
inline Loaded load_paths(const std::vector<std::string>& paths, LoadOptions opts = {}) {
  Loaded l;
  l.ok = load_snapshot(paths, opts, l.sm, &l.snap, l.diags);
  return l;
}

/// 1-based line/column of the nth (0-based) occurrence of needle in text; {0,0} if absent.
inline std::pair<uint32_t, uint32_t> line_col(std::string_view text, std::string_view needle, int nth = 0) {
  size_t at = std::string_view::npos, from = 0;
  for (int k = 0; k <= nth; ++k) {
    at = text.find(needle, from);
    if (at == std::string_view::npos) return {0, 0};
    from = at + 1;
  }
  uint32_t line = 1, col = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return {line, col};
}

/// Pos in file 1 of the nth occurrence of needle.
inline Pos pos_of(std::string_view text, std::string_view needle, int nth = 0, uint32_t file = 1) {
  auto [l, c] = line_col(text, needle, nth);
  return Pos{file, l, c};
}

/// Pos just after the nth occurrence of prefix (where the value following "key: " starts).
inline Pos pos_after(std::string_view text, std::string_view prefix, int nth = 0, uint32_t file = 1) {
  Pos p = pos_of(text, prefix, nth, file);
  p.col += static_cast<uint32_t>(prefix.size());
  return p;
}

inline std::string pos_str(Pos p) {
  return std::to_string(p.file) + ":" + std::to_string(p.line) + ":" + std::to_string(p.col);
}

/// Asserts that a diagnostic with code+path exists, and checks its object and position.
inline ::testing::AssertionResult has_diag(const Loaded& l, DiagCode code, std::string_view object,
                                           std::string_view path, Pos pos) {
  for (const auto& d : l.diags.all()) {
    if (d.code != code || d.path != path) continue;
    if (d.object != object)
      return ::testing::AssertionFailure() << diag_info(code).code << " at " << path << ": object is \"" << d.object
                                           << "\", expected \"" << object << "\"\n"
                                           << l.rendered();
    if (d.pos != pos)
      return ::testing::AssertionFailure() << diag_info(code).code << " at " << path << ": position is "
                                           << pos_str(d.pos) << ", expected " << pos_str(pos) << "\n"
                                           << l.rendered();
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no " << diag_info(code).code << " with path \"" << path << "\"; got:\n"
                                       << l.rendered();
}

/// True iff every error diagnostic has a known position inside a registered file.
inline ::testing::AssertionResult all_errors_located(const Loaded& l) {
  for (const auto& d : l.diags.all()) {
    if (is_warning(d.code)) continue;
    if (!d.pos.known() || d.pos.file > l.sm.size() || d.pos.line == 0 || d.pos.col == 0)
      return ::testing::AssertionFailure() << "unlocated " << diag_info(d.code).code << ": " << render(d, l.sm);
  }
  return ::testing::AssertionSuccess();
}

/// A minimal valid Service document; extra spec lines are indented by the caller.
inline std::string service_yaml(std::string_view name, std::string_view ns, std::string_view spec_body) {
  return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + std::string(name) + "\n  namespace: " +
         std::string(ns) + "\nspec:\n" + std::string(spec_body);
}

/// A fresh temporary directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kpc-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  /// Writes a file (creating parent directories) and returns its full path.
  std::string write(const std::string& rel, std::string_view text) const {
    auto p = path_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

/// The example cluster's snapshot files (fixtures/example), by name.
inline std::vector<std::string> example_files() {
  std::string dir = std::string(KPC_SOURCE_DIR) + "/fixtures/example/";
  return {dir + "services.yaml", dir + "endpointslices.json", dir + "nodes.yaml", dir + "kube-proxy.yaml"};
}

/// Result of isolated_sweep(): which cases crashed the child, and what the checks said.
struct SweepResult {
  std::vector<size_t> crashes;  ///< case indices during which the child died by a signal
  std::vector<size_t> hangs;    ///< case indices that exceeded the per-case time limit
  std::vector<std::pair<size_t, std::string>> failures;  ///< (case, message) from fn
  size_t ran = 0;
};

/// Runs fn(0..n-1) in a forked child, so that a crash (a bug under test) fails only the
/// cases it happens in instead of killing the test binary. fn returns "" when the case is
/// fine, else a message. Each case gets timeout_s seconds (SIGALRM); a case that takes
/// longer is a hang. After a crash or hang the sweep resumes in a new child with the next case.
inline SweepResult isolated_sweep(size_t n, const std::function<std::string(size_t)>& fn, size_t max_crashes = 3,
                                  unsigned timeout_s = 2) {
  SweepResult res;
  size_t start = 0;
  while (start < n) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      close(fds[0]);
      auto put = [&](const void* p, size_t len) {
        const char* c = static_cast<const char*>(p);
        while (len > 0) {
          ssize_t w = write(fds[1], c, len);
          if (w <= 0) _exit(4);
          c += w, len -= static_cast<size_t>(w);
        }
      };
      for (size_t i = start; i < n; ++i) {
        char tag = 'S';
        put(&tag, 1);
        put(&i, sizeof i);
        alarm(timeout_s);
        std::string msg = fn(i);
        alarm(0);
        if (!msg.empty()) {
          tag = 'F';
          uint64_t len = msg.size();
          put(&tag, 1);
          put(&i, sizeof i);
          put(&len, sizeof len);
          put(msg.data(), msg.size());
        }
      }
      _exit(0);
    }
    close(fds[1]);
    std::string buf;
    char chunk[4096];
    for (ssize_t r; (r = read(fds[0], chunk, sizeof chunk)) != 0;) {
      if (r < 0) {
        if (errno == EINTR) continue;
        break;
      }
      buf.append(chunk, static_cast<size_t>(r));
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    size_t last = start, at = 0;
    bool any = false;
    while (at < buf.size()) {
      char tag = buf[at++];
      size_t i = 0;
      if (at + sizeof i > buf.size()) break;
      std::memcpy(&i, buf.data() + at, sizeof i);
      at += sizeof i;
      if (tag == 'S') {
        last = i, any = true;
        ++res.ran;
      } else {
        uint64_t len = 0;
        if (at + sizeof len > buf.size()) break;
        std::memcpy(&len, buf.data() + at, sizeof len);
        at += sizeof len;
        res.failures.emplace_back(i, buf.substr(at, static_cast<size_t>(len)));
        at += static_cast<size_t>(len);
      }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) res.hangs.push_back(any ? last : start);
    else res.crashes.push_back(any ? last : start);
    if (res.crashes.size() + res.hangs.size() >= max_crashes) break;
    start = (any ? last : start) + 1;
  }
  return res;
}

/// Renders the crashes of a sweep for a failure message, showing each case via show(i).
inline std::string describe_crashes(const SweepResult& r, const std::function<std::string(size_t)>& show) {
  std::string out;
  for (size_t i : r.crashes) out += "  crash in case " + std::to_string(i) + ": " + show(i) + "\n";
  for (size_t i : r.hangs) out += "  hang in case " + std::to_string(i) + ": " + show(i) + "\n";
  return out;
}

}  // namespace kpc::loadtest
