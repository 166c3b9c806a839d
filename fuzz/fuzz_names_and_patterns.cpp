// SPDX-License-Identifier: MIT
// libFuzzer target for what a user or a file system names: a rank file name (folder mode) and a
// --step-marker pattern matched against a frame of any text. Input: "NAME\nPATTERN\nFRAME".
// A rank is small and never negative; a pattern is accepted or refused with one line, in time
// linear in the frame (RE2), never a crash.

#include <rlmem/inspect/compare.hpp>
#include <rlmem/inspect/inspect.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

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

  rlmem::inspect_options options;
  options.step_marker = std::string(pattern);
  rlmem::inspection result;
  std::string problem;
  bool ok = rlmem::inspect_checked(snapshot_with_frame(frame), options, result, problem);
  if (!ok && (problem.empty() || problem.find('\n') != std::string::npos)) __builtin_trap();
  if (ok && result.peak_allocated_bytes != 4096) __builtin_trap();
  return 0;
}
