// The applier's clock: injectable so that the sync loop's rate limits are tested with a fake
// clock (no sleeping). Milliseconds of a monotonic clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace kpc::applier {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_ms() = 0;
};

/// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  int64_t now_ms() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

/// A clock tests move by hand.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : now_(start_ms) {}
  int64_t now_ms() override { return now_; }
  void advance_ms(int64_t d) { now_ += d; }
  void set_ms(int64_t t) { now_ = t; }

 private:
  int64_t now_;
};

}  // namespace kpc::applier
