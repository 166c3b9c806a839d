// SPDX-License-Identifier: MIT
// write_output_file (issue 28 items 1 and 2): a regular file is replaced whole through a
// temporary nobody can plant; a link, a FIFO or a device keeps what it is.

#include <rlmem/base/output_file.hpp>

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>

namespace rlmem {

namespace {

// A fresh folder under the temporary directory, removed when the test ends.
class scratch_folder {
 public:
  scratch_folder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rlmem-output-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? std::filesystem::path(pattern) : std::filesystem::path();
  }
  ~scratch_folder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // The names in the folder, sorted, one per line.
  std::string listing() const {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) names.insert(entry.path().filename().string());
    std::string joined;
    for (const std::string& name : names) joined += name + "\n";
    return joined;
  }

 private:
  std::filesystem::path path_;
};

std::string contents_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST(write_output_file, a_regular_file_is_replaced_and_no_temporary_remains) {
  scratch_folder folder;
  put(folder / "page.html", "old");
  output_written written = write_output_file(folder / "page.html", "new page");
  EXPECT_EQ(written.error_number, 0) << written.problem;
  EXPECT_EQ(contents_of(folder / "page.html"), "new page");
  EXPECT_EQ(folder.listing(), "page.html\n") << "expected only the page in the folder";
}

TEST(write_output_file, a_replaced_file_keeps_its_permissions) {
  scratch_folder folder;
  put(folder / "page.html", "old");
  ASSERT_EQ(::chmod((folder / "page.html").c_str(), 0640), 0);
  ASSERT_EQ(write_output_file(folder / "page.html", "new").error_number, 0);
  struct stat status {};
  ASSERT_EQ(::stat((folder / "page.html").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0640u) << "expected mode 0640 kept, saw " << std::oct << (status.st_mode & 07777);
}

TEST(write_output_file, a_symlink_stays_a_link_and_its_target_gets_the_contents) {
  scratch_folder folder;
  put(folder / "target.html", "old");
  ASSERT_EQ(::symlink("target.html", (folder / "link.html").c_str()), 0);
  output_written written = write_output_file(folder / "link.html", "new page");
  EXPECT_EQ(written.error_number, 0) << written.problem;
  EXPECT_TRUE(std::filesystem::is_symlink(folder / "link.html")) << "expected link.html still a symbolic link";
  EXPECT_EQ(std::filesystem::read_symlink(folder / "link.html").string(), "target.html");
  EXPECT_EQ(contents_of(folder / "target.html"), "new page");
}

TEST(write_output_file, a_dangling_symlink_creates_its_target) {
  scratch_folder folder;
  ASSERT_EQ(::symlink("made.html", (folder / "link.html").c_str()), 0);
  ASSERT_EQ(write_output_file(folder / "link.html", "page").error_number, 0);
  EXPECT_TRUE(std::filesystem::is_symlink(folder / "link.html"));
  EXPECT_EQ(contents_of(folder / "made.html"), "page");
}

TEST(write_output_file, a_fifo_is_written_in_place_for_its_reader) {
  scratch_folder folder;
  ASSERT_EQ(::mkfifo((folder / "page.fifo").c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = contents_of(folder / "page.fifo"); });
  output_written written = write_output_file(folder / "page.fifo", "through the pipe");
  reader.join();
  EXPECT_EQ(written.error_number, 0) << written.problem;
  EXPECT_EQ(received, "through the pipe");
  struct stat status {};
  ASSERT_EQ(::lstat((folder / "page.fifo").c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode)) << "expected page.fifo still a FIFO";
}

TEST(write_output_file, dev_null_stays_a_character_device) {
  output_written written = write_output_file("/dev/null", "discarded");
  EXPECT_EQ(written.error_number, 0) << written.problem;
  struct stat status {};
  ASSERT_EQ(::lstat("/dev/null", &status), 0);
  EXPECT_TRUE(S_ISCHR(status.st_mode)) << "expected /dev/null still a character device";
}

TEST(write_output_file, a_descriptor_name_writes_to_that_descriptor) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  output_written written = write_output_file("/dev/fd/" + std::to_string(ends[1]), "to the pipe");
  ::close(ends[1]);
  EXPECT_EQ(written.error_number, 0) << written.problem;
  char received[32] = {};
  ssize_t got = ::read(ends[0], received, sizeof received);
  ::close(ends[0]);
  EXPECT_EQ(std::string(received, got > 0 ? static_cast<std::size_t>(got) : 0), "to the pipe");
}

TEST(write_output_file, a_planted_partial_symlink_is_never_followed) {
  scratch_folder folder;
  put(folder / "victim", "victim");
  ASSERT_EQ(::symlink("victim", (folder / "page.html.partial").c_str()), 0);
  ASSERT_EQ(write_output_file(folder / "page.html", "page").error_number, 0);
  EXPECT_EQ(contents_of(folder / "victim"), "victim") << "the planted link was written through";
  EXPECT_EQ(std::filesystem::read_symlink(folder / "page.html.partial").string(), "victim");
  EXPECT_EQ(contents_of(folder / "page.html"), "page");
  EXPECT_EQ(folder.listing(), "page.html\npage.html.partial\nvictim\n");
}

TEST(write_output_file, a_missing_folder_is_one_line_and_nothing_is_left) {
  scratch_folder folder;
  std::string path = folder / "no/such/page.html";
  output_written written = write_output_file(path, "page");
  EXPECT_EQ(written.error_number, ENOENT);
  EXPECT_EQ(written.problem, "cannot write " + path + ": No such file or directory");
  EXPECT_EQ(folder.listing(), "");
}

TEST(write_output_file, a_folder_is_refused_not_replaced) {
  scratch_folder folder;
  std::filesystem::create_directory(folder / "dir");
  output_written written = write_output_file(folder / "dir", "page");
  EXPECT_EQ(written.error_number, EISDIR) << written.problem;
  EXPECT_TRUE(std::filesystem::is_directory(folder / "dir"));
}

TEST(write_output_file, a_loop_of_links_is_refused) {
  scratch_folder folder;
  ASSERT_EQ(::symlink("b", (folder / "a").c_str()), 0);
  ASSERT_EQ(::symlink("a", (folder / "b").c_str()), 0);
  EXPECT_EQ(write_output_file(folder / "a", "page").error_number, ELOOP);
}

}  // namespace rlmem
