// SPDX-License-Identifier: MIT
// The data of the HTML page of `rlmem report FILE`: `rlmem inspect --json`'s document as that
// command prints it, and beside it only what the views draw that the document does not hold
// (the timeline per pixel column, the largest allocations, the tree and the segment maps at the
// peak, the sites and stacks these refer to).

#include "html_assets.hpp"
#include "html_page.hpp"
#include "stack_text.hpp"

#include <rlmem/report/report.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <span>
#include <unordered_map>

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

// Frames and stacks as tables: each frame's text once, each stack a list of frame indices, so
// a frame repeated over thousands of stacks costs its text once.
class stack_tables {
 public:
  explicit stack_tables(const snapshot& snap) : snap_(snap) {}

  std::uint32_t frame(frame_id id) {
    auto [found, added] = frame_index_.try_emplace(id, static_cast<std::uint32_t>(frames_.size()));
    if (added) frames_.push_back(detail::frame_text(snap_, id));
    return found->second;
  }

  std::uint32_t stack(stack_id id) {
    auto [found, added] = stack_index_.try_emplace(id, static_cast<std::uint32_t>(stacks_.size()));
    if (added) {
      json frames = json::array();
      std::span<const frame_id> all = snap_.stack(id);
      for (frame_id one : all.first(std::min(all.size(), detail::max_json_stack_frames))) frames.push_back(frame(one));
      stacks_.push_back(std::move(frames));
    }
    return found->second;
  }

  json frames() const { return frames_; }
  json stacks() const { return stacks_; }

 private:
  const snapshot& snap_;
  std::unordered_map<frame_id, std::uint32_t> frame_index_;
  std::unordered_map<stack_id, std::uint32_t> stack_index_;
  std::vector<std::string> frames_;
  json stacks_ = json::array();
};

json site_json(const allocation_site& site, stack_tables& tables) {
  return {{"label", site.label}, {"user_frame", site.user_frame}, {"stack", tables.stack(site.stack)}};
}

// Column-wise arrays: what uPlot draws from, and about half the size of one object per row.
json timeline_json(const memory_views& views) {
  json out = {{"first_event", json::array()},     {"last_event", json::array()},
              {"first_time_us", json::array()},   {"allocated_min", json::array()},
              {"allocated_max", json::array()},   {"reserved_min", json::array()},
              {"reserved_max", json::array()},    {"unallocated_max", json::array()},
              {"largest_alloc_event", json::array()}, {"largest_alloc_bytes", json::array()},
              {"largest_alloc_site", json::array()}};
  for (const timeline_column& column : views.columns) {
    out["first_event"].push_back(column.first_event);
    out["last_event"].push_back(column.last_event);
    out["first_time_us"].push_back(column.first_time_us);
    out["allocated_min"].push_back(column.allocated_min);
    out["allocated_max"].push_back(column.allocated_max);
    out["reserved_min"].push_back(column.reserved_min);
    out["reserved_max"].push_back(column.reserved_max);
    out["unallocated_max"].push_back(column.unallocated_max);
    out["largest_alloc_event"].push_back(column.largest_alloc_event);
    out["largest_alloc_bytes"].push_back(column.largest_alloc_bytes);
    out["largest_alloc_site"].push_back(column.largest_alloc_site);
  }
  return out;
}

json bands_json(const memory_views& views) {
  json out = {{"allocations", views.allocations}, {"alloc_event", json::array()}, {"free_event", json::array()},
              {"bytes", json::array()},         {"offset_bytes", json::array()}, {"site", json::array()},
              {"category", json::array()}};
  for (const allocation_band& band : views.bands) {
    out["alloc_event"].push_back(band.alloc_event);
    out["free_event"].push_back(band.free_event);
    out["bytes"].push_back(band.bytes);
    out["offset_bytes"].push_back(band.offset_bytes);
    out["site"].push_back(band.site);
    out["category"].push_back(static_cast<int>(band.category));
  }
  return out;
}

// A node's label: a frame index, or a negative code the page names (-1 root, -2 made before
// recording began, -3 no Python stack); `inside` marks the node folding the frames inside the
// user's code (torch's, libraries'), named by one of them.
json tree_json(const memory_views& views, stack_tables& tables) {
  json out = {{"event", views.tree_event},     {"nodes_before_cut", views.peak_tree_nodes_before_cut},
              {"parent", json::array()},       {"frame", json::array()},
              {"bytes", json::array()},        {"count", json::array()},
              {"category", json::array()}, {"inside", json::array()}};
  for (const stack_node& node : views.peak_tree) {
    out["parent"].push_back(node.parent);
    switch (node.kind) {
      case stack_node_kind::root: out["frame"].push_back(-1); break;
      case stack_node_kind::allocated_before_trace: out["frame"].push_back(-2); break;
      case stack_node_kind::no_python_stack: out["frame"].push_back(-3); break;
      case stack_node_kind::frame:
      case stack_node_kind::inside_user_code: out["frame"].push_back(tables.frame(node.frame)); break;
    }
    out["inside"].push_back(node.kind == stack_node_kind::inside_user_code ? 1 : 0);
    out["bytes"].push_back(node.bytes);
    out["count"].push_back(node.count);
    out["category"].push_back(static_cast<int>(node.category));
  }
  return out;
}

