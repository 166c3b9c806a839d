// SPDX-License-Identifier: MIT
// Frame formatting shared by the text and JSON reports.

#include "stack_text.hpp"

#include <rlmem/base/format.hpp>

namespace rlmem::detail {

std::string frame_text(const snapshot& snap, frame_id id) {
  const frame& f = snap.frames[id];
  std::string text = elide_middle(snap.str(f.name));
  std::string_view filename = snap.str(f.filename);
  if (filename.empty() || filename == "??") return text;
  text += " (";
  text += elide_middle(filename);
  if (f.line > 0) text += ":" + std::to_string(f.line);
  text += ")";
  return text;
}

}  // namespace rlmem::detail
