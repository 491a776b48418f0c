// Bounded input through the CLI: every input of every subcommand (snapshots, rule files,
// node states) is size-checked before it is read, against one limit: --max-input-size,
// else KPC_MAX_INPUT_SIZE, else 256 MiB. Over the limit: exit 2 (never 1, never a crash),
// `error[E0002]` naming the file, fast and without reading it (a 2 GiB sparse file costs
// nothing). Pipes are read up to the limit, not beyond.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

const std::string kEx = "fixtures/example";
const std::string kPkt[] = {"--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80"};

struct Ran {
  CommandResult r;
  double seconds = 0;
};

// As adversarial_test.cpp: a hang is a failure (timeout), and outside the sanitizers the
// run gets 512 MiB of address space, so reading (or mapping) a 2 GiB input would fail.
Ran timed(std::vector<std::string> argv) {
  std::vector<std::string> full = {"timeout", "-s", "KILL", "60"};
  if (kTimeScale == 1.0) full.insert(full.end(), {"prlimit", "--as=536870912", "--"});
  full.insert(full.end(), argv.begin(), argv.end());
  auto t0 = std::chrono::steady_clock::now();
  Ran out{run(full), 0};
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += a + " ";
  return s;
}

// Every way each subcommand reads a file, with `big` in that place (the other places
// hold valid inputs: the example snapshot, its compiled program).
std::vector<std::vector<std::string>> every_input(const std::string& big, const std::string& rules,
                                                  const std::string& big_dir) {
  std::string ex = source_path(kEx);
  std::vector<std::string> trace = {"trace", big};
  trace.insert(trace.end(), std::begin(kPkt), std::end(kPkt));
  return {
      {"validate", big},
      {"validate", big_dir},
      {"compile", big},
      {"compile", ex, "--prior", big},
      {"compile", ex, "--prior-state", big},
      {"verify", "--state", big, "--partial", rules, "--full", rules},
      {"verify", "--state", rules, "--partial", big, "--full", rules},
      {"verify", "--state", rules, "--partial", rules, "--full", big},
      {"verify", big, "--prior", ex},
      {"verify", ex, "--prior", big},
      {"diff", big, rules},
      {"diff", rules, big},
      {"diff", ex, big},
      {"diff", big_dir, rules},
      {"simulate", big},
      {"simulate", rules, big},
      {"simulate", "--state", big, rules},
      trace,
  };
}

class CliInputLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("input-limit");
    rules_ = dir_ + "/full.restore";
    auto c = run({bin_path("kpc"), "compile", source_path(kEx), "-o", rules_});
    ASSERT_EQ(c.exit_code, 0) << c.err;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, rules_;
};

TEST_F(CliInputLimit, SparseTwoGigabyteFileIsRefusedUnreadEverywhere) {
  std::string big = dir_ + "/big.yaml", big_dir = dir_ + "/snap";
  write_file(big, "*nat\n");  // reads as a rule file and as a (bad) snapshot: both must be refused unread
  fs::resize_file(big, uint64_t{2} << 30);
  fs::create_directories(big_dir);
  fs::create_hard_link(big, big_dir + "/big.yaml");
  for (auto argv : every_input(big, rules_, big_dir)) {
    argv.insert(argv.begin(), bin_path("kpc"));
    Ran ran = timed(argv);
    EXPECT_EQ(ran.r.exit_code, 2) << joined(argv) << "\n" << ran.r.err;
    EXPECT_LT(ran.seconds, 5 * kTimeScale) << joined(argv);
    EXPECT_NE(ran.r.err.find("error[E0002]: "), std::string::npos) << joined(argv) << "\n" << ran.r.err;
    EXPECT_NE(ran.r.err.find("big.yaml: 2147483648 bytes exceeds the limit of 268435456 bytes"), std::string::npos)
        << joined(argv) << "\n" << ran.r.err;
  }
}

