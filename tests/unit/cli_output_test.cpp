// `-o PATH` never damages what PATH is: a regular file (new, existing, or a symlink's
// target) is replaced atomically through a unique sibling temp file, keeping its mode; a
// device, FIFO or /dev/fd/N is written directly and stays what it was. Errors (exit 2)
// name the user's path and the OS's reason and leave the old file and no temp behind.
// The device tests make their nodes with mknod in a temp directory (root only, skipped
// otherwise); they never touch /dev/null itself.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

std::string example() { return source_path("fixtures/example"); }
std::string expected(const char* backend = "iptables") {
  return read_file(source_path(std::string("fixtures/example/expected/") + backend + ".restore"));
}
CommandResult compile_to(const std::string& out, const char* backend = "iptables") {
  return run({bin_path("kpc"), "compile", example(), "--backend", backend, "-o", out});
}
// Shell quoting for the few tests that need redirections.
std::string q(const std::string& s) { return "'" + s + "'"; }

/// Entries of dir that are kpc's temp files (".NAME.kpc-XXXXXX").
std::vector<std::string> temps_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".kpc-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

struct stat stat_of(const std::string& path, bool follow = true) {
  struct stat st {};
  EXPECT_EQ(follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st), 0) << path;
  return st;
}

class CliOutput : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("output"); }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all);
    fs::remove_all(dir_);
  }
  /// Device nodes need CAP_MKNOD and a file system that honours them.
  bool can_make_devices() {
    struct statvfs vfs {};
    return ::geteuid() == 0 && ::statvfs(dir_.c_str(), &vfs) == 0 && !(vfs.f_flag & ST_NODEV);
  }
  std::string dir_;
};

