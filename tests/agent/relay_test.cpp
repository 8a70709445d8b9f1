// agent/relay.h: the per-rank relay directories and their reading for a heartbeat (bounds, order, malformed
// files, symlinks, owners).
#include "agent/relay.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/agent/test_util.h"

namespace shepherd::agent {
namespace {

using testing::FileExists;
using testing::TempDir;

constexpr uid_t kNobody = 65534;

class RelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = MakeRelayDir(state_.path(), {"job-1", 2, 5}, std::nullopt);
    ASSERT_TRUE(d.ok()) << d.status().message();
    dir_ = *d;
  }
  // A batch file named for millisecond `ms` holding `n` step reports from `first` on.
  std::string Batch(long long ms, int n, int first = 0, const std::string& pad = "") {
    Json reports = Json::array();
    for (int i = 0; i < n; ++i) {
      Json r = {{"rank", 5}, {"attempt", 2}, {"kind", "step"}, {"step", first + i}};
      if (!pad.empty()) r["pad"] = pad;
      reports.push_back(r);
    }
    return Write(Name(ms), Json{{"reports", reports}}.dump());
  }
  static std::string Name(long long ms) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%013lld-%06d.json", ms, 1);
    return buf;
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static std::vector<int> Steps(const RelayRead& r) {
    std::vector<int> out;
    for (const Json& j : r.reports) out.push_back(j["step"].get<int>());
    return out;
  }

  TempDir state_;
  std::string dir_;
  const uid_t me_ = ::geteuid();
};

TEST_F(RelayTest, TheDirectoryIsTheRanksOwnMode0700AndStartsEmpty) {
  EXPECT_EQ(dir_, state_.path() + "/relay/job-1-a2-r5");
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, me_);
  Batch(1000, 1);  // an earlier agent's leftover is not relayed as the new rank's
  auto again = MakeRelayDir(state_.path(), {"job-1", 2, 5}, std::nullopt);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(HasRelayFiles(dir_, me_));
  Batch(2000, 1);
  EXPECT_TRUE(HasRelayFiles(dir_, me_));
  EXPECT_FALSE(HasRelayFiles(dir_, me_ + 1));
  if (me_ != 0) GTEST_SKIP() << "chown to another user needs root";
  auto theirs = MakeRelayDir(state_.path(), {"job-1", 2, 6}, RelayOwner{kNobody, kNobody});
  ASSERT_TRUE(theirs.ok()) << theirs.status().message();
  ASSERT_EQ(::stat(theirs->c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  RemoveRelayDir(*theirs);
  EXPECT_FALSE(FileExists(*theirs));
}

TEST_F(RelayTest, ReadsOldestFirstUpToTheReportBound) {
  Batch(3000, 100, 200);
  Batch(1000, 100, 0);
  Batch(2000, 100, 100);
  Write("1000-1.json", "{}");  // not a batch name: left alone
  Write(".123-4-0.tmp", "{\"reports\": [");
  RelayRead r = ReadRelayDir(dir_, me_, 256, kRelayMaxBytes);
  std::vector<int> want;
  for (int i = 0; i < 200; ++i) want.push_back(i);
  EXPECT_EQ(Steps(r), want);
  EXPECT_EQ(r.files, (std::vector<std::string>{dir_ + "/" + Name(1000), dir_ + "/" + Name(2000)}));
  EXPECT_TRUE(r.more);
  EXPECT_EQ(r.malformed, 0);
  DeleteRelayFiles(r.files);
  RelayRead next = ReadRelayDir(dir_, me_, 256, kRelayMaxBytes);
  EXPECT_EQ(next.reports.size(), 100u);
  EXPECT_EQ(next.reports[0]["step"], 200);
  EXPECT_FALSE(next.more);
  EXPECT_TRUE(FileExists(dir_ + "/1000-1.json"));
  EXPECT_TRUE(FileExists(dir_ + "/.123-4-0.tmp"));
}

TEST_F(RelayTest, ReadsWithinTheByteBoundAndTheHeartbeatsBudget) {
  const std::string pad(900, 'x');
  std::size_t one = std::filesystem::file_size(Batch(1000, 10, 0, pad));  // about 10 KB each
  Batch(2000, 10, 10, pad);
  Batch(3000, 10, 20, pad);
  RelayRead r = ReadRelayDir(dir_, me_, 256, 2 * one + one / 2);
  EXPECT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.bytes, std::filesystem::file_size(r.files[0]) + std::filesystem::file_size(r.files[1]));
  EXPECT_TRUE(r.more);
  RelayRead budgeted = ReadRelayDir(dir_, me_, 256, kRelayMaxBytes, one + one / 2);
  EXPECT_EQ(budgeted.files.size(), 1u);
  EXPECT_EQ(budgeted.malformed, 0);  // over the budget is not malformed: it waits
  EXPECT_TRUE(FileExists(dir_ + "/" + Name(3000)));
}

