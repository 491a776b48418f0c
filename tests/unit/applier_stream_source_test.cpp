// The `--watch -` stream read on a thread of its own (applier/node/stream_source.h): the writer
// never waits for the loop (no backpressure), every event arrives once and in order, a malformed
// event is reported in its place, and the end of the stream is seen after everything before it.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "applier/node/stream_source.h"

namespace kpc::applier {
namespace {

std::string slice_event(int n) {
  return R"({"type":"MODIFIED","object":{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-)" +
         std::to_string(n) +
         R"(","namespace":"shop","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","endpoints":[{"addresses":["10.244.1.5"],"conditions":{"ready":true}}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}})"
         "\n";
}

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(pipe(fd), 0); }
  ~Pipe() {
    close_write();
    if (fd[0] >= 0) close(fd[0]);
  }
  void close_write() {
    if (fd[1] >= 0) close(fd[1]), fd[1] = -1;
  }
  bool write_all(const std::string& s) {
    for (size_t off = 0; off < s.size();) {
      ssize_t n = write(fd[1], s.data() + off, s.size() - off);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
};

// Drains until `want` items are in or the stream ended (10 s at most).
StreamWatchSource::Batch collect(StreamWatchSource& src, size_t want) {
  StreamWatchSource::Batch all;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (all.items.size() < want && !all.ended && std::chrono::steady_clock::now() < deadline) {
    pollfd p{src.fd(), POLLIN, 0};
    poll(&p, 1, 100);
    auto b = src.drain();
    for (auto& it : b.items) all.items.push_back(std::move(it));
    all.ended = b.ended;
    all.events_seen = b.events_seen;
  }
  return all;
}

TEST(StreamWatchSource, TheWriterNeverWaitsForTheLoop) {
  // 20,000 events (~6 MB, a hundred times a pipe's buffer) written while nobody drains: with
  // the stream read on the loop's thread between syncs, this writer would block at 64 KiB.
  Pipe p;
  StreamWatchSource src(p.fd[0]);
  src.start();
  const int n = 20'000;
  std::string all;
  for (int i = 0; i < n; ++i) all += slice_event(i);
  auto writer = std::async(std::launch::async, [&] { return p.write_all(all); });
  ASSERT_EQ(writer.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the writer blocked";
  EXPECT_TRUE(writer.get());
  p.close_write();
  auto b = collect(src, n);
  ASSERT_EQ(b.items.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(b.items[i].is_event) << b.items[i].error;
    ASSERT_EQ(b.items[i].event.name, "web-" + std::to_string(i)) << "event " << i << " out of order";
  }
  // The end comes after every event (a drain may need to see it on its own).
  if (!b.ended) b = collect(src, 1);
  EXPECT_TRUE(b.ended);
  EXPECT_EQ(b.events_seen, static_cast<size_t>(n));
}

TEST(StreamWatchSource, MalformedEventsInPlaceAndAHalfEventAtTheEnd) {
  Pipe p;
  StreamWatchSource src(p.fd[0]);
  src.start();
  std::string e1 = slice_event(1), e2 = slice_event(2), e3 = slice_event(3);
  // e1 whole; a malformed one; e2 in two writes a while apart; then half of e3 and EOF.
  ASSERT_TRUE(p.write_all(e1 + R"({"type":"SIDEWAYS","object":{}})" + "\n" + e2.substr(0, 40)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(p.write_all(e2.substr(40) + e3.substr(0, 60)));
  p.close_write();
  auto b = collect(src, 5);
  if (!b.ended) {
    auto more = collect(src, 1);
    for (auto& it : more.items) b.items.push_back(std::move(it));
    b.ended = more.ended;
  }
  // The events whole and in order; the malformed one reported (within one read, the
  // decoder's messages come before that read's events, as the loop has always logged them);
  // the half event reported last, after every event, and never applied.
  ASSERT_EQ(b.items.size(), 4u);
  std::vector<std::string> events, errors;
  for (const auto& it : b.items) (it.is_event ? events : errors).push_back(it.is_event ? it.event.name : it.error);
  EXPECT_EQ(events, (std::vector<std::string>{"web-1", "web-2"}));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("unknown event type"), std::string::npos) << errors[0];
  EXPECT_FALSE(b.items.back().is_event);
  EXPECT_EQ(b.items.back().error, errors[1]);
  EXPECT_TRUE(b.ended);
}

TEST(StreamWatchSource, StopsWhileTheStreamIsOpen) {
  // The applier stopping on SIGTERM with kubectl still attached: the reader is not left behind.
  Pipe p;
  auto t0 = std::chrono::steady_clock::now();
  {
    StreamWatchSource src(p.fd[0]);
    src.start();
    ASSERT_TRUE(p.write_all(slice_event(7)));
    auto b = collect(src, 1);
    EXPECT_EQ(b.items.size(), 1u);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace kpc::applier