TEST_F(CliInputLimit, SmallLimitFromFlagRefusesEveryInput) {
  // The example's files and program are a few KB: 1K refuses each, wherever it is read.
  std::string ex_file = source_path(kEx + "/services.yaml");
  for (auto argv : every_input(rules_, rules_, source_path(kEx))) {
    argv.insert(argv.begin(), bin_path("kpc"));
    argv.insert(argv.begin() + 2, {"--max-input-size", "1K"});
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 2) << joined(argv) << "\n" << r.err;
    EXPECT_NE(r.err.find("error[E0002]: "), std::string::npos) << joined(argv) << "\n" << r.err;
    EXPECT_NE(r.err.find("exceeds the limit of 1024 bytes (1 KiB, --max-input-size)"), std::string::npos)
        << joined(argv) << "\n" << r.err;
  }
}

TEST_F(CliInputLimit, SameInputsPassUnderTheDefault) {
  std::string ex = source_path(kEx);
  std::vector<std::vector<std::string>> ok = {
      {"validate", ex},
      {"compile", ex, "--prior-state", rules_},
      {"verify", "--state", rules_, "--partial", rules_, "--full", rules_},
      {"diff", ex, rules_},
      {"simulate", "--state", rules_, rules_},
      {"trace", rules_, "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80"},
  };
  for (auto argv : ok) {
    argv.insert(argv.begin(), bin_path("kpc"));
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 0) << joined(argv) << "\n" << r.err;
  }
}

