// SPDX-License-Identifier: MIT
#pragma once
// The live bytes of every allocation site through inspect()'s forward pass, and their series at
// the step ends that leak detection reads.

#include "analysis.hpp"

#include <rlmem/base/saturating.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace rlmem::detail {

// Live bytes of every site, kept up to date event by event (O(1) per change), and the sparse
// series of their figures at step ends: a site is written at a step end only when it changed.
class site_tracker {
 public:
  void change(std::uint32_t site, std::int64_t bytes, std::int32_t count, stack_id stack) {
    if (site >= live_.size()) {
      live_.resize(site + 1);
      series_.resize(site + 1);
    }
    live_site& live = live_[site];
    live.bytes = saturating_add(live.bytes, bytes);
    live.count += count;
    if (bytes > 0 && static_cast<std::uint64_t>(bytes) > live.largest_made) {
      live.largest_made = static_cast<std::uint64_t>(bytes);
      live.largest_stack = stack;
    }
    if (!live.touched) {
      live.touched = true;
      touched_.push_back(site);
    }
  }

  // Writes the figures of the sites changed since the last step end; O(those sites).
  void end_step() {
    for (std::uint32_t site : touched_) {
      live_site& live = live_[site];
      live.touched = false;
      site_series& one = series_[site];
      auto count = static_cast<std::uint64_t>(std::max<std::int64_t>(live.count, 0));
      bool same = one.steps.empty() ? live.bytes == 0 && count == 0 : one.bytes.back() == live.bytes && one.counts.back() == count;
      if (same) continue;
      one.steps.push_back(step_ends_);
      one.bytes.push_back(live.bytes);
      one.counts.push_back(count);
    }
    touched_.clear();
    ++step_ends_;
  }

  // The site holding the most live bytes now (O(sites)), or false when none holds any.
  bool largest(std::uint32_t& site, std::uint64_t& bytes) const {
    bytes = 0;
    for (std::uint32_t id = 0; id < live_.size(); ++id) {
      if (live_[id].bytes > 0 && static_cast<std::uint64_t>(live_[id].bytes) > bytes) {
        bytes = static_cast<std::uint64_t>(live_[id].bytes);
        site = id;
      }
    }
    return bytes > 0;
  }
  stack_id representative_stack(std::uint32_t site) const { return site < live_.size() ? live_[site].largest_stack : 0; }

  std::vector<site_series>& series() { return series_; }
  std::size_t step_ends() const { return step_ends_; }

 private:
  struct live_site {
    std::int64_t bytes = 0;
    std::int64_t count = 0;
    std::uint64_t largest_made = 0;  // the largest allocation made at the site
    stack_id largest_stack = 0;
    bool touched = false;            // changed since the last step end
  };
  std::vector<live_site> live_;
  std::vector<site_series> series_;
  std::vector<std::uint32_t> touched_;
  std::uint32_t step_ends_ = 0;
};

}  // namespace rlmem::detail
