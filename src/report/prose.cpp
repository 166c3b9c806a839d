// SPDX-License-Identifier: MIT
// Word wrapping for the text reports.

#include "prose.hpp"

#include <algorithm>
#include <vector>

namespace rlmem::detail {

std::string wrap(std::string_view text, std::size_t indent, std::size_t width) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = std::min(text.find(' ', start), text.size());
    std::string word(text.substr(start, end - start));
    bool unit = !words.empty() && (word.starts_with("B") || word.starts_with("KiB") || word.starts_with("MiB") ||
                                   word.starts_with("GiB") || word.starts_with("TiB"));
    if (unit) {
      words.back() += " " + word;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
    }
    start = end + 1;
  }
  std::string out;
  std::string line(indent, ' ');
  for (const std::string& word : words) {
    if (line.size() > indent && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.assign(indent, ' ');
    }
    if (line.size() > indent) line += ' ';
    line += word;
  }
  if (line.size() > indent) out += line + "\n";
  return out;
}

}  // namespace rlmem::detail
