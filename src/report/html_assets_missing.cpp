// SPDX-License-Identifier: MIT
// The assets of a build configured without node and npm: none, so `rlmem report` says so.

#include "html_assets.hpp"

namespace rlmem::detail {

const html_assets& bundled_html_assets() noexcept {
  static const html_assets none{};
  return none;
}

}  // namespace rlmem::detail
