// The `--watch PATH` source: a snapshot file or directory (as kpc reads it everywhere),
// re-read when inotify says something under it changed; the caller debounces (a GitOps
// checkout or a sidecar writes many files at once) and hands the new snapshot to
// SyncLoop::replace_all, which turns it into object events. A snapshot that does not load
// (half written, invalid) is reported and the applier keeps the state it has.
#pragma once

#include <string>
#include <vector>

#include "compiler/model/objects.h"

namespace kpc::applier {

/// Loads a snapshot (files/directories), as `kpc compile` does; node = --node (may be "").
/// False with the rendered diagnostics in *diagnostics.
bool load_snapshot_paths(const std::vector<std::string>& paths, const std::string& node, Snapshot* out,
                         std::string* diagnostics);

class PathWatcher {
 public:
  explicit PathWatcher(std::string path);
  ~PathWatcher();
  PathWatcher(const PathWatcher&) = delete;
  PathWatcher& operator=(const PathWatcher&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  int fd() const { return fd_; }
  /// Reads the pending inotify events; true when one concerns the snapshot (a file of it was
  /// written, moved in or out, created or deleted). New subdirectories are watched too.
  bool drain();

 private:
  void watch_tree(const std::string& dir);
  std::string path_, file_name_;  ///< file_name_: when watching a single file's directory
  int fd_ = -1;
  std::string error_;
  std::vector<std::pair<int, std::string>> dirs_;
};

}  // namespace kpc::applier
