// One database, one daemon: the lock file refuses a second open from this process or another one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
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

// The lock file is found by the path's name; the database file is locked by inode too, so another name
// for the same file (a symlink, a hard link) cannot start a second daemon on it.
TEST(LockTest, ASymlinkOrAHardLinkToADatabaseInUseIsConflict) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  Result<std::unique_ptr<Store>> first = OpenSqliteStore(db);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string sym = dir.File("alias.db"), hard = dir.File("hard.db");
  ASSERT_EQ(symlink(db.c_str(), sym.c_str()), 0);
  ASSERT_EQ(link(db.c_str(), hard.c_str()), 0);
  for (const std::string& other : {sym, hard}) {
    Result<std::unique_ptr<Store>> second = OpenSqliteStore(other);
    ASSERT_FALSE(second.ok()) << other;
    EXPECT_EQ(second.status().code(), Code::kConflict);
    EXPECT_THAT(second.status().message(), HasSubstr("is already in use by another shepherdd"));
  }
  first->reset();
  Result<std::unique_ptr<Store>> via_link = OpenSqliteStore(sym);  // free again: any name opens it
  EXPECT_TRUE(via_link.ok()) << via_link.status().message();
}

// It holds live rank credentials: owner-only, created so or tightened, with its -wal and -shm.
TEST(LockTest, TheDatabaseIsPrivateToItsOwner) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  const mode_t old_mask = umask(022);
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.status().message();
    WriteBatch b;
    b.Put({Collection::kMeta, "k", "", "{}"});
    (*store)->Write(std::move(b), [](Status s) { EXPECT_TRUE(s.ok()) << s.message(); });
    (*store)->Flush();
    struct stat st {};
    ASSERT_EQ(stat(db.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(stat((db + "-wal").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  ASSERT_EQ(chmod(db.c_str(), 0644), 0);  // made readable by someone else: tightened at the next start
  {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.status().message();
    struct stat st {};
    ASSERT_EQ(stat(db.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  umask(old_mask);
}

}  // namespace
}  // namespace shepherd
