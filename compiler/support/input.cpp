#include "compiler/support/input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "compiler/support/text.h"

namespace kpc {

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  constexpr uint64_t kMax = uint64_t{1} << 63;  // limit + 1 must not overflow anywhere
  uint64_t n = 0;
  for (size_t i = 0; i < digits; ++i) {
    uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (n > (kMax - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  std::string suffix = to_lower(text.substr(digits));
  uint64_t unit = 0;
  if (suffix.empty() || suffix == "b") unit = 1;
  static const char kLetters[] = "kmgt";
  for (int p = 0; p < 4 && !unit; ++p) {
    std::string s(1, kLetters[p]);
    uint64_t binary = uint64_t{1} << (10 * (p + 1)), decimal = 1;
    for (int k = 0; k <= p; ++k) decimal *= 1000;
    if (suffix == s || suffix == s + "i" || suffix == s + "ib") unit = binary;
    if (suffix == s + "b") unit = decimal;
  }
  if (!unit || (n && n > kMax / unit)) return std::nullopt;
  return n * unit;
}

std::string describe_byte_size(uint64_t bytes) {
  std::string out = std::to_string(bytes) + " bytes";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  for (int p = 3; p >= 0; --p) {
    uint64_t unit = uint64_t{1} << (10 * (p + 1));
    if (bytes >= unit && bytes % unit == 0) return out + " (" + std::to_string(bytes / unit) + " " + kUnits[p] + ")";
  }
  return out;
}

std::string render(const InputError& e) {
  return render(Diagnostic{e.code, Pos{}, "", "", e.message, {}}, SourceManager{});
}

namespace {

InputError io_error(const std::string& name, int err) { return {DiagCode::IoError, name + ": " + std::strerror(err)}; }

// "PATH: 2147483648 bytes exceeds the limit of 268435456 bytes (256 MiB, --max-input-size)".
InputError too_large(const std::string& name, const std::string& what, uint64_t limit) {
  std::string size = describe_byte_size(limit);
  size = size.back() == ')' ? size.substr(0, size.size() - 1) + ", " : size + " (";
  return {DiagCode::InputTooLarge, name + ": " + what + "exceeds the limit of " + size + "--max-input-size)"};
}

// The streams read so far, by identity (st_dev, st_ino): a pipe, a FIFO, stdin or a
// device can be read only once, and a command may look at an input before it reads it
// (what kind of program it is). Guarded: two sides of a diff load on two threads.
struct StreamKey {
  uint64_t dev = 0, ino = 0;
  friend auto operator<=>(const StreamKey&, const StreamKey&) = default;
};
std::mutex g_streams_mu;
std::map<StreamKey, std::shared_ptr<const std::string>>& streams() {
  static auto* m = new std::map<StreamKey, std::shared_ptr<const std::string>>;  // kept until exit
  return *m;
}

// What a stream read past the limit is kept as: later opens of it fail the same way (its bytes
// were consumed, so reading it again would see only what was left).
const std::shared_ptr<const std::string>& cut_stream() {
  static const auto* cut = new std::shared_ptr<const std::string>(std::make_shared<const std::string>());
  return *cut;
}

}  // namespace

InputFd::~InputFd() {
  if (fd_ >= 0 && !stdin_) ::close(fd_);
}

InputFd::InputFd(InputFd&& o) noexcept { *this = std::move(o); }

InputFd& InputFd::operator=(InputFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0 && !stdin_) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    stdin_ = o.stdin_;
    regular_ = o.regular_;
    size_ = o.size_;
    limit_ = o.limit_;
    name_ = std::move(o.name_);
    replay_ = std::move(o.replay_);
    stream_dev_ = o.stream_dev_;
    stream_ino_ = o.stream_ino_;
  }
  return *this;
}

bool InputFd::open(const std::string& path, uint64_t limit, InputFd* out, InputError* err) {
  InputFd in;
  in.limit_ = limit;
  in.stdin_ = path == "-";
  in.name_ = in.stdin_ ? "<stdin>" : path;
  if (in.stdin_) {
    in.fd_ = STDIN_FILENO;
  } else {
    // A stream read before is replayed without opening it again: a FIFO's second open would
    // wait for a writer that is gone. stat() does not block on a FIFO.
    struct stat pre {};
    if (::stat(path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode) && !S_ISDIR(pre.st_mode)) {
      std::lock_guard<std::mutex> lock(g_streams_mu);
      auto it = streams().find({static_cast<uint64_t>(pre.st_dev), static_cast<uint64_t>(pre.st_ino)});
      if (it != streams().end()) {
        in.replay_ = it->second;
        in.stream_dev_ = static_cast<uint64_t>(pre.st_dev);
        in.stream_ino_ = static_cast<uint64_t>(pre.st_ino);
        *out = std::move(in);
        return true;
      }
    }
    // O_NOCTTY: an input that is a terminal must not become our controlling terminal.
    do in.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    while (in.fd_ < 0 && errno == EINTR);
    if (in.fd_ < 0) return *err = io_error(in.name_, errno), false;
  }
  struct stat st {};
  if (::fstat(in.fd_, &st) != 0) return *err = io_error(in.name_, errno), false;
  if (S_ISDIR(st.st_mode)) return *err = io_error(in.name_, EISDIR), false;
  in.regular_ = S_ISREG(st.st_mode);
  if (in.regular_) {
    in.size_ = static_cast<uint64_t>(st.st_size);
    if (in.size_ > limit) return *err = too_large(in.name_, std::to_string(in.size_) + " bytes ", limit), false;
  }
  if (in.streamed()) {
    in.stream_dev_ = static_cast<uint64_t>(st.st_dev);
    in.stream_ino_ = static_cast<uint64_t>(st.st_ino);
    std::lock_guard<std::mutex> lock(g_streams_mu);
    auto it = streams().find({in.stream_dev_, in.stream_ino_});
    if (it != streams().end()) in.replay_ = it->second;
  }
  *out = std::move(in);
  return true;
}

bool InputFd::replay_too_large(InputError* err) const {
  if (replay_ != cut_stream() && replay_->size() <= limit_) return false;
  *err = too_large(name_, "", limit_);
  return true;
}

bool InputFd::read_all(std::string* text, InputError* err) {
  if (replay_) {
    text->clear();
    if (replay_too_large(err)) return false;
    *text = *replay_;
    return true;
  }
  if (!read_fd(text, err)) return keep_cut(*err), false;
  if (streamed()) {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    streams().emplace(StreamKey{stream_dev_, stream_ino_}, std::make_shared<const std::string>(*text));
  }
  return true;
}

void InputFd::keep_cut(const InputError& err) const {
  if (!streamed() || err.code != DiagCode::InputTooLarge) return;
  std::lock_guard<std::mutex> lock(g_streams_mu);
  streams().emplace(StreamKey{stream_dev_, stream_ino_}, cut_stream());
}

bool InputFd::read_shared(std::shared_ptr<const std::string>* text, InputError* err) {
  if (replay_) {
    if (replay_too_large(err)) return false;
    *text = replay_;
    return true;
  }
  auto owned = std::make_shared<std::string>();
  if (!read_fd(owned.get(), err)) return keep_cut(*err), false;
  *text = owned;
  if (streamed()) {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    streams().emplace(StreamKey{stream_dev_, stream_ino_}, *text);
  }
  return true;
}

bool InputFd::read_fd(std::string* text, InputError* err) {
  text->clear();
  // A regular file is read into a buffer of its size (one allocation, no regrowth copies);
  // anything else grows by blocks. Either way at most limit + 1 bytes are ever held.
  const uint64_t cap = limit_ + 1;
  size_t want = regular_ ? static_cast<size_t>(std::min<uint64_t>(size_ + 1, cap)) : size_t{1} << 16;
  size_t used = 0;
  for (;;) {
    if (text->size() - used == 0) {
      size_t grow = std::max<size_t>(want, text->size());
      text->resize(static_cast<size_t>(std::min<uint64_t>(text->size() + grow, cap)));
      want = size_t{1} << 16;
    }
    ssize_t n = ::read(fd_, text->data() + used, text->size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      text->clear();
      return *err = io_error(name_, e), false;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (used > limit_) {
      text->clear();
      text->shrink_to_fit();
      return *err = too_large(name_, "", limit_), false;
    }
  }
  text->resize(used);
  return true;
}

bool read_input(const std::string& path, uint64_t limit, std::string* text, InputError* err) {
  text->clear();
  InputFd in;
  return InputFd::open(path, limit, &in, err) && in.read_all(text, err);
}

}  // namespace kpc