TEST_F(CliInputLimit, EnvironmentSetsTheLimitAndTheFlagWins) {
  std::string size = std::to_string(fs::file_size(rules_));
  std::string below = std::to_string(fs::file_size(rules_) - 1);
  auto kpc = [&](std::vector<std::string> env_and_args) {
    std::vector<std::string> argv = {"env"};
    argv.insert(argv.end(), env_and_args.begin(), env_and_args.end());
    return run(argv);
  };
  std::string k = bin_path("kpc");
  // Exactly the file's size is accepted, one byte less refused.
  EXPECT_EQ(kpc({"KPC_MAX_INPUT_SIZE=" + size, k, "simulate", rules_}).exit_code, 0);
  auto r = kpc({"KPC_MAX_INPUT_SIZE=" + below, k, "simulate", rules_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0002]: " + rules_ + ": " + size + " bytes exceeds the limit of " + below + " bytes"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(kpc({"KPC_MAX_INPUT_SIZE=1K", k, "validate", source_path(kEx)}).exit_code, 2);
  EXPECT_EQ(kpc({"KPC_MAX_INPUT_SIZE=1K", k, "simulate", "--max-input-size", "1M", rules_}).exit_code, 0);
  EXPECT_EQ(kpc({"KPC_MAX_INPUT_SIZE=1G", k, "simulate", "--max-input-size", below, rules_}).exit_code, 2);
  // An empty variable is no setting; a bad one is a usage error, unless the flag is given.
  EXPECT_EQ(kpc({"KPC_MAX_INPUT_SIZE=", k, "simulate", rules_}).exit_code, 0);
  r = kpc({"KPC_MAX_INPUT_SIZE=lots", k, "simulate", rules_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("KPC_MAX_INPUT_SIZE: not a size: 'lots'"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(kpc({"KPC_MAX_INPUT_SIZE=lots", k, "simulate", "--max-input-size", "1M", rules_}).exit_code, 0);
  // Another subcommand's option is not this one's: a bad value only matters to the command run.
  EXPECT_EQ(kpc({"KPC_MAX_INPUT_SIZE=lots", k, "--version"}).exit_code, 0);
}

TEST_F(CliInputLimit, SizeSyntaxAndBadValues) {
  std::string k = bin_path("kpc");
  for (const char* good : {"1M", "1m", "1MiB", "1Mi", "1048576", "2MB", "1G", "1GiB", "512KiB", "512K", "1T"})
    EXPECT_EQ(run({k, "simulate", "--max-input-size", good, rules_}).exit_code, 0) << good;
  for (const char* bad : {"-1", "-5M", "abc", "1.5M", "", "M", "1 M", "1E", "1PB", "0x100", "+5",
                          "99999999999999999999", "9223372036854775808K"}) {
    auto r = run({k, "simulate", "--max-input-size", bad, rules_});
    EXPECT_EQ(r.exit_code, 2) << "'" << bad << "'";
    EXPECT_TRUE(r.out.empty()) << bad;
  }
  auto r = run({k, "compile", source_path(kEx), "--max-input-size", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-input-size: not a size: 'lots'"), std::string::npos) << r.err;
  // Every subcommand has the option.
  for (const char* cmd : {"validate", "compile", "verify", "diff", "simulate", "trace"}) {
    auto h = run({k, cmd, "--help"});
    EXPECT_NE(h.out.find("--max-input-size"), std::string::npos) << cmd;
  }
}

TEST_F(CliInputLimit, PipesAndStdinStopAtTheLimit) {
  std::string program = read_file(rules_);
  std::string limit = std::to_string(program.size() - 1);
  auto r = run({bin_path("kpc"), "simulate", "--max-input-size", limit, "-"}, program);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0002]: <stdin>: exceeds the limit of " + limit + " bytes"), std::string::npos) << r.err;
  r = run({bin_path("kpc"), "simulate", "--max-input-size", std::to_string(program.size()), "-"}, program);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Snapshots on stdin: the loader's limit is the same option.
  std::string snap = read_file(source_path(kEx + "/services.yaml"));
  r = run({bin_path("kpc"), "validate", "--max-input-size", std::to_string(snap.size() - 1), "-"}, snap);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0002]: <stdin>: exceeds the limit"), std::string::npos) << r.err;
  // A FIFO (what `<(cmd)` gives) is read once, and no further than the limit: a writer of
  // an endless stream is cut off.
  std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(run({"mkfifo", fifo}).exit_code, 0);
  Ran ran = timed({"sh", "-c", "yes '# x' > " + fifo + " & exec " + bin_path("kpc") + " trace " + fifo +
                                   " --src 10.0.0.1 --dst 10.0.0.2 --dport 80 --max-input-size 1M"});
  EXPECT_EQ(ran.r.exit_code, 2) << ran.r.err;
  EXPECT_NE(ran.r.err.find("error[E0002]: " + fifo + ": exceeds the limit of 1048576 bytes"), std::string::npos)
      << ran.r.err;
  EXPECT_LT(ran.seconds, 5 * kTimeScale);
}

TEST_F(CliInputLimit, DiffReadsAPipedSideOnce) {
  // A side given as a pipe is told apart (rule file or snapshot) and loaded from one read:
  // `kpc diff <(iptables-save) new.restore`, `kubectl get ... | kpc diff - new.restore`.
  std::string ex = source_path(kEx);
  std::string all = dir_ + "/all.yaml";  // the example snapshot as one multi-document YAML stream
  std::string text;
  for (const char* f : {"kube-proxy.yaml", "nodes.yaml", "services.yaml", "endpointslices.json"})
    text += "---\n" + read_file(ex + "/" + f) + "\n";
  write_file(all, text);
  std::string k = bin_path("kpc");
  for (const std::string& cmd : {"cat " + rules_ + " | " + k + " diff /dev/stdin " + ex,
                                 "cat " + rules_ + " | " + k + " diff - " + rules_,
                                 "cat " + all + " | " + k + " diff - " + rules_,
                                 "cat " + all + " | " + k + " diff " + rules_ + " /dev/stdin"}) {
    auto r = run({"sh", "-c", cmd});
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("equivalent: no packet is treated differently"), std::string::npos) << cmd << "\n" << r.out;
  }
}

TEST_F(CliInputLimit, DiffTakesAnEmptySideAsAnEmptyRuleSet) {
  // What iptables-save prints on a node without tables (nothing, or only comments).
  std::string empty = dir_ + "/empty.save", comments = dir_ + "/comments.save";
  write_file(empty, "");
  write_file(comments, "# Generated by iptables-save\n\n");
  auto r = run({bin_path("kpc"), "diff", empty, comments});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run({bin_path("kpc"), "diff", empty, rules_});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  r = run({bin_path("kpc"), "diff", "-", rules_});  // empty stdin
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
}

TEST_F(CliInputLimit, UnreadableInputsNameTheReason) {
  std::string k = bin_path("kpc");
  auto r = run({k, "simulate", dir_ + "/missing.restore"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0001]: " + dir_ + "/missing.restore: No such file or directory"), std::string::npos)
      << r.err;
  r = run({k, "trace", dir_ + "/missing.restore", "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0001]: " + dir_ + "/missing.restore: No such file or directory"), std::string::npos)
      << r.err;
  // A directory is a snapshot for trace (compiled first): one without documents says so.
  r = run({k, "trace", dir_, "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0004]"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kpc::test
