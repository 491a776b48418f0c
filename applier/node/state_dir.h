// --state-dir: what the applier keeps on disk, each file replaced atomically (a temporary
// file in the same directory, fsync, rename, fsync of the directory).
//   last-applied-<backend>-<family>.<ext>   the last program the kernel took
//   last-failed-<backend>-<family>.<ext>    the last program it refused, and .err: why
//   verify-failures/<n>-<backend>-<family>/  a partial whose proof failed: prior state,
//                                            partial, full, report.txt (the newest 20 kept)
//   status.json                              counters and the last sync's report
#pragma once

#include <string>

namespace kpc::applier {

/// Writes path atomically; false with *error on failure (disk full, permissions).
bool write_file_atomic(const std::string& path, const std::string& text, std::string* error);
/// mkdir -p; false on failure.
bool make_dirs(const std::string& path);

}  // namespace kpc::applier
