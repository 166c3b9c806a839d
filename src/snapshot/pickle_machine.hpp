// SPDX-License-Identifier: MIT
#pragma once
// A pickle virtual machine restricted to data opcodes (protocols 2 to 5). It never imports,
// calls or builds objects: opcodes that would are refused with their name and offset.

#include "byte_source.hpp"
#include "snapshot_builder.hpp"
#include "value.hpp"

#include <rlmem/base/error.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

namespace rlmem::detail {

/// Runs the pickle in `input` up to STOP, handing containers to `builder` as they complete.
/// On success `root` holds the consumed top value and the input has no bytes left.
/// `size_hint` (0 if unknown) is the expected pickle size, used only to size buffers up front.
/// `trace_entry_shortcut` and `prefault_from_bytes` as in read_options.
bool run_pickle(input_window& input, const read_limits& limits, snapshot_builder& builder, value& root,
                error& failure, const std::function<void()>& on_progress, std::uint64_t size_hint,
                bool trace_entry_shortcut, std::uint64_t prefault_from_bytes);

/// The name of a pickle opcode byte ("GLOBAL"), or an empty view when the byte is no opcode.
std::string_view opcode_name(unsigned char opcode) noexcept;

}  // namespace rlmem::detail
