// compiler/support/input.h: the size syntax of --max-input-size / KPC_MAX_INPUT_SIZE, and
// reading that never holds more than the limit (+1 byte) of any input.
#include "compiler/support/input.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <csignal>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "tests/support/test_util.h"

namespace kpc {
namespace {
namespace fs = std::filesystem;

TEST(InputSize, Syntax) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  for (const auto& c : std::vector<Case>{
           {"0", 0},
           {"1000", 1000},
           {"268435456", uint64_t{256} << 20},
           {"512K", 512 << 10},
           {"512k", 512 << 10},
           {"512KiB", 512 << 10},
           {"512Ki", 512 << 10},
           {"512kib", 512 << 10},
           {"512KB", 512000},
           {"100M", uint64_t{100} << 20},
           {"100MiB", uint64_t{100} << 20},
           {"100MB", 100000000},
           {"1G", uint64_t{1} << 30},
           {"1GiB", uint64_t{1} << 30},
           {"2GB", 2000000000},
           {"1T", uint64_t{1} << 40},
           {"7b", 7},
           {"8388608T", uint64_t{1} << 63},  // the largest accepted
       }) {
    auto n = parse_byte_size(c.text);
    ASSERT_TRUE(n) << c.text;
    EXPECT_EQ(*n, c.bytes) << c.text;
  }
  for (const char* bad : {"", "K", "-1", "+1", " 1", "1 ", "1 K", "1.5M", "0x10", "1e6", "1P", "1KiBB", "1iB",
                          "8388609T", "9223372036854775809", "99999999999999999999", "1M\n"})
    EXPECT_FALSE(parse_byte_size(bad)) << "'" << bad << "'";
}

TEST(InputSize, Describe) {
  EXPECT_EQ(describe_byte_size(1000), "1000 bytes");
  EXPECT_EQ(describe_byte_size(1024), "1024 bytes (1 KiB)");
  EXPECT_EQ(describe_byte_size(kDefaultMaxInputSize), "268435456 bytes (256 MiB)");
  EXPECT_EQ(describe_byte_size(uint64_t{3} << 30), "3221225472 bytes (3 GiB)");
}

class InputRead : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("input"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(InputRead, AtTheLimitIsReadOneByteMoreIsRefusedUnread) {
  std::string path = dir_ + "/f";
  test::write_file(path, "0123456789");
  std::string text;
  InputError err;
  ASSERT_TRUE(read_input(path, 10, &text, &err)) << err.message;
  EXPECT_EQ(text, "0123456789");
  EXPECT_FALSE(read_input(path, 9, &text, &err));
  EXPECT_EQ(err.code, DiagCode::InputTooLarge);
  EXPECT_EQ(err.message, path + ": 10 bytes exceeds the limit of 9 bytes (--max-input-size)");
  EXPECT_EQ(render(err), "error[E0002]: " + err.message);
  EXPECT_TRUE(text.empty());
}

TEST_F(InputRead, SparseFileIsRefusedByItsSize) {
  std::string path = dir_ + "/sparse";
  test::write_file(path, "x");
  fs::resize_file(path, uint64_t{64} << 30);
  InputFd in;
  InputError err;
  EXPECT_FALSE(InputFd::open(path, kDefaultMaxInputSize, &in, &err));
  EXPECT_EQ(err.code, DiagCode::InputTooLarge);
  EXPECT_EQ(err.message, path + ": 68719476736 bytes exceeds the limit of 268435456 bytes (256 MiB, --max-input-size)");
}

TEST_F(InputRead, PipeIsCutOffAfterLimitPlusOneBytes) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);  // the writer ends on EPIPE, not by killing the test
  // An endless writer: the reader must stop by itself.
  std::thread writer([w = fds[1]] {
    std::string block(4096, 'x');
    while (write(w, block.data(), block.size()) > 0) {
    }
    close(w);
  });
  std::string path = "/dev/fd/" + std::to_string(fds[0]);
  std::string text;
  InputError err;
  EXPECT_FALSE(read_input(path, 100000, &text, &err));
  EXPECT_EQ(err.code, DiagCode::InputTooLarge);
  EXPECT_EQ(err.message, path + ": exceeds the limit of 100000 bytes (--max-input-size)");
  close(fds[0]);  // no reader left: the writer's next write fails
  writer.join();
  sigaction(SIGPIPE, &old, nullptr);
}

TEST_F(InputRead, ErrorsNameThePathAndTheReason) {
  std::string text;
  InputError err;
  EXPECT_FALSE(read_input(dir_ + "/missing", 100, &text, &err));
  EXPECT_EQ(err.code, DiagCode::IoError);
  EXPECT_EQ(err.message, dir_ + "/missing: No such file or directory");
  EXPECT_FALSE(read_input(dir_, 100, &text, &err));
  EXPECT_EQ(err.message, dir_ + ": Is a directory");
  // A hostile file name cannot break the diagnostic line.
  EXPECT_FALSE(read_input(dir_ + "/a\nerror[E9999]: forged", 100, &text, &err));
  EXPECT_EQ(render(err).find('\n'), std::string::npos) << render(err);
}

TEST_F(InputRead, EmptyAndFifoInputs) {
  std::string empty = dir_ + "/empty", fifo = dir_ + "/fifo";
  test::write_file(empty, "");
  std::string text = "stale";
  InputError err;
  ASSERT_TRUE(read_input(empty, 0, &text, &err)) << err.message;
  EXPECT_EQ(text, "");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { test::write_file(fifo, "abc"); });
  ASSERT_TRUE(read_input(fifo, 3, &text, &err)) << err.message;
  writer.join();
  EXPECT_EQ(text, "abc");
}

}  // namespace
}  // namespace kpc
