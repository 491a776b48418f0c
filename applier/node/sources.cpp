#include "applier/node/sources.h"

#include <dirent.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "compiler/model/loader.h"

namespace kpc::applier {

bool load_snapshot_paths(const std::vector<std::string>& paths, const std::string& node, Snapshot* out,
                         std::string* diagnostics) {
  LoadOptions lo;
  lo.node_name = node;
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  bool ok = load_snapshot(paths, lo, sm, &snap, diags);
  diags.sort_and_dedup();
  *diagnostics = diags.render(sm);
  if (!ok || diags.has_errors()) return false;
  *out = std::move(snap);
  return true;
}

static constexpr uint32_t kMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                                  IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB;

PathWatcher::PathWatcher(std::string path) : path_(std::move(path)) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) {
    error_ = std::string("inotify: ") + std::strerror(errno);
    return;
  }
  struct stat st{};
  if (stat(path_.c_str(), &st) != 0) {
    error_ = path_ + ": " + std::strerror(errno);
    close(fd_), fd_ = -1;
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    watch_tree(path_);
  } else {
    // A file: watch its directory (editors and `mv` replace the file), filtered by name.
    size_t slash = path_.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash);
    file_name_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
    int wd = inotify_add_watch(fd_, dir.c_str(), kMask);
    if (wd < 0) {
      error_ = dir + ": " + std::strerror(errno);
      close(fd_), fd_ = -1;
      return;
    }
    dirs_.push_back({wd, dir});
  }
}

PathWatcher::~PathWatcher() {
  if (fd_ >= 0) close(fd_);
}

void PathWatcher::watch_tree(const std::string& dir) {
  int wd = inotify_add_watch(fd_, dir.c_str(), kMask);
  if (wd < 0) return;
  dirs_.push_back({wd, dir});
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string sub = dir + "/" + e->d_name;
      struct stat st{};
      if (stat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) watch_tree(sub);
    }
    closedir(d);
  }
}

bool PathWatcher::drain() {
  bool relevant = false;
  alignas(inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) break;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      p += sizeof(inotify_event) + ev->len;
      std::string name = ev->len ? ev->name : "";
      if (!file_name_.empty()) {
        if (name == file_name_) relevant = true;
        continue;
      }
      if (!name.empty() && name[0] == '.') continue;  // editors' and writers' temporary files
      relevant = true;
      if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
        for (const auto& [wd, dir] : dirs_)
          if (wd == ev->wd) {
            watch_tree(dir + "/" + name);
            break;
          }
    }
  }
  return relevant;
}

}  // namespace kpc::applier
