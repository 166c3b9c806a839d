// SPDX-License-Identifier: MIT
// The page of `rlmem report`: it carries `rlmem inspect --json`'s document byte for byte, its
// views' data equals inspect()'s figures on real fixtures, it loads nothing from the network,
// stays small, and a hostile snapshot's strings stay text.

#include "fixtures.hpp"
#include "grpo_plan.hpp"
#include "inspect/crafted.hpp"
#include "inspect/frames.hpp"
#include "report/stack_text.hpp"

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/inspect/compare.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/plan/plan.hpp>
#include <rlmem/replay/replay.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/inspect/views.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <span>
#include <utility>

namespace rlmem {

using testing::crafted_snapshot;
using testing::fixture;

namespace {

constexpr std::string_view data_open = R"(<script type="application/json" id="rlmem-data">)";
constexpr std::string_view document_open = R"(<script type="application/json" id="rlmem-document">)";

struct rendered {
  inspection result;
  memory_views views;
  std::string page;
  nlohmann::json data;      ///< the views' data
  std::string document_text;  ///< the inspect document as the page carries it
  nlohmann::json document;
};

// The text of a page's JSON block.
std::string block_text(const std::string& page, std::string_view open) {
  std::size_t start = page.find(open);
  if (start == std::string::npos) {
    ADD_FAILURE() << "expected the block " << open << ", found none";
    return "null";
  }
  start += open.size();
  std::size_t end = page.find("</script>", start);
  return page.substr(start, end - start);
}

// A JSON block parsed as the page's script parses it.
nlohmann::json embedded_data(const std::string& page) { return nlohmann::json::parse(block_text(page, data_open)); }

rendered render(const snapshot& snap, const std::string& source) {
  rendered out;
  out.result = inspect(snap);
  out.views = build_memory_views(snap, out.result, {});
  out.page = render_inspection_html(snap, out.result, out.views, source);
  out.data = embedded_data(out.page);
  out.document_text = block_text(out.page, document_open);
  out.document = nlohmann::json::parse(out.document_text);
  return out;
}

// Undoes the page's escapes of '<', U+2028 and U+2029 (JSON.parse reads them as the characters).
std::string unescaped(std::string text) {
  for (const auto& [escape, character] : {std::pair<std::string_view, std::string_view>{"\\u003c", "<"},
                                          {"\\u2028", "\u2028"},
                                          {"\\u2029", "\u2029"}}) {
    for (std::size_t at = text.find(escape); at != std::string::npos; at = text.find(escape, at + character.size())) {
      text.replace(at, escape.size(), character);
    }
  }
  return text;
}

std::size_t occurrences(std::string_view text, std::string_view part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

std::int64_t max_of(const nlohmann::json& values) {
  std::int64_t most = INT64_MIN;
  for (const auto& value : values) most = std::max(most, value.get<std::int64_t>());
  return most;
}

#define SKIP_WITHOUT_ASSETS() \
  if (!html_report_available()) GTEST_SKIP() << "this build has no browser assets (node/npm missing when configured)"

}  // namespace

// Issue 31, item 3: the page built its own copy of the inspect document, and it drifted ("line": 0
// where the JSON said null, user_frame dropped). It now carries the document itself: the bytes
// `rlmem inspect --json` prints, '<' and the line separators escaped as JSON allows.
TEST(html_report, carries_the_inspect_json_document_byte_for_byte) {
  SKIP_WITHOUT_ASSETS();
  for (const char* name : {"grpo_leak_logits.pickle.zst", "frag_default_oom.pickle.zst", "tiny_oom_cpp_stacks.pickle"}) {
    const snapshot& snap = fixture(name);
    rendered made = render(snap, name);
    const std::string printed = render_inspection_json(snap, made.result, name);
    EXPECT_EQ(unescaped(made.document_text), printed) << name;
    EXPECT_EQ(made.document, nlohmann::json::parse(printed)) << name;
    EXPECT_EQ(made.data.find("summary"), made.data.end()) << name << ": the views' data repeats the document's summary";
    EXPECT_EQ(made.data["oom_request_stacks"].size(), made.result.ooms.size()) << name;
  }
}

TEST(html_report, data_matches_inspect_on_the_leak_fixture) {
  SKIP_WITHOUT_ASSETS();
  const snapshot& snap = fixture("grpo_leak_logits.pickle.zst");
  rendered made = render(snap, "grpo_leak_logits.pickle.zst");
  const nlohmann::json& data = made.data;
  const nlohmann::json& document = made.document;
  const inspection& result = made.result;
  EXPECT_EQ(document["summary"]["events"], result.events);
  EXPECT_EQ(document["summary"]["peak_allocated_bytes"], result.peak_allocated_bytes);
  EXPECT_EQ(document["summary"]["peak_allocated_event"], result.peak_allocated_event);
  EXPECT_EQ(document["summary"]["peak_reserved_bytes"], result.peak_reserved_bytes);
  // Every event is in one column, so the envelopes' maxima are the peaks, exactly.
  const nlohmann::json& columns = data["timeline"];
  EXPECT_EQ(max_of(columns["allocated_max"]), result.peak_allocated_bytes);
  EXPECT_EQ(max_of(columns["reserved_max"]), result.peak_reserved_bytes);
  // Columns hold events; the state before the first one is in the summary.
  EXPECT_EQ(std::max(max_of(columns["unallocated_max"]), result.memory.reserved_at_start - result.memory.allocated_at_start),
            result.fragmentation.max_unallocated_bytes);
  ASSERT_FALSE(columns["first_event"].empty());
  EXPECT_EQ(columns["first_event"].front(), 0u);
  EXPECT_EQ(columns["last_event"].back(), result.events - 1);
  for (std::size_t c = 1; c < columns["first_event"].size(); ++c) {
    ASSERT_EQ(columns["first_event"][c].get<std::uint64_t>(), columns["last_event"][c - 1].get<std::uint64_t>() + 1)
        << "column " << c << " does not start after column " << c - 1;
  }
  EXPECT_LE(columns["first_event"].size(), view_options{}.columns);
  // The tree's root is everything live at the peak.
  EXPECT_EQ(data["peak_tree"]["event"], result.peak_allocated_event);
  EXPECT_EQ(data["peak_tree"]["bytes"][0].get<std::int64_t>(), result.peak_allocated_bytes);
  ASSERT_EQ(document["leaks"].size(), result.leaks.size());
  ASSERT_FALSE(result.leaks.empty()) << "expected the leak fixture to have a leak";
  for (std::size_t k = 0; k < result.leaks.size(); ++k) {
    EXPECT_EQ(document["leaks"][k]["bytes_per_step"], result.leaks[k].bytes_per_step);
    EXPECT_EQ(document["leaks"][k]["site"], result.leaks[k].site.label);
    EXPECT_EQ(document["leaks"][k]["bytes_at_step_end"].size(), result.leaks[k].bytes_at_step_end.size());
  }
  EXPECT_EQ(document["leak_summary"]["explained_per_step_bytes"], result.summary_of_leaks.explained_per_step_bytes);
  EXPECT_EQ(document["steps"]["ends"].size(), result.steps.size());
  EXPECT_EQ(document["categories"]["timeline"]["points"].size(), result.categories.events.size());
}

// Issue 29, item 6: the tree at the peak shows the user's frames first. Every frame above a node
// that folds the frames inside the user's code is the user's (no torch wrapper between them), and
// the folding nodes are leaves.
TEST(html_report, the_peak_tree_shows_your_frames_before_torchs) {
  SKIP_WITHOUT_ASSETS();
  const snapshot& snap = fixture("grpo_leak_logits.pickle.zst");
  rendered made = render(snap, "grpo_leak_logits.pickle.zst");
  const std::vector<stack_node>& tree = made.views.peak_tree;
  detail::frame_index frames(snap);
  std::size_t inside = 0;
  std::size_t library_frames = 0;
  for (std::size_t i = 1; i < tree.size(); ++i) {
    if (tree[tree[i].parent].kind == stack_node_kind::inside_user_code) ADD_FAILURE() << "node " << i << " is under a folding node";
    if (tree[i].kind == stack_node_kind::frame && frames.is_library(tree[i].frame)) ++library_frames;
    if (tree[i].kind != stack_node_kind::inside_user_code) continue;
    ++inside;
    EXPECT_FALSE(frames.is_library(tree[tree[i].parent].frame)) << "the folding node " << i << " hangs under a library frame";
    for (std::uint32_t above = tree[i].parent; above != 0; above = tree[above].parent) {
      ASSERT_EQ(tree[above].kind, stack_node_kind::frame);
      EXPECT_FALSE(frames.is_library(tree[above].frame))
          << "expected only the user's frames above folding node " << i << ", saw " << frames.label(tree[above].frame);
    }
  }
  EXPECT_GT(inside, 0u) << "expected the frames inside rl/record.py folded";
  // The leak's own frame, rl/record.py:41 logprobs_of, is a few rows down, not under wrappers.
  bool leak_frame_near_the_top = false;
  for (const stack_node& node : tree) {
    if (node.kind == stack_node_kind::frame && node.depth <= 5 && frames.label(node.frame).find("logprobs_of") != std::string::npos) {
      leak_frame_near_the_top = true;
    }
  }
  EXPECT_TRUE(leak_frame_near_the_top) << "expected logprobs_of within 5 rows of the root; " << library_frames << " library frames in the tree";
}

TEST(html_report, bands_are_the_largest_allocations_and_never_overlap) {
  SKIP_WITHOUT_ASSETS();
  const snapshot& snap = fixture("grpo_leak_logits.pickle.zst");
  rendered made = render(snap, "grpo_leak_logits.pickle.zst");
  const memory_views& views = made.views;
  ASSERT_FALSE(views.bands.empty());
  EXPECT_LE(views.bands.size(), view_options{}.bands);
  EXPECT_GT(views.allocations, views.bands.size());
  auto end_of = [&](const allocation_band& band) { return band.free_event < 0 ? static_cast<std::int64_t>(views.events) : band.free_event; };
  for (std::size_t a = 0; a < views.bands.size(); ++a) {
    const allocation_band& one = views.bands[a];
    EXPECT_LE(one.bytes, static_cast<std::uint64_t>(made.result.peak_allocated_bytes));
    for (std::size_t b = a + 1; b < views.bands.size(); ++b) {
      const allocation_band& other = views.bands[b];
      bool same_time = one.alloc_event < end_of(other) && other.alloc_event < end_of(one);
      bool same_place = one.offset_bytes < other.offset_bytes + other.bytes && other.offset_bytes < one.offset_bytes + one.bytes;
      ASSERT_FALSE(same_time && same_place) << "expected bands " << a << " and " << b << " apart, seen overlapping";
    }
  }
  // The largest allocation of the trace is a band: a block is at least its rounded request.
  std::uint64_t largest_request = 0;
  for (const trace_event& event : snap.events_of(*snap.trace_for(made.result.device))) {
    if (event.action == trace_action::alloc) largest_request = std::max(largest_request, round_request(event.size, settings_of(snap)));
  }
  std::uint64_t largest_band = 0;
  for (const allocation_band& band : views.bands) largest_band = std::max(largest_band, band.bytes);
  EXPECT_GE(largest_band, largest_request);
}

TEST(html_report, oom_verdicts_carry_their_numbers) {
  SKIP_WITHOUT_ASSETS();
  const snapshot& snap = fixture("frag_default_oom.pickle.zst");
  rendered made = render(snap, "frag_default_oom.pickle.zst");
  ASSERT_EQ(made.document["oom"].size(), made.result.ooms.size());
  ASSERT_FALSE(made.result.ooms.empty()) << "expected the OOM fixture to have an OOM";
  for (std::size_t k = 0; k < made.result.ooms.size(); ++k) {
    const oom_report& oom = made.result.ooms[k];
    const nlohmann::json& shown = made.document["oom"][k];
    EXPECT_EQ(shown["event_index"], oom.event);
    EXPECT_EQ(shown["requested_bytes"], oom.requested_bytes);
    EXPECT_EQ(shown["largest_free_block_bytes"], oom.largest_free_block_bytes);
    EXPECT_EQ(shown["verdict"], oom.verdict == oom_verdict::fragmentation ? "fragmentation" : "capacity");
    EXPECT_EQ(shown["explanation"], oom.explanation);
  }
  EXPECT_EQ(made.document["fragmentation"]["largest_free_block_at_end_bytes"], made.result.fragmentation.largest_free_block_at_end_bytes);
  // The stack of each OOM's request, beside the document, is the request site's.
  const nlohmann::json& request_stacks = made.data["oom_request_stacks"];
  ASSERT_EQ(request_stacks.size(), made.result.ooms.size());
  for (std::size_t k = 0; k < made.result.ooms.size(); ++k) {
    const nlohmann::json& frames = made.data["stacks"][request_stacks[k].get<std::size_t>()];
    std::span<const frame_id> expected = snap.stack(made.result.ooms[k].request_site.stack);
    ASSERT_EQ(frames.size(), std::min(expected.size(), detail::max_json_stack_frames)) << "OOM " << k;
    for (std::size_t f = 0; f < frames.size(); ++f) {
      EXPECT_EQ(made.data["frames"][frames[f].get<std::size_t>()], detail::frame_text(snap, expected[f])) << "OOM " << k << " frame " << f;
    }
  }
}

TEST(html_report, forbids_the_network_and_loads_nothing_by_url) {
  SKIP_WITHOUT_ASSETS();
  rendered made = render(fixture("frag_default_oom.pickle.zst"), "frag_default_oom.pickle.zst");
  const std::string& page = made.page;
  std::regex policy(
      R"(<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-[A-Za-z0-9+/=]+' 'sha256-[A-Za-z0-9+/=]+' 'sha256-[A-Za-z0-9+/=]+'; [^"]*">)");
  EXPECT_TRUE(std::regex_search(page, policy)) << "expected a CSP meta tag with default-src 'none' and three script hashes";
  EXPECT_LT(page.find("Content-Security-Policy"), page.find("<script")) << "expected the policy before the first script";
  std::regex remote(R"((src|href|action)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase);
  std::smatch seen;
  EXPECT_FALSE(std::regex_search(page, seen, remote)) << "expected no URL in src/href, seen: " << seen.str();
  EXPECT_EQ(occurrences(page, "<link"), 0u);
  EXPECT_EQ(occurrences(page, "<script src"), 0u);
  EXPECT_EQ(occurrences(page, "@import"), 0u);
}

TEST(html_report, stays_small) {
  SKIP_WITHOUT_ASSETS();
  for (const char* name : {"grpo_leak_logits.pickle.zst", "grpo_clean.pickle.zst", "frag_default_oom.pickle.zst"}) {
    rendered made = render(fixture(name), name);
    EXPECT_LT(made.page.size(), 10'000'000u) << name;
    // The page carries figures, not the trace: these 3 to 35 MB snapshots give under 1 MB.
    EXPECT_LT(made.page.size(), 1'000'000u) << name;
  }
}

TEST(html_report, hostile_frames_and_file_names_stay_text) {
  SKIP_WITHOUT_ASSETS();
  const std::string closer = "</script><script>alert(1)</script>";
  const std::string image = "<img src=x onerror=alert(1)>";
  const std::string separators = "line\u2028separator\u2029paragraph <!-- comment";
  crafted_snapshot made;
  stack_id stack = made.stack({made.frame(closer, image, 7), made.frame(separators, "/rl/train.py", 3)});
  made.segment(0, 64 << 20);
  made.event(trace_action::alloc, 0, 8 << 20, stack, 1);
  made.event(trace_action::alloc, 8 << 20, 4 << 20, stack, 2);
  made.event(trace_action::free_requested, 8 << 20, 4 << 20, stack, 3);
  made.event(trace_action::free_completed, 8 << 20, 4 << 20, stack, 3);
  snapshot snap = made.build();
  rendered page = render(snap, image + ".pickle");
  // The two data blocks and the three inlined scripts: no script the snapshot brought.
  EXPECT_EQ(occurrences(page.page, "<script"), 5u);
  EXPECT_EQ(occurrences(page.page, "</script"), 5u);
  EXPECT_EQ(occurrences(page.page, "<img"), 0u);
  EXPECT_EQ(occurrences(page.page, "<!-- comment"), 0u);
  EXPECT_EQ(occurrences(page.page, "\u2028"), 0u);
  EXPECT_EQ(occurrences(page.page, "\u2029"), 0u);
  // And the data still says what the snapshot said.
  const nlohmann::json& frames = page.data["frames"];
  auto has = [&](const std::string& part) {
    return std::any_of(frames.begin(), frames.end(), [&](const nlohmann::json& text) { return text.get<std::string>().find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has(closer)) << "expected a frame holding " << closer;
  EXPECT_TRUE(has(image)) << "expected a frame holding " << image;
  EXPECT_TRUE(has(separators)) << "expected a frame holding the separators";
  EXPECT_EQ(page.document["file"], image + ".pickle");
  EXPECT_EQ(page.document["peak"]["by_site"][0]["stack"][0], detail::frame_text(snap, snap.stack(stack)[0]));
}

TEST(html_report, an_empty_snapshot_still_makes_a_page) {
  SKIP_WITHOUT_ASSETS();
  crafted_snapshot made;
  rendered page = render(made.build(), "empty.pickle");
  EXPECT_TRUE(page.data["timeline"]["first_event"].empty());
  EXPECT_TRUE(page.data["bands"]["bytes"].empty());
  EXPECT_EQ(page.data["peak_tree"]["bytes"][0], 0u);
}

// The segment maps measure free gaps as inspect does: at the peak of reserved and at the OOM
// their largest free gaps are inspect's, their pools its free_by_pool, their segments add up to
// what was reserved.
TEST(html_report, segment_maps_match_inspect_at_the_peak_and_the_oom) {
  SKIP_WITHOUT_ASSETS();
  const snapshot& snap = fixture("frag_default_oom.pickle.zst");
  rendered made = render(snap, "frag_default_oom.pickle.zst");
  const inspection& result = made.result;
  const segment_map& peak = made.views.peak_segments;
  EXPECT_EQ(peak.event, result.peak_reserved_event);
  std::uint64_t reserved = 0, largest = 0, segments = 0;
  for (const pool_layout& pool : peak.pools) {
    reserved += pool.bytes;
    largest = std::max(largest, pool.largest_free_bytes);
    segments += pool.segments;
  }
  EXPECT_EQ(static_cast<std::int64_t>(reserved), result.peak_reserved_bytes);
  EXPECT_EQ(largest, result.fragmentation.largest_free_block_at_peak_reserved_bytes);
  EXPECT_EQ(peak.segments.size() + peak.segments_left_out, segments);

  ASSERT_EQ(made.views.oom_segments.size(), result.ooms.size());
  const segment_map& at_oom = made.views.oom_segments[0];
  const oom_report& oom = result.ooms[0];
  EXPECT_EQ(at_oom.event, static_cast<std::int64_t>(oom.event));
  reserved = 0;
  for (const pool_layout& pool : at_oom.pools) reserved += pool.bytes;
  EXPECT_EQ(static_cast<std::int64_t>(reserved), oom.reserved_bytes);
  ASSERT_EQ(at_oom.pools.size(), oom.free_by_pool.size());
  for (const free_block_summary& expected : oom.free_by_pool) {
    auto found = std::find_if(at_oom.pools.begin(), at_oom.pools.end(), [&](const pool_layout& pool) {
      return pool.small_pool == expected.small_pool && pool.stream == expected.stream;
    });
    ASSERT_NE(found, at_oom.pools.end()) << (expected.small_pool ? "small" : "large") << " pool of stream " << expected.stream;
    EXPECT_EQ(found->largest_free_bytes, expected.largest_free_bytes);
    EXPECT_EQ(found->free_bytes, expected.free_bytes);
  }
  // 79 segments at the OOM: 51 large (2.13 GiB), 28 small; 48 drawn.
  EXPECT_EQ(at_oom.segments.size(), view_options{}.max_map_segments);
  EXPECT_EQ(at_oom.segments.size() + at_oom.segments_left_out, 79u);

  const nlohmann::json& shown = made.data["oom_segments"][0];
  EXPECT_EQ(shown["event"], oom.event);
  EXPECT_EQ(shown["segments"].size(), at_oom.segments.size());
  char address[32];
  std::snprintf(address, sizeof address, "%#llx", static_cast<unsigned long long>(at_oom.segments[0].address));
  EXPECT_EQ(shown["segments"][0]["address"], address);
  EXPECT_EQ(made.data["peak_segments"]["event"], result.peak_reserved_event);
}

// Cut to a few segments and pieces, a map still accounts for every byte: what is drawn plus what
// is summed is what was reserved, and each segment's drawn pieces plus those left out fill it.
TEST(html_report, segment_maps_stay_bounded_and_account_for_every_byte) {
  const snapshot& snap = fixture("frag_default_oom.pickle.zst");
  inspection result = inspect(snap);
  view_options few;
  few.max_map_segments = 3;
  few.max_segment_pieces = 2;
  memory_views views = build_memory_views(snap, result, {}, few);
  for (const segment_map* map : {&views.peak_segments, &views.oom_segments.at(0)}) {
    ASSERT_EQ(map->segments.size(), 3u);
    std::uint64_t reserved = 0, drawn = 0;
    for (const pool_layout& pool : map->pools) reserved += pool.bytes;
    std::uint64_t previous_address = 0, smallest_drawn = UINT64_MAX;
    for (const segment_layout& seg : map->segments) {
      EXPECT_GT(seg.address, previous_address) << "expected segments by address";
      previous_address = seg.address;
      drawn += seg.bytes;
      smallest_drawn = std::min(smallest_drawn, seg.bytes);
      ASSERT_LE(seg.pieces.size(), 2u);
      std::uint64_t in_pieces = 0, end = 0;
      for (const segment_piece& piece : seg.pieces) {
        EXPECT_GE(piece.offset_bytes, end) << "expected pieces by offset, not overlapping";
        end = piece.offset_bytes + piece.bytes;
        in_pieces += piece.bytes;
      }
      EXPECT_LE(end, seg.bytes);
      EXPECT_EQ(seg.pieces.size() + seg.pieces_left_out, seg.blocks + seg.gaps);
      EXPECT_EQ(in_pieces + seg.bytes_left_out, seg.block_bytes + seg.free_bytes);
      EXPECT_EQ(seg.block_bytes + seg.free_bytes, seg.bytes) << "blocks and gaps fill segment " << seg.address;
    }
    EXPECT_EQ(drawn + map->bytes_left_out, reserved);
    EXPECT_GT(map->segments_left_out, 0u);
    EXPECT_LE(map->bytes_left_out, map->segments_left_out * smallest_drawn) << "expected the largest segments drawn";
  }
}

// `rlmem report A B` draws render_diff_json's figures: the same totals, the changed rows only.
TEST(html_report, diff_page_carries_the_diff) {
  SKIP_WITHOUT_ASSETS();
  inspect_options every_site;
  every_site.top = SIZE_MAX;
  inspection a = inspect(fixture("grpo_clean.pickle.zst"), every_site);
  inspection b = inspect(fixture("grpo_leak_logits.pickle.zst"), every_site);
  inspection_diff diff = diff_inspections(a, b);
  nlohmann::json data = embedded_data(render_diff_html(diff, "grpo_clean.pickle.zst", "grpo_leak_logits.pickle.zst"));
  nlohmann::json json = nlohmann::json::parse(render_diff_json(diff, "grpo_clean.pickle.zst", "grpo_leak_logits.pickle.zst"));
  EXPECT_EQ(data["kind"], "diff");
  EXPECT_EQ(data["totals"], json["totals"]);
  EXPECT_EQ(data["totals"]["peak_allocated_bytes"][1], b.peak_allocated_bytes);
  std::size_t changed = 0;
  for (const auto& row : json["at_end"]["sites"]) changed += row["delta_bytes"] != 0;
  ASSERT_GT(changed, 0u);
  EXPECT_EQ(data["at_end"]["sites"].size() + data["at_end"]["sites_left_out"].get<std::size_t>(), changed);
  EXPECT_LE(data["at_end"]["sites"].size(), max_html_diff_rows);
  for (const auto& row : data["at_end"]["sites"]) EXPECT_NE(row["delta_bytes"], 0);
}

// `rlmem report DIR` draws each rank's timeline in html_rank_columns slices whose peak is the rank's.
TEST(html_report, ranks_page_carries_each_rank_and_its_timeline) {
  SKIP_WITHOUT_ASSETS();
  std::vector<std::filesystem::path> files = {testing::testdata("snapshots/grpo_clean.pickle.zst"), testing::testdata("snapshots/frag_default_oom.pickle.zst")};
  std::vector<rank_result> ranks = inspect_ranks(files, {}, 2);
  ranks[0].rank = 0;
  ranks[1].rank = 1;
  nlohmann::json data = embedded_data(render_ranks_html(ranks, measure_imbalance(ranks), "ranks"));
  EXPECT_EQ(data["kind"], "ranks");
  ASSERT_EQ(data["ranks"].size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(ranks[k].ok) << ranks[k].failure;
    const nlohmann::json& line = data["ranks"][k]["timeline"];
    EXPECT_EQ(line["allocated_max"].size(), html_rank_columns);
    EXPECT_EQ(max_of(line["allocated_max"]), ranks[k].result.peak_allocated_bytes);
    EXPECT_EQ(max_of(line["reserved_max"]), ranks[k].result.peak_reserved_bytes);
    EXPECT_EQ(data["ranks"][k]["peak_allocated_bytes"], ranks[k].result.peak_allocated_bytes);
  }
}

// `rlmem replay --compare --html` draws render_replay_json's document, every setting included.
TEST(html_report, replay_page_carries_the_replay_json) {
  SKIP_WITHOUT_ASSETS();
  const snapshot& snap = fixture("frag_default_oom.pickle.zst");
  replay_options options;
  replay_report report;
  report.file = "frag_default_oom.pickle.zst";
  report.settings = settings_of(snap);
  report.result = replay(snap, options);
  report.capacity_bytes = report.result.capacity_bytes;
  report.comparison = compare_settings(snap, options);
  ASSERT_GT(report.comparison.size(), 2u);
  nlohmann::json data = embedded_data(render_replay_html(report));
  nlohmann::json json = nlohmann::json::parse(render_replay_json(report));
  EXPECT_EQ(data["kind"], "replay");
  data.erase("kind");
  EXPECT_EQ(data, json);
  EXPECT_EQ(data["compare"].size(), report.comparison.size());
}

}  // namespace rlmem

namespace rlmem {

// `rlmem plan --html` draws render_plan_json's document: the phases with their parts and the fit.
TEST(html_report, plan_page_carries_the_plan_json) {
  SKIP_WITHOUT_ASSETS();
  const plan_report report = testing::grpo_plan_fitted_to_h100("qwen2.5-0.5b");
  nlohmann::json data = embedded_data(render_plan_html(report));
  nlohmann::json json = nlohmann::json::parse(render_plan_json(report));
  EXPECT_EQ(data["kind"], "plan");
  data.erase("kind");
  EXPECT_EQ(data, json);
  EXPECT_EQ(data["phases"].size(), report.plan.phases.size());
  EXPECT_EQ(data["fit"]["what_if"].size(), report.fit->what_if.size());
  EXPECT_EQ(data["fit"]["every_fitting"].size(), report.fit->every_fitting.size());
  EXPECT_EQ(data["fit"]["every_fitting_left_out"], 0u);
}

// The page carries the hand-off's transitions and the host, as the JSON has them.
TEST(html_report, plan_page_carries_the_handoff_and_the_host) {
  SKIP_WITHOUT_ASSETS();
  plan_report report = testing::grpo_plan_fitted_to_h100("qwen2.5-0.5b");
  report.knobs.engine.rollout = rollout_kind::sglang;
  report.knobs.engine.device_bytes = gpu_memory_bytes("h100-80g");
  report.knobs.engine.mem_fraction_static = 0.5;
  report.knobs.engine.sleep_level = 1;
  report.knobs.handoff = handoff_kind::offload;
  report.knobs.gpus_per_node = 1;
  report.plan = plan_memory(report.model, report.knobs);
  report.fit.reset();
  ASSERT_TRUE(report.plan.engine.refusal.empty()) << report.plan.engine.refusal;
  const nlohmann::json page = embedded_data(render_plan_html(report));
  EXPECT_EQ(page["handoff"]["transitions"].size(), report.plan.handoff.transitions.size());
  EXPECT_EQ(page["phases"][0]["name"], "hand-off");
  EXPECT_EQ(page["host"]["per_node_bytes"], report.plan.host.per_node_bytes);
}

TEST(html_report, plan_page_keeps_the_first_thousand_fitting_configurations) {
  SKIP_WITHOUT_ASSETS();
  plan_report report = testing::grpo_plan_fitted_to_h100("qwen2.5-0.5b");
  fit_options options;
  options.budget_bytes = report.fit_budget_bytes;
  options.vary = search_bit(search_knob::group);
  report.fit = fit_configuration(report.model, report.knobs, options);
  report.fit_vary = options.vary;
  ASSERT_GT(report.fit->every_fitting.size(), 1000u);
  const nlohmann::json page = embedded_data(render_plan_html(report));
  const nlohmann::json json = nlohmann::json::parse(render_plan_json(report));
  EXPECT_EQ(page["fit"]["every_fitting"].size(), 1000u);
  EXPECT_EQ(page["fit"]["every_fitting_left_out"], report.fit->every_fitting.size() - 1000);
  EXPECT_EQ(json["fit"]["every_fitting"].size(), report.fit->every_fitting.size()) << "the JSON keeps them all";
  EXPECT_EQ(page["fit"]["every_fitting"][999], json["fit"]["every_fitting"][999]);
}

}  // namespace rlmem