TEST_F(CliOutput, NewAndExistingRegularFiles) {
  std::string out = dir_ + "/out.restore";
  auto r = compile_to(out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(out), expected());
  // A new file gets 0666 & ~umask, as the shell's `>` would create it.
  for (auto [mask, mode] : {std::pair{"022", 0644}, std::pair{"077", 0600}, std::pair{"002", 0664}}) {
    std::string f = dir_ + "/new-" + mask + ".restore";
    r = run({"sh", "-c", std::string("umask ") + mask + "; exec " + q(bin_path("kpc")) + " compile " + q(example()) +
                             " -o " + q(f)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(stat_of(f).st_mode & 07777, static_cast<mode_t>(mode)) << mask;
  }
  EXPECT_TRUE(temps_in(dir_).empty());
}

TEST_F(CliOutput, ExistingFileKeepsItsMode) {
  for (mode_t mode : {0600, 0640, 0604, 0755}) {
    std::string out = dir_ + "/out.restore";
    write_file(out, "previous\n");
    ASSERT_EQ(::chmod(out.c_str(), mode), 0);
    auto r = compile_to(out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(stat_of(out).st_mode & 07777, mode);
    EXPECT_EQ(read_file(out), expected());
  }
}

TEST_F(CliOutput, SymlinkStaysALinkAndItsTargetIsReplaced) {
  fs::create_directories(dir_ + "/real");
  std::string target = dir_ + "/real/v4.restore";
  write_file(target, "previous\n");
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  // A relative link to a relative link in another directory.
  fs::create_symlink("real/v4.restore", dir_ + "/hop.restore");
  fs::create_directories(dir_ + "/links");
  std::string link = dir_ + "/links/current.restore";
  fs::create_symlink("../hop.restore", link);
  auto r = compile_to(link);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::read_symlink(link), "../hop.restore");
  EXPECT_TRUE(fs::is_symlink(dir_ + "/hop.restore"));
  EXPECT_EQ(read_file(target), expected());
  EXPECT_EQ(stat_of(target).st_mode & 07777, 0600u);
  EXPECT_TRUE(temps_in(dir_).empty() && temps_in(dir_ + "/real").empty() && temps_in(dir_ + "/links").empty());
  // A dangling link: the file it names is created (as open(O_CREAT) would), the link kept.
  std::string dangling = dir_ + "/dangling.restore";
  fs::create_symlink("real/created.restore", dangling);
  r = compile_to(dangling);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(read_file(dir_ + "/real/created.restore"), expected());
}

TEST_F(CliOutput, FifoIsWrittenAndStaysAFifo) {
  std::string fifo = dir_ + "/out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  auto r = compile_to(fifo);
  reader.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(got, expected());
  EXPECT_TRUE(S_ISFIFO(stat_of(fifo, false).st_mode));
  EXPECT_TRUE(temps_in(dir_).empty());
}

TEST_F(CliOutput, DescriptorPathsAreWrittenThrough) {
  std::string k = q(bin_path("kpc")) + " compile " + q(example());
  // /dev/fd/N on a pipe the parent passed (the `-o >(cmd)` case), and stdout's names.
  for (const std::string& cmd : {k + " -o /dev/fd/5 5>&1", k + " -o /proc/self/fd/1", k + " -o /dev/stdout"}) {
    auto r = run({"sh", "-c", cmd});
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
    EXPECT_EQ(r.out, expected()) << cmd;
  }
  // A regular file open for appending on fd 5: written through that descriptor (as `>&5`
  // would), not replaced: what was there stays.
  std::string log = dir_ + "/log";
  write_file(log, "first\n");
  auto r = run({"sh", "-c", k + " -o /dev/fd/5 5>>" + q(log)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(log), "first\n" + expected());
  EXPECT_TRUE(temps_in(dir_).empty());
  // A descriptor that is not open.
  r = run({bin_path("kpc"), "compile", example(), "-o", "/dev/fd/97"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0005]: /dev/fd/97: Bad file descriptor"), std::string::npos) << r.err;
}

TEST_F(CliOutput, DeviceNodeStaysADevice) {
  if (!can_make_devices()) GTEST_SKIP() << "needs root (CAP_MKNOD) and a file system without nodev";
  // A copy of /dev/null (1,3) made here: written to, never replaced.
  std::string null_copy = dir_ + "/null";
  ASSERT_EQ(::mknod(null_copy.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_EQ(::chmod(null_copy.c_str(), 0666), 0);  // mknod applied the umask
  auto r = compile_to(null_copy);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st = stat_of(null_copy, false);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  EXPECT_EQ(st.st_mode & 07777, 0666u);
  EXPECT_TRUE(temps_in(dir_).empty());
  // And through a symlink to it.
  fs::create_symlink("null", dir_ + "/to-null");
  ASSERT_EQ(compile_to(dir_ + "/to-null").exit_code, 0);
  EXPECT_TRUE(S_ISCHR(stat_of(null_copy, false).st_mode));
  EXPECT_TRUE(fs::is_symlink(dir_ + "/to-null"));
}

TEST_F(CliOutput, DeviceNodeIsWrittenItself) {
  if (!can_make_devices()) GTEST_SKIP() << "needs root (CAP_MKNOD) and a file system without nodev";
  // A copy of /dev/full (1,7): every write fails with ENOSPC. kpc reporting exactly that
  // proves it wrote to the device itself (a replaced node would have taken the bytes).
  std::string full = dir_ + "/full";
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0600, makedev(1, 7)), 0);
  auto r = compile_to(full);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0005]: " + full + ": No space left on device"), std::string::npos) << r.err;
  struct stat st = stat_of(full, false);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 7));
  EXPECT_TRUE(temps_in(dir_).empty());
}

TEST_F(CliOutput, ConcurrentRunsOnOnePathNeverCollide) {
  // Eight runs at once, two different programs: every run succeeds, the file is one
  // complete program, and no temp file is left.
  std::string out = dir_ + "/out.restore";
  std::string k = q(bin_path("kpc")) + " compile " + q(example()) + " -o " + q(out) + " --backend ";
  std::string script = "st=0; pids=;";
  for (int i = 0; i < 8; ++i) script += k + (i % 2 ? "ip6tables" : "iptables") + " & pids=\"$pids $!\";";
  script += " for p in $pids; do wait $p || st=1; done; exit $st";
  for (int round = 0; round < 3; ++round) {
    auto r = run({"sh", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string got = read_file(out);
    EXPECT_TRUE(got == expected("iptables") || got == expected("ip6tables")) << got.size();
    EXPECT_TRUE(temps_in(dir_).empty());
  }
}

TEST_F(CliOutput, UnwritableDirectoryFailsNamingThePathAndLeavesTheFile) {
  // Root writes anywhere: the run drops to nobody (setpriv) to meet a permission error.
  std::vector<std::string> as_user;
  if (::geteuid() == 0) {
    if (run({"setpriv", "--version"}).exit_code != 0) GTEST_SKIP() << "root without setpriv";
    as_user = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    // nobody must reach the example and the directory (temp_dir is under /tmp).
    if (run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "test", "-r",
             example() + "/services.yaml"})
            .exit_code != 0)
      GTEST_SKIP() << "the source tree is not readable by nobody";
  }
  std::string ro = dir_ + "/ro";
  fs::create_directories(ro);
  std::string old = ro + "/old.restore";
  write_file(old, "previous\n");
  ASSERT_EQ(::chmod(old.c_str(), 0666), 0);  // the file itself is writable: only the directory is not
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  for (const std::string& out : {ro + "/new.restore", old}) {
    std::vector<std::string> argv = as_user;
    for (const std::string& a : {bin_path("kpc"), std::string("compile"), example(), std::string("-o"), out})
      argv.push_back(a);
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 2) << out;
    EXPECT_NE(r.err.find("error[E0005]: " + out + ": Permission denied"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
  EXPECT_FALSE(fs::exists(ro + "/new.restore"));
  EXPECT_EQ(read_file(old), "previous\n");
  EXPECT_TRUE(temps_in(ro).empty());
  fs::permissions(ro, fs::perms::owner_all);
}

TEST_F(CliOutput, FailedWriteLeavesTheOldFileAndNoTemp) {
  // A file-size limit of 512 bytes (SIGXFSZ ignored): the temp file's write fails with
  // EFBIG half way, after the program compiled.
  std::string out = dir_ + "/out.restore";
  write_file(out, "previous\n");
  auto r = run({"sh", "-c", "trap '' XFSZ; ulimit -f 1; exec " + q(bin_path("kpc")) + " compile " + q(example()) +
                                " -o " + q(out)});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error[E0005]: " + out + ": File too large"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(out), "previous\n");
  EXPECT_TRUE(temps_in(dir_).empty());
}

TEST_F(CliOutput, OtherErrorsNameTheUsersPath) {
  struct Case {
    std::string path, reason;
  };
  write_file(dir_ + "/file", "x");
  for (const auto& c : std::vector<Case>{
           {dir_ + "/missing/out.restore", "No such file or directory"},
           {dir_, "Is a directory"},
           {dir_ + "/file/out.restore", "Not a directory"},
       }) {
    auto r = compile_to(c.path);
    EXPECT_EQ(r.exit_code, 2) << c.path;
    EXPECT_NE(r.err.find("error[E0005]: " + c.path + ": " + c.reason), std::string::npos) << r.err;
  }
  // A symlink into a missing directory: the message names the link, as the user wrote it.
  fs::create_symlink("missing/x.restore", dir_ + "/link");
  auto r = compile_to(dir_ + "/link");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error[E0005]: " + dir_ + "/link: No such file or directory"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(dir_ + "/file"), "x");
}

}  // namespace
}  // namespace kpc::test
