#include "applier/node/stream_source.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

namespace kpc::applier {

struct StreamWatchSource::Impl {
  int in;
  WatchStreamDecoder decoder;
  int efd = -1;   ///< items queued
  int stop = -1;  ///< the destructor's wake-up for the reader
  std::thread reader;
  mutable std::mutex mu;
  std::deque<Item> queue;
  bool input = false, ended = false;
  size_t events_seen = 0;

  Impl(int fd, size_t max) : in(fd), decoder(max) {
    efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  ~Impl() {
    if (stop >= 0) {
      uint64_t one = 1;
      (void)!write(stop, &one, sizeof one);
    }
    if (reader.joinable()) reader.join();
    if (efd >= 0) close(efd);
    if (stop >= 0) close(stop);
  }

  void signal() {
    uint64_t one = 1;
    (void)!write(efd, &one, sizeof one);
  }

  void push(std::vector<WatchEvent>& events, std::vector<std::string>& errors, bool end) {
    std::lock_guard<std::mutex> lock(mu);
    // The decoder reports a chunk's problems and events separately; within a chunk the
    // problems come first, as the loop used to log them (the events are whole, in order).
    for (auto& e : errors) queue.push_back(Item{false, {}, std::move(e)});
    for (auto& e : events) queue.push_back(Item{true, std::move(e), {}});
    input = true;
    events_seen = decoder.events_seen();
    if (end) ended = true;
  }

  void run() {
    std::vector<char> buf(size_t{1} << 20);
    for (;;) {
      pollfd p[2] = {{in, POLLIN, 0}, {stop, POLLIN, 0}};
      int pr = poll(p, 2, -1);
      if (pr < 0 && errno == EINTR) continue;
      if (p[1].revents) return;  // stopping: the loop is gone, nothing more to deliver
      ssize_t n = read(in, buf.data(), buf.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      std::vector<WatchEvent> events;
      std::vector<std::string> errors;
      if (n > 0) {
        decoder.feed(std::string_view(buf.data(), static_cast<size_t>(n)), &events, &errors);
        push(events, errors, false);
        signal();
        continue;
      }
      // EOF (or a read error, which ends the stream the same way).
      decoder.finish(&errors);
      push(events, errors, true);
      signal();
      return;
    }
  }
};

StreamWatchSource::StreamWatchSource(int fd, size_t max) : impl_(std::make_unique<Impl>(fd, max)) {}
StreamWatchSource::~StreamWatchSource() = default;

void StreamWatchSource::start() {
  Impl* i = impl_.get();
  i->reader = std::thread([i] { i->run(); });
}

int StreamWatchSource::fd() const { return impl_->efd; }

StreamWatchSource::Batch StreamWatchSource::drain() {
  uint64_t v;
  (void)!read(impl_->efd, &v, sizeof v);
  Batch b;
  std::lock_guard<std::mutex> lock(impl_->mu);
  b.items.assign(std::make_move_iterator(impl_->queue.begin()), std::make_move_iterator(impl_->queue.end()));
  impl_->queue.clear();
  b.input = impl_->input;
  impl_->input = false;
  b.ended = impl_->ended;
  b.events_seen = impl_->events_seen;
  return b;
}

size_t StreamWatchSource::queued() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->queue.size();
}

}  // namespace kpc::applier
