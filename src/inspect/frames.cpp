// SPDX-License-Identifier: MIT
// Facts about frames, computed once per distinct frame (see frames.hpp).

#include "frames.hpp"

#include <algorithm>
#include <array>

namespace rlmem::detail {

namespace {

struct frame_rule {
  std::string_view path_part;  // matched anywhere in the filename
  std::string_view function;   // "" matches every function
};

// Frames that only pass a call along: decorators, module __call__ wrappers, context managers.
constexpr std::array<frame_rule, 9> plumbing_rules = {{
    {"/contextlib.py", ""},
    {"/functools.py", ""},
    {"transformers/utils/generic.py", "wrapper"},
    {"transformers/utils/output_capturing.py", ""},
    {"transformers/modeling_layers.py", "__call__"},
    {"transformers/utils/deprecation.py", ""},
    {"accelerate/hooks.py", ""},
    {"accelerate/utils/operations.py", ""},
    {"/typing_extensions.py", ""},
}};

// Native frames that belong to the allocator, the unwinder, the dispatcher or the interpreter:
// the operator that wanted the memory is further out.
constexpr std::array<std::string_view, 20> native_helper_prefixes = {
    "torch::unwind", "torch::CapturedTraceback", "torch::cuda::", "c10::", "at::detail::", "at::native::empty",
    "at::native::_empty", "at::empty", "at::_ops::", "at::(anonymous namespace)::", "at::meta::",
    "torch::autograd::VariableType::", "std::", "_Py", "Py", "??", "__libc", "_start", "start_thread", "clone"};

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// A UTF-8 continuation byte: cutting before one would split a character.

// Shortens a path for people: library files from their package, others to two components.
std::string_view short_path(std::string_view filename) {
  if (auto at = filename.find("-packages/"); at != std::string_view::npos) return filename.substr(at + 10);
  auto last = filename.rfind('/');
  if (last == std::string_view::npos || last == 0) return filename;
  auto before = filename.rfind('/', last - 1);
  return before == std::string_view::npos ? filename : filename.substr(before + 1);
}

}  // namespace

frame_index::frame_index(const snapshot& snap)
    : snap_(snap), filename_state_(snap.strings.size(), 0), facts_(snap.frames.size(), 0) {}

std::string_view frame_index::filename(frame_id id) {
  string_id text = snap_.frames[id].filename;
  std::uint32_t& state = filename_state_[text];
  if (state == 0) {
    std::string_view raw = snap_.str(text);
    if (raw.find('\\') == std::string_view::npos) {
      state = 1;
    } else {
      std::string forward(raw);
      std::replace(forward.begin(), forward.end(), '\\', '/');
      state = static_cast<std::uint32_t>(2 + normalised_.size());
      normalised_.push_back(std::move(forward));
    }
  }
  return state == 1 ? snap_.str(text) : std::string_view(normalised_[state - 2]);
}

void frame_index::match_text(frame_id id, std::string& out) {
  out.assign(filename(id));
  out += ':';
  out += std::to_string(snap_.frames[id].line);
  out += ' ';
  out += name(id);
}

std::uint8_t frame_index::facts(frame_id id) {
  std::uint8_t& found = facts_[id];
  if (found & known) return found;
  std::string_view file = filename(id);
  std::string_view function = name(id);
  found = known;
  if (file.ends_with(".py") || file.starts_with("<")) found |= python;
  // "/Lib/" is the standard library of a Windows Python (C:\Python311\Lib\contextlib.py).
  if (contains(file, "-packages/") || contains(file, "/lib/python3") || contains(file, "/Lib/") || file.starts_with("<frozen")) {
    found |= library;
  }
  if (contains(file, "-packages/torch/") || file.starts_with("torch/") || contains(file, "/site-packages/triton/")) found |= torch_internal;
  for (const frame_rule& rule : plumbing_rules) {
    if (contains(file, rule.path_part) && (rule.function.empty() || rule.function == function)) found |= plumbing;
  }
  if (contains(file, "torch/optim/")) found |= optimizer;
  return found;
}

const frame_index::native_role& frame_index::native(frame_id id) {
  if (native_.empty()) native_.resize(snap_.frames.size());
  native_role& role = native_[id];
  if (role.known) return role;
  role.known = true;
  std::string_view function = name(id);
  for (std::string_view prefix : native_helper_prefixes) role.helper = role.helper || function.starts_with(prefix);
  constexpr std::string_view ops = "at::_ops::";
  if (function.starts_with(ops)) {
    std::size_t end = function.find("::", ops.size());
    role.op = function.substr(ops.size(), end == std::string_view::npos ? std::string_view::npos : end - ops.size());
    role.factory = contains(role.op, "empty");
  }
  // Autograd nodes run backward: torch::autograd::generated::BmmBackward0::apply(...).
  constexpr std::string_view autograd = "torch::autograd::";
  constexpr std::string_view apply = "::apply(";
  if (function.starts_with(autograd)) {
    std::size_t at = function.find(apply);
    if (at != std::string_view::npos) {
      std::string_view owner = function.substr(0, at);
      role.node = owner.substr(owner.rfind("::") + 2);
    }
  }
  return role;
}

std::string frame_index::label(frame_id id) {
  std::int64_t line = snap_.frames[id].line;
  return label_of_lines(id, line > 0 ? std::span<const std::int64_t>(&line, 1) : std::span<const std::int64_t>{});
}

std::string frame_index::label_of_lines(frame_id id, std::span<const std::int64_t> lines) {
  if (!is_python(id)) return elide_middle(name(id));  // C++: the signature says it all
  // Each part is cut before joining, so a label never copies more than its bound of a frame.
  std::string label = elide_middle(short_path(filename(id)));
  char separator = ':';
  for (std::int64_t line : lines) {
    label += separator;
    label += std::to_string(line);
    separator = ',';
    if (label.size() > max_label_bytes) break;  // the rest would be elided anyway
  }
  label += " ";
  label += elide_middle(name(id));
  return elide_middle(label);
}

}  // namespace rlmem::detail
