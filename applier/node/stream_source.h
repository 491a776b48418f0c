// The `--watch -` source on a thread of its own (issue 15 §5, backpressure): the stream is
// read and decoded as it arrives, whatever the sync loop is doing, and the events are queued
// for the loop's thread in arrival order -- as KubeApiSource queues the API's. Before, stdin was
// read on the sync thread between syncs only, so during a long sync the pipe filled and the
// writer (kubectl, and the API server's watch behind it) blocked.
//
// Nothing is lost or reordered: one reader, one FIFO queue of items (the events in stream
// order; a malformed event's message among them -- within one read, before that read's events,
// as the loop has always logged them). At the end of the stream the decoder's
// leftover (a half-read event) is reported as before and ended() becomes true after every item
// before it has been queued; the loop then does what it did (sync, exit 1, rules kept).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "applier/node/watch_events.h"

namespace kpc::applier {

class StreamWatchSource {
 public:
  struct Item {
    bool is_event = true;
    WatchEvent event;   ///< is_event
    std::string error;  ///< !is_event: "event N: ..." (a malformed event, skipped)
  };
  struct Batch {
    std::vector<Item> items;  ///< events in stream order (messages: see above)
    bool input = false;       ///< bytes arrived since the last drain (whole events or not)
    bool ended = false;       ///< the stream ended (EOF or a read error) and every item is in `items` or earlier
    size_t events_seen = 0;   ///< the decoder's count so far
  };

  /// Reads `fd` (not closed here) on a thread started by start().
  explicit StreamWatchSource(int fd, size_t max_event_bytes = size_t{64} << 20);
  ~StreamWatchSource();  ///< stops and joins the reader
  StreamWatchSource(const StreamWatchSource&) = delete;
  StreamWatchSource& operator=(const StreamWatchSource&) = delete;

  void start();
  /// Readable while something is queued (an eventfd).
  int fd() const;
  /// Everything queued since the last drain; clears fd().
  Batch drain();
  /// Queued items not yet drained (tests, metrics).
  size_t queued() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kpc::applier
