// One database, one daemon: the lock file refuses a second open from this process or another one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "storage/store.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::TempDir;
using ::testing::HasSubstr;

TEST(LockTest, SecondOpenInSameProcessIsConflictNamingPathAndPid) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  Result<std::unique_ptr<Store>> first = OpenSqliteStore(db);
  ASSERT_TRUE(first.ok()) << first.status().message();
  Result<std::unique_ptr<Store>> second = OpenSqliteStore(db);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kConflict);
  EXPECT_EQ(second.status().message(), "database " + db + " is already in use by another shepherdd (pid " +
                                           std::to_string(getpid()) + ")");
}

TEST(LockTest, LockFileHoldsOwnerPidAndIsReleasedOnClose) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  {
    Result<std::unique_ptr<Store>> first = OpenSqliteStore(db);
    ASSERT_TRUE(first.ok()) << first.status().message();
    std::ifstream lock_file(db + ".lock");
    std::stringstream content;
    content << lock_file.rdbuf();
    EXPECT_EQ(content.str(), std::to_string(getpid()) + "\n");
  }
  Result<std::unique_ptr<Store>> again = OpenSqliteStore(db);
  EXPECT_TRUE(again.ok()) << again.status().message();
}

TEST(LockTest, OpenFromForkedChildIsConflict) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  Result<std::unique_ptr<Store>> parent_store = OpenSqliteStore(db);
  ASSERT_TRUE(parent_store.ok()) << parent_store.status().message();
  (*parent_store)->Flush();  // the writer thread is idle while we fork

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    Result<std::unique_ptr<Store>> r = OpenSqliteStore(db);
    std::string report = std::to_string(static_cast<int>(r.status().code())) + "|" + r.status().message();
    ssize_t written = write(fds[1], report.data(), report.size());
    _exit(written == static_cast<ssize_t>(report.size()) ? 0 : 1);  // no destructors, no gtest teardown
  }
  close(fds[1]);
  std::string report;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) report.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  EXPECT_EQ(report, std::to_string(static_cast<int>(Code::kConflict)) + "|database " + db +
                        " is already in use by another shepherdd (pid " + std::to_string(getpid()) + ")");
}

}  // namespace
}  // namespace shepherd
