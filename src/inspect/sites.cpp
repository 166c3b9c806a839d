// SPDX-License-Identifier: MIT
// Allocation sites: the first frame of a stack outside torch internals and generic plumbing,
// and the nearest frame of the user's own code.

#include <rlmem/inspect.hpp>

#include <array>
#include <string>
#include <string_view>

namespace rlmem {

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

// Native frames that belong to the allocator, the unwinder or the dispatcher, not to the caller.
constexpr std::array<std::string_view, 10> native_noise_prefixes = {
    "torch::unwind", "torch::CapturedTraceback", "torch::cuda::", "c10::cuda::CUDACachingAllocator",
    "c10::impl::", "c10::Dispatcher", "at::_ops::", "_Py", "Py", "??"};

bool ends_with(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.substr(text.size() - tail.size()) == tail;
}

bool is_python(std::string_view filename) { return ends_with(filename, ".py") || filename.starts_with("<"); }

bool is_library(std::string_view filename) {
  return filename.find("-packages/") != std::string_view::npos || filename.find("/lib/python3") != std::string_view::npos ||
         filename.starts_with("<frozen");
}

bool is_torch_internal(std::string_view filename) {
  return filename.find("-packages/torch/") != std::string_view::npos || filename.starts_with("torch/") ||
         filename.find("/site-packages/triton/") != std::string_view::npos;
}

bool is_plumbing(std::string_view filename, std::string_view function) {
  for (const frame_rule& rule : plumbing_rules) {
    if (filename.find(rule.path_part) != std::string_view::npos && (rule.function.empty() || rule.function == function)) {
      return true;
    }
  }
  return false;
}

// Shortens a path for people: library files from their package, others to two components.
std::string short_path(std::string_view filename) {
  if (auto at = filename.find("-packages/"); at != std::string_view::npos) return std::string(filename.substr(at + 10));
  auto last = filename.rfind('/');
  if (last == std::string_view::npos || last == 0) return std::string(filename);
  auto before = filename.rfind('/', last - 1);
  return std::string(before == std::string_view::npos ? filename : filename.substr(before + 1));
}

std::string frame_label(const snapshot& snap, const frame& f) {
  std::string_view filename = snap.str(f.filename);
  std::string_view name = snap.str(f.name);
  if (!is_python(filename)) return std::string(name);  // C++: the signature says it all
  std::string label = short_path(filename);
  if (f.line > 0) label += ":" + std::to_string(f.line);
  label += " ";
  label += name;
  return label;
}

}  // namespace

allocation_site resolve_site(const snapshot& snap, stack_id stack) {
  allocation_site site;
  site.stack = stack;
  auto frames = snap.stack(stack);
  if (frames.empty()) {
    site.label = "<no stack recorded>";
    return site;
  }
  const frame* chosen = nullptr;
  const frame* first_python = nullptr;
  for (frame_id id : frames) {
    const frame& f = snap.frames[id];
    std::string_view filename = snap.str(f.filename);
    if (!is_python(filename)) continue;
    if (first_python == nullptr) first_python = &f;
    if (chosen == nullptr && !is_torch_internal(filename) && !is_plumbing(filename, snap.str(f.name))) chosen = &f;
    if (!is_library(filename) && !filename.starts_with("<")) {
      site.user_frame = frame_label(snap, f);
      break;
    }
  }
  if (chosen == nullptr) chosen = first_python;
  if (chosen == nullptr) {  // C++ frames only
    chosen = &snap.frames[frames.front()];
    for (frame_id id : frames) {
      std::string_view name = snap.str(snap.frames[id].name);
      bool noise = false;
      for (std::string_view prefix : native_noise_prefixes) noise = noise || name.starts_with(prefix);
      if (!noise) {
        chosen = &snap.frames[id];
        break;
      }
    }
  }
  site.label = frame_label(snap, *chosen);
  return site;
}

}  // namespace rlmem