TEST_F(RelayTest, MalformedFilesAreDeletedUnreadAndCounted) {
  Batch(1000, 2, 0);
  Write(Name(2000), "not json");
  Write(Name(3000), R"({"reports": {"rank": 5}})");
  Write(Name(4000), R"({"reports": [1, 2]})");
  Write(Name(5000), R"([{"rank": 5}])");
  Batch(6000, 300, 100);                                // more reports than one heartbeat takes
  Batch(7000, 1, 0, std::string(kRelayMaxBytes, 'x'));  // larger than the byte bound
  Batch(8000, 1, 7);
  RelayRead r = ReadRelayDir(dir_, me_);
  EXPECT_EQ(r.malformed, 6);
  EXPECT_EQ(Steps(r), (std::vector<int>{0, 1, 7}));
  for (long long ms : {2000, 3000, 4000, 5000, 6000, 7000})
    EXPECT_FALSE(FileExists(dir_ + "/" + Name(ms))) << ms;
  EXPECT_TRUE(FileExists(dir_ + "/" + Name(1000)));  // valid files go only after a 200 answer
}

TEST_F(RelayTest, ASymlinkIsRemovedNeverFollowed) {
  TempDir elsewhere;
  const std::string secret = elsewhere.file("secret.json");
  std::ofstream(secret) << R"({"reports": [{"rank": 5, "attempt": 2, "kind": "step", "step": 99}]})";
  ASSERT_EQ(::symlink(secret.c_str(), (dir_ + "/" + Name(1000)).c_str()), 0);
  Batch(2000, 1, 1);
  RelayRead r = ReadRelayDir(dir_, me_);
  EXPECT_EQ(Steps(r), (std::vector<int>{1}));
  EXPECT_EQ(r.malformed, 1);
  EXPECT_FALSE(std::filesystem::is_symlink(dir_ + "/" + Name(1000)));
  EXPECT_TRUE(FileExists(secret));  // the target is untouched
  // A relay directory that is itself a symlink is not read.
  const std::string link = state_.path() + "/relay/job-1-a2-r9";
  ASSERT_EQ(::symlink(dir_.c_str(), link.c_str()), 0);
  EXPECT_TRUE(ReadRelayDir(link, me_).reports.empty());
}

TEST_F(RelayTest, OnlyTheRanksUsersFilesInTheRanksUsersDirectoryAreRead) {
  Batch(1000, 1, 0);
  // The directory is not the given user's: nothing read, nothing deleted.
  RelayRead other = ReadRelayDir(dir_, me_ + 1);
  EXPECT_TRUE(other.reports.empty());
  EXPECT_EQ(other.malformed, 0);
  EXPECT_TRUE(FileExists(dir_ + "/" + Name(1000)));
  if (me_ != 0) GTEST_SKIP() << "a file of another user needs root";
  const std::string planted = Batch(2000, 1, 1);
  ASSERT_EQ(::chown(planted.c_str(), kNobody, kNobody), 0);
  RelayRead r = ReadRelayDir(dir_, me_);
  EXPECT_EQ(Steps(r), (std::vector<int>{0}));
  EXPECT_EQ(r.malformed, 1);
  EXPECT_FALSE(FileExists(planted));
}

TEST(RelayFileName, ExactlyThirteenDigitsDashSixDigitsJson) {
  EXPECT_TRUE(IsRelayFileName("1764410000123-000042.json"));
  EXPECT_FALSE(IsRelayFileName("176441000012-000042.json"));
  EXPECT_FALSE(IsRelayFileName("1764410000123-00004a.json"));
  EXPECT_FALSE(IsRelayFileName("1764410000123-000042.json.tmp"));
  EXPECT_FALSE(IsRelayFileName("1764410000123_000042.json"));
}

}  // namespace
}  // namespace shepherd::agent