// The stack of each OOM's request, in the order of the document's "oom".
json oom_request_stacks(const inspection& result, stack_tables& tables) {
  json stacks = json::array();
  for (const oom_report& oom : result.ooms) stacks.push_back(tables.stack(oom.request_site.stack));
  return stacks;
}

// The largest free block, sampled: the document has the figures at the peak and at the end.
json free_blocks_json(const memory_views& views) {
  json samples = {{"event", json::array()}, {"largest_free_bytes", json::array()}, {"free_bytes", json::array()}};
  for (const free_block_sample& sample : views.free_blocks) {
    samples["event"].push_back(sample.event);
    samples["largest_free_bytes"].push_back(sample.largest_free_bytes);
    samples["free_bytes"].push_back(sample.free_bytes);
  }
  return samples;
}

json pool_json(const pool_layout& pool) {
  return {{"pool", pool_name(pool.small_pool)}, {"stream", pool.stream}, {"segments", pool.segments},
          {"bytes", pool.bytes}, {"block_bytes", pool.block_bytes}, {"free_bytes", pool.free_bytes},
          {"largest_free_bytes", pool.largest_free_bytes}};
}

// A piece's kind: 0 a live block, 1 a block freed but not yet reusable, 2 a free gap.
json segment_json(const segment_layout& seg) {
  json pieces = {{"offset_bytes", json::array()}, {"bytes", json::array()}, {"kind", json::array()},
                 {"site", json::array()}, {"category", json::array()}};
  for (const segment_piece& piece : seg.pieces) {
    pieces["offset_bytes"].push_back(piece.offset_bytes);
    pieces["bytes"].push_back(piece.bytes);
    pieces["kind"].push_back(piece.free ? 2 : piece.pending_free ? 1 : 0);
    pieces["site"].push_back(piece.site);
    pieces["category"].push_back(static_cast<int>(piece.category));
  }
  return {{"address", fmt::format("{:#x}", seg.address)},
          {"bytes", seg.bytes},
          {"stream", seg.stream},
          {"pool", pool_name(seg.small_pool)},
          {"blocks", seg.blocks},
          {"block_bytes", seg.block_bytes},
          {"gaps", seg.gaps},
          {"free_bytes", seg.free_bytes},
          {"largest_free_bytes", seg.largest_free_bytes},
          {"pieces_left_out", seg.pieces_left_out},
          {"bytes_left_out", seg.bytes_left_out},
          {"pieces", pieces}};
}

json segment_map_json(const segment_map& map) {
  json pools = json::array();
  for (const pool_layout& pool : map.pools) pools.push_back(pool_json(pool));
  json segments = json::array();
  for (const segment_layout& seg : map.segments) segments.push_back(segment_json(seg));
  return {{"event", map.event},
          {"pools", pools},
          {"segments", segments},
          {"segments_left_out", map.segments_left_out},
          {"bytes_left_out", map.bytes_left_out},
          {"free_bytes_left_out", map.free_bytes_left_out},
          {"largest_free_left_out", map.largest_free_left_out}};
}

}  // namespace

bool html_report_available() noexcept { return detail::bundled_html_assets().available; }

std::string render_inspection_html(const snapshot& snap, const inspection& result, const memory_views& views,
                                   const std::string& source) {
  stack_tables tables(snap);
  json views_data;
  views_data["kind"] = "inspection";
  views_data["timeline"] = timeline_json(views);
  views_data["bands"] = bands_json(views);
  views_data["peak_tree"] = tree_json(views, tables);
  views_data["free_blocks"] = free_blocks_json(views);
  views_data["peak_segments"] = segment_map_json(views.peak_segments);
  json oom_maps = json::array();
  for (const segment_map& map : views.oom_segments) oom_maps.push_back(segment_map_json(map));
  views_data["oom_segments"] = oom_maps;
  views_data["oom_request_stacks"] = oom_request_stacks(result, tables);
  json sites = json::array();
  for (const allocation_site& site : views.sites) sites.push_back(site_json(site, tables));
  views_data["sites"] = sites;
  // Last: the tables hold every frame and stack the parts above refer to.
  views_data["stacks"] = tables.stacks();
  views_data["frames"] = tables.frames();
  return detail::html_page(views_data, render_inspection_json(snap, result, source));
}

}  // namespace rlmem
