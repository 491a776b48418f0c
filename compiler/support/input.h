// Bounded input. Every file kpc reads — snapshots, rule files, node states, in every
// subcommand — is opened here and checked against one limit (--max-input-size,
// KPC_MAX_INPUT_SIZE) before a byte of it is read: what an input can cost in memory is
// bounded by that limit, whatever the file claims to be (a sparse file, a pipe, a device).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "compiler/support/diag.h"

namespace kpc {

/// The default limit, 256 MiB. The largest real inputs: `kubectl get svc,endpointslices,nodes
/// -A -o json` of a 10,000-Service cluster with managedFields is about 100 MB (the former
/// 64 MiB refused it), its rule files (full restore program, iptables-save dump) about 46 MB.
/// 256 MiB takes both with room to grow. What a file may cost is its size (rule files are
/// mapped) plus, for a snapshot, its parsed documents (about ten times the text).
inline constexpr uint64_t kDefaultMaxInputSize = uint64_t{256} << 20;

/// The environment variable that sets the limit when --max-input-size is not given.
inline constexpr const char* kMaxInputSizeEnv = "KPC_MAX_INPUT_SIZE";

/// A byte count as users write it: "268435456", "512K", "100M", "1G", "2T" (powers of
/// 1024, as `truncate -s` and `head -c` read them), "512KiB", "100Mi" (the same, spelled
/// out), "100MB", "1GB" (powers of 1000). Suffixes ignore case; no sign, no fraction, no
/// space. nullopt on anything else or on overflow past 2^63.
std::optional<uint64_t> parse_byte_size(std::string_view text);

/// "268435456 bytes (256 MiB)": a limit as messages show it.
std::string describe_byte_size(uint64_t bytes);

/// Why an input could not be read: IoError (message "PATH: <the OS's reason>") or
/// InputTooLarge (message "PATH: N bytes exceeds the limit of M bytes (--max-input-size)").
struct InputError {
  DiagCode code = DiagCode::IoError;
  std::string message;
};

/// The error as one diagnostic line without a newline ("error[E0002]: PATH: ..."), with
/// hostile bytes of the path escaped as every diagnostic escapes them.
std::string render(const InputError& e);

/// An input opened for reading and already checked: a regular file by its size (fstat:
/// a 2 GB sparse file is refused without reading it), a directory refused (EISDIR).
/// Anything else (stdin "-", a pipe, a FIFO, /dev/fd/N, a device) has no size to check:
/// reading it stops at limit + 1 bytes (read_all). Move-only; closes its descriptor
/// (never stdin's).
///
/// A stream is read once per process: what a pipe, FIFO or stdin held is kept (by the
/// stream's identity, so "-" and /dev/stdin are one input) and every later open of it
/// replays the same bytes. That lets a command look at an input to decide what it is
/// (an nft transaction, an iptables dump, a snapshot) and then read it for real, and gives
/// `kpc diff a.nft - < b.nft` exactly the answer `kpc diff a.nft b.nft` gives.
class InputFd {
 public:
  InputFd() = default;
  ~InputFd();
  InputFd(InputFd&& o) noexcept;
  InputFd& operator=(InputFd&& o) noexcept;
  InputFd(const InputFd&) = delete;
  InputFd& operator=(const InputFd&) = delete;

  /// Opens path ("-" is stdin, named "<stdin>" in messages).
  static bool open(const std::string& path, uint64_t limit, InputFd* out, InputError* err);

  int fd() const { return fd_; }
  /// A regular file (not stdin): size() is its checked size and the file may be mapped.
  bool mappable() const { return regular_ && !stdin_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  uint64_t limit() const { return limit_; }
  /// Reads what is left into *text; more than limit bytes (a pipe, a file that grew since
  /// it was opened) is InputTooLarge, found after reading at most limit + 1 bytes.
  bool read_all(std::string* text, InputError* err);
  /// The same, shared and without a copy: a stream's bytes are the ones kept for its replay
  /// (a regular file is read into a buffer of its own).
  bool read_shared(std::shared_ptr<const std::string>* text, InputError* err);
  /// True when a stream was read before in this process and this open replays it.
  bool replayed() const { return replay_ != nullptr; }

 private:
  /// Read once and replayed after: anything but a regular file opened by its path (stdin is
  /// a stream even when the shell gave it a file: its offset moves as it is read).
  bool streamed() const { return !regular_ || stdin_; }
  bool read_fd(std::string* text, InputError* err);
  bool replay_too_large(InputError* err) const;
  void keep_cut(const InputError& err) const;  ///< a stream read past the limit: later opens fail alike
  std::shared_ptr<const std::string> replay_;  ///< a stream read before (open found it)
  uint64_t stream_dev_ = 0, stream_ino_ = 0;   ///< a stream's identity (fstat), to keep it
  int fd_ = -1;
  bool stdin_ = false;
  bool regular_ = false;
  uint64_t size_ = 0;
  uint64_t limit_ = 0;
  std::string name_;
};

/// InputFd::open + read_all: the whole of path ("-": stdin), at most limit bytes.
bool read_input(const std::string& path, uint64_t limit, std::string* text, InputError* err);

}  // namespace kpc
