// SPDX-License-Identifier: MIT
// libFuzzer target for what a user or a file system names: a rank file name (folder mode, alone
// and as the one file of a folder) and a --step-marker pattern matched against a frame of any
// text. Input: "NAME\nPATTERN\nFRAME". A rank is small and never negative; a folder and a pattern
// are accepted or refused with a named code and one line, in time linear in the frame (RE2),
// never a crash.

#include <rlmem/inspect/compare.hpp>
#include <rlmem/inspect/inspect.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace {

// A folder of this process's own, removed at exit, that holds one file at a time.
struct scratch_folder {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("rlmem_fuzz_ranks_" + std::to_string(::getpid()));
  scratch_folder() { std::filesystem::create_directories(path); }
  ~scratch_folder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// `name` as the only file of a folder: listed with its rank, or refused with a named code and a
// line. Names no folder can hold (a separator, NUL, "." or "..", too long) are left out.
void check_folder_of(std::string_view name) {
  if (name.empty() || name.size() > 200 || name == "." || name == ".." || name.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos) {
    return;
  }
  static scratch_folder folder;
  std::filesystem::path file = folder.path / std::string(name);
  if (!std::ofstream(file)) return;
  auto listed = rlmem::ranked_snapshot_files_in(folder.path);
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  if (listed.ok()) {
    if (listed.code() != rlmem::inspect_errc::ok || listed.value().size() != 1 || !rlmem::rank_in_file_name(name)) __builtin_trap();
    return;
  }
  const std::string& problem = listed.failure().detail;
  if (listed.code() == rlmem::inspect_errc::ok || rlmem::error_name(listed.code()) == "UNKNOWN" || problem.empty()) __builtin_trap();
}

// A one-device snapshot whose only frame is `frame_name` (in train.py): one allocation, freed.
rlmem::snapshot snapshot_with_frame(std::string_view frame_name) {
  rlmem::snapshot snap;
  snap.strings = {"", std::string(frame_name), "train.py"};
  snap.frames = {{1, 2, 7}};
  snap.stack_frames = {0};
  snap.stack_offsets = {0, 0, 1};
  snap.streams = {0};
  rlmem::trace_event alloc;
  alloc.action = rlmem::trace_action::alloc;
  alloc.addr = 0x100000;
  alloc.size = 4096;
  alloc.stack = 1;
  rlmem::trace_event freed = alloc;
  freed.action = rlmem::trace_action::free_requested;
  rlmem::trace_event completed = alloc;
  completed.action = rlmem::trace_action::free_completed;
  snap.events = {alloc, freed, completed};
  snap.device_traces = {{0, 0, 3}};
  rlmem::segment seg;
  seg.address = 0x100000;
  seg.total_size = 2 << 20;
  seg.block_count = 1;
  snap.segments = {seg};
  snap.blocks = {{0x100000, 2 << 20, 0, 0, rlmem::block_state::inactive}};
  return snap;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t first = input.find('\n');
  std::string_view name = input.substr(0, first);
  std::string_view rest = first == std::string_view::npos ? std::string_view{} : input.substr(first + 1);
  std::size_t second = rest.find('\n');
  std::string_view pattern = rest.substr(0, second);
  std::string_view frame = second == std::string_view::npos ? std::string_view{} : rest.substr(second + 1);

  if (auto rank = rlmem::rank_in_file_name(name); rank && (*rank < 0 || *rank > 9'999'999)) __builtin_trap();

  // A folder of per-rank snapshots whose only file has this name: refused with a named code, or
  // listed with its rank (the file is made where the name is one a folder can hold).
  check_folder_of(name);

  rlmem::inspect_options options;
  options.step_marker = std::string(pattern);
  auto checked = rlmem::inspect_checked(snapshot_with_frame(frame), options);
  if (checked.ok()) {
    if (checked.code() != rlmem::inspect_errc::ok || checked.value().peak_allocated_bytes != 4096) __builtin_trap();
  } else {
    // Only the marker can be wrong here: a named code and one line.
    const std::string& problem = checked.failure().detail;
    if (checked.code() != rlmem::inspect_errc::step_marker_too_long && checked.code() != rlmem::inspect_errc::invalid_step_marker) {
      __builtin_trap();
    }
    if (rlmem::error_name(checked.code()) == "UNKNOWN" || problem.empty() || problem.find('\n') != std::string::npos) __builtin_trap();
  }
  return 0;
}
