/* SPDX-License-Identifier: MIT */
/* librlmem as a caller built against an older rlmem.h meets it: structs frozen as earlier
 * commits declared them (smaller than today's), each followed by guard bytes. The library must
 * read and write only the caller's struct_size bytes (a read past them would take the guard's
 * 0xA5 bytes as fields, and show), use the defaults of the fields the caller does not have, and
 * refuse a struct_size that is no layout with one line saying which are accepted.
 * Usage: older_structs_test */

#include <rlmem/rlmem.h>
#include <rlmem/rlmem_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

#define GUARD_BYTE 0xA5
#define GUARD_SIZE 64

/* rlmem_runtime_options as bb1b2a6 declared it: the runtime's first C ABI, before
 * keep_host_buffers (af28be5) and history_entries (df6d280). */
typedef struct runtime_options_bb1b2a6 {
  size_t struct_size;
  uint64_t capacity_bytes;
  int release_free_pages;
  uint64_t reservation_bytes;
  uint64_t copy_chunk_bytes;
} runtime_options_bb1b2a6;

/* rlmem_runtime_options as af28be5 declared it: keep_host_buffers, not yet history_entries. */
typedef struct runtime_options_af28be5 {
  size_t struct_size;
  uint64_t capacity_bytes;
  int release_free_pages;
  uint64_t reservation_bytes;
  uint64_t copy_chunk_bytes;
  int keep_host_buffers;
} runtime_options_af28be5;

/* rlmem_leak_verdict of librlmem 0.1.0 (397603f), before stopped ... kendall_z (4d70348). */
typedef struct leak_verdict_0_1_0 {
  size_t struct_size;
  int leaking;
  uint64_t first_step;
  uint64_t steps;
  int64_t bytes_per_step;
} leak_verdict_0_1_0;

/* Each frozen struct with guard bytes right after it: a char array has no padding before it. */
struct guarded_options_bb1b2a6 {
  runtime_options_bb1b2a6 options;
  unsigned char guard[GUARD_SIZE];
};
struct guarded_options_af28be5 {
  runtime_options_af28be5 options;
  unsigned char guard[GUARD_SIZE];
};
struct guarded_verdict_0_1_0 {
  leak_verdict_0_1_0 verdict;
  unsigned char guard[GUARD_SIZE];
};

static int guard_intact(const unsigned char* guard) {
  for (int i = 0; i < GUARD_SIZE; ++i) {
    if (guard[i] != GUARD_BYTE) return 0;
  }
  return 1;
}

static void expect_failure(int status, char* error, const char* expected_text) {
  CHECK(status == RLMEM_E_INVALID_ARGUMENT, "status %s (message: %s)", rlmem_status_name(status), error ? error : "(none)");
  CHECK(error != NULL && strstr(error, expected_text) != NULL, "message '%s' lacks '%s'", error ? error : "(none)",
        expected_text);
  CHECK(error == NULL || strchr(error, '\n') == NULL, "message spans lines: %s", error);
  rlmem_string_free(error);
}

/* The number in `"key":N` of a JSON document, or -1. */
static long long json_number(const char* json, const char* key) {
  char pattern[96];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char* at = json != NULL ? strstr(json, pattern) : NULL;
  return at != NULL ? strtoll(at + strlen(pattern), NULL, 10) : -1;
}

/* Opens the runtime of `ordinal` over a fake device with `options`, allocates 5 MiB in tag
 * "train", writes it, pauses it to host memory and resumes it; the statistics and snapshot
 * documents, for the caller to check and free. */
static int run_pause_cycle(int ordinal, const rlmem_runtime_options* options, char** statistics, char** snapshot) {
  const uint64_t mib = 1u << 20;
  char* error = NULL;
  *statistics = NULL;
  *snapshot = NULL;
  int status = rlmem_runtime_open_fake(ordinal, 64 * mib, 2 * mib, options, &error);
  CHECK(status == RLMEM_OK, "open: %s", error ? error : "(none)");
  rlmem_string_free(error);
  if (status != RLMEM_OK) return status;
  uint64_t address = 0;
  unsigned char* written = malloc(5 * mib);
  unsigned char* read = malloc(5 * mib);
  for (uint64_t i = 0; i < 5 * mib; ++i) written[i] = (unsigned char)(i * 2654435761u >> 24);
  CHECK(rlmem_runtime_enter_region(ordinal, "train", NULL) == RLMEM_OK, "enter_region");
  CHECK(rlmem_runtime_allocate(ordinal, 5 * mib, 0, &address, NULL) == RLMEM_OK, "allocate");
  CHECK(rlmem_runtime_leave_region(ordinal, NULL) == RLMEM_OK, "leave_region");
  CHECK(rlmem_runtime_write(ordinal, address, written, 5 * mib, NULL) == RLMEM_OK, "write");
  CHECK(rlmem_runtime_pause(ordinal, "train", 1, NULL) == RLMEM_OK, "pause");
  CHECK(rlmem_runtime_resume(ordinal, "train", NULL) == RLMEM_OK, "resume");
  CHECK(rlmem_runtime_read(ordinal, address, read, 5 * mib, NULL) == RLMEM_OK && memcmp(read, written, 5 * mib) == 0,
        "5 MiB differ after pause and resume");
  free(written);
  free(read);
  CHECK(rlmem_runtime_statistics_json(ordinal, statistics, NULL) == RLMEM_OK, "statistics");
  CHECK(rlmem_runtime_snapshot_json(ordinal, snapshot, NULL) == RLMEM_OK, "snapshot");
  CHECK(rlmem_runtime_close(ordinal) == RLMEM_OK, "close");
  return RLMEM_OK;
}

/* bb1b2a6's options: keep_host_buffers and history_entries lie in the guard, and would read as
 * 0xA5A5... (slabs kept; a history ring of 10^19 events, which cannot even be made): their
 * defaults (0) must be used. */
static void test_runtime_options_before_keep_host_buffers(void) {
  struct guarded_options_bb1b2a6 frame;
  memset(&frame, GUARD_BYTE, sizeof frame);
  rlmem_runtime_options* as_library = (rlmem_runtime_options*)&frame.options;
  CHECK(rlmem_runtime_options_init_sized(as_library, sizeof frame.options) == RLMEM_OK, "init of the older layout");
  CHECK(frame.options.struct_size == sizeof frame.options && frame.options.capacity_bytes == 0 &&
            frame.options.release_free_pages == 0 && frame.options.copy_chunk_bytes == 0,
        "init: struct_size %zu", frame.options.struct_size);
  CHECK(guard_intact(frame.guard), "init wrote past the caller's %zu bytes", sizeof frame.options);
  frame.options.copy_chunk_bytes = 4u << 20;

  char* statistics = NULL;
  char* snapshot = NULL;
  if (run_pause_cycle(5, as_library, &statistics, &snapshot) == RLMEM_OK) {
    CHECK(json_number(statistics, "host_buffer_bytes") == 0, "slabs kept (keep_host_buffers read from the guard?): %s",
          statistics ? statistics : "(none)");
    CHECK(snapshot != NULL && strstr(snapshot, "\"action\"") == NULL,
          "events kept (history_entries read from the guard?): %.300s", snapshot ? snapshot : "(none)");
  }
  rlmem_string_free(statistics);
  rlmem_string_free(snapshot);
  CHECK(guard_intact(frame.guard), "the runtime wrote past the caller's options");

  /* rlmem_runtime_configure copies the older layout, and a runtime opened by first use reads it. */
  char* error = NULL;
  CHECK(rlmem_runtime_configure(as_library, &error) == RLMEM_OK, "configure: %s", error ? error : "(none)");
  rlmem_string_free(error);
  CHECK(rlmem_runtime_configure(NULL, NULL) == RLMEM_OK, "configure back to the defaults");
}

/* af28be5's options: keep_host_buffers is the caller's (1: the two 4 MiB slabs of a 5 MiB
 * block stay pinned), history_entries lies in the guard. */
static void test_runtime_options_before_history_entries(void) {
  struct guarded_options_af28be5 frame;
  memset(&frame, GUARD_BYTE, sizeof frame);
  rlmem_runtime_options* as_library = (rlmem_runtime_options*)&frame.options;
  CHECK(rlmem_runtime_options_init_sized(as_library, sizeof frame.options) == RLMEM_OK, "init of the older layout");
  CHECK(frame.options.struct_size == sizeof frame.options && frame.options.keep_host_buffers == 0, "init: struct_size %zu",
        frame.options.struct_size);
  CHECK(guard_intact(frame.guard), "init wrote past the caller's %zu bytes", sizeof frame.options);
  frame.options.copy_chunk_bytes = 4u << 20;
  frame.options.keep_host_buffers = 1;

  char* statistics = NULL;
  char* snapshot = NULL;
  if (run_pause_cycle(5, as_library, &statistics, &snapshot) == RLMEM_OK) {
    CHECK(json_number(statistics, "host_buffer_bytes") == 8 << 20, "the caller's keep_host_buffers and copy_chunk_bytes: %s",
          statistics ? statistics : "(none)");
    CHECK(snapshot != NULL && strstr(snapshot, "\"action\"") == NULL,
          "events kept (history_entries read from the guard?): %.300s", snapshot ? snapshot : "(none)");
  }
  rlmem_string_free(statistics);
  rlmem_string_free(snapshot);
  CHECK(guard_intact(frame.guard), "the runtime wrote past the caller's options");
}

/* Sizes that are no layout: refused with the sizes accepted, by open, configure and init. */
static void test_runtime_options_sizes_refused(void) {
  char accepted[128];
  snprintf(accepted, sizeof accepted, "reads %zu, %zu or %zu bytes", sizeof(runtime_options_bb1b2a6),
           sizeof(runtime_options_af28be5), sizeof(rlmem_runtime_options));
  struct {
    rlmem_runtime_options options;
    unsigned char more[16];
  } frame;
  memset(&frame, 0, sizeof frame);
  rlmem_runtime_options_init(&frame.options);
  char* error = NULL;
  frame.options.struct_size = sizeof(runtime_options_bb1b2a6) + 4; /* between two layouts */
  int status = rlmem_runtime_open_fake(6, 64u << 20, 2u << 20, &frame.options, &error);
  CHECK(rlmem_runtime_is_open(6) == 0, "opened with a struct_size of no layout");
  expect_failure(status, error, accepted);
  error = NULL;
  frame.options.struct_size = sizeof(size_t); /* less than the first layout */
  status = rlmem_runtime_open_fake(6, 64u << 20, 2u << 20, &frame.options, &error);
  expect_failure(status, error, "struct_size is 8");
  error = NULL;
  frame.options.struct_size = sizeof frame; /* a newer header's struct */
  status = rlmem_runtime_configure(&frame.options, &error);
  expect_failure(status, error, "a header newer than the library");
  error = NULL;

  /* init_sized of a size that is no layout writes struct_size alone, which open then refuses. */
  unsigned char buffer[96];
  memset(buffer, GUARD_BYTE, sizeof buffer);
  CHECK(rlmem_runtime_options_init_sized((rlmem_runtime_options*)buffer, 44) == RLMEM_E_INVALID_ARGUMENT, "init of 44 bytes");
  size_t written = 0;
  memcpy(&written, buffer, sizeof written);
  CHECK(written == 44 && guard_intact(buffer + sizeof written) && buffer[sizeof written + GUARD_SIZE] == GUARD_BYTE,
        "init of no layout wrote more than struct_size (%zu)", written);
  status = rlmem_runtime_open_fake(6, 64u << 20, 2u << 20, (const rlmem_runtime_options*)buffer, &error);
  expect_failure(status, error, "struct_size is 44");
  CHECK(rlmem_runtime_options_init_sized(NULL, sizeof(rlmem_runtime_options)) == RLMEM_E_INVALID_ARGUMENT, "NULL options");

  /* The exported function behind the macro writes the 0.2 release's layout, today's. */
  rlmem_runtime_options whole;
  memset(&whole, GUARD_BYTE, sizeof whole);
  (rlmem_runtime_options_init)(&whole);
  CHECK(whole.struct_size == sizeof whole && whole.history_entries == 0 && whole.keep_host_buffers == 0,
        "the plain init: struct_size %zu", whole.struct_size);
}

/* 0.1.0's verdict: the library writes its five fields and nothing of the seven after them. */
static void test_leak_verdict_of_0_1_0(void) {
  struct guarded_verdict_0_1_0 frame;
  memset(&frame, GUARD_BYTE, sizeof frame);
  memset(&frame.verdict, 0, sizeof frame.verdict);
  frame.verdict.struct_size = sizeof frame.verdict;
  /* 10 MiB kept every step from step end 5 on a flat 1 GiB job: a leak (c_abi_test.c). */
  const int64_t kept[] = {1073741824, 1073741824, 1073741824, 1073741824, 1073741824, 1084227584, 1094713344, 1105199104};
  CHECK(rlmem_leak_check(kept, NULL, 8, 0, (rlmem_leak_verdict*)&frame.verdict) == RLMEM_OK, "leak check of 0.1.0's verdict");
  CHECK(frame.verdict.struct_size == sizeof frame.verdict && frame.verdict.leaking == 1 && frame.verdict.first_step == 5 &&
            frame.verdict.steps == 3 && frame.verdict.bytes_per_step == 10485760,
        "struct_size %zu leaking %d first %llu steps %llu per step %lld", frame.verdict.struct_size, frame.verdict.leaking,
        (unsigned long long)frame.verdict.first_step, (unsigned long long)frame.verdict.steps,
        (long long)frame.verdict.bytes_per_step);
  CHECK(guard_intact(frame.guard), "the verdict was written past the caller's %zu bytes", sizeof frame.verdict);
  frame.verdict.struct_size = sizeof frame.verdict + 4;
  CHECK(rlmem_leak_check(kept, NULL, 8, 0, (rlmem_leak_verdict*)&frame.verdict) == RLMEM_E_INVALID_ARGUMENT,
        "a struct_size between two layouts accepted");
  frame.verdict.struct_size = sizeof(rlmem_leak_verdict) + 8;
  CHECK(rlmem_leak_check(kept, NULL, 8, 0, (rlmem_leak_verdict*)&frame.verdict) == RLMEM_E_INVALID_ARGUMENT,
        "a newer header's struct_size accepted");
  CHECK(guard_intact(frame.guard), "a refused verdict was written past the caller's bytes");
}

/* Structs with one layout so far: that size, nothing else; the init macros write only it. */
static void test_single_layouts(void) {
  struct {
    rlmem_inspect_options options;
    unsigned char guard[GUARD_SIZE];
  } inspect_frame;
  memset(&inspect_frame, GUARD_BYTE, sizeof inspect_frame);
  rlmem_inspect_options_init(&inspect_frame.options);
  CHECK(inspect_frame.options.struct_size == sizeof inspect_frame.options && inspect_frame.options.device == -1 &&
            inspect_frame.options.top == 10 && guard_intact(inspect_frame.guard),
        "inspect options init");
  char* json = NULL;
  char* error = NULL;
  inspect_frame.options.struct_size = sizeof inspect_frame.options + 8;
  int status = rlmem_inspect_bytes("x", 1, &inspect_frame.options, &json, &error);
  CHECK(json == NULL, "a document for refused options");
  expect_failure(status, error, "a header newer than the library");
  CHECK(rlmem_inspect_options_init_sized(&inspect_frame.options, sizeof inspect_frame.options - 8) == RLMEM_E_INVALID_ARGUMENT,
        "init of a size that is no layout");

  rlmem_step_rules rules;
  rlmem_step_rules_init(&rules);
  CHECK(rules.struct_size == sizeof rules && rules.leak_window == 64, "step rules init");
  rlmem_step_judgment judged;
  memset(&judged, 0, sizeof judged);
  judged.struct_size = sizeof judged;
  CHECK(rlmem_judge_step(NULL, 0, 0, &rules, &judged) == RLMEM_OK, "judge with today's structs");
  rules.struct_size = sizeof rules + 8;
  CHECK(rlmem_judge_step(NULL, 0, 0, &rules, &judged) == RLMEM_E_INVALID_ARGUMENT, "a newer header's rules accepted");
  rules.struct_size = sizeof rules;
  judged.struct_size = sizeof judged - 8;
  CHECK(rlmem_judge_step(NULL, 0, 0, &rules, &judged) == RLMEM_E_INVALID_ARGUMENT, "a smaller judgment accepted");
  CHECK(rlmem_step_rules_init_sized(&rules, 0) == RLMEM_E_INVALID_ARGUMENT, "init of 0 bytes");
}

int main(void) {
  test_runtime_options_before_keep_host_buffers();
  test_runtime_options_before_history_entries();
  test_runtime_options_sizes_refused();
  test_leak_verdict_of_0_1_0();
  test_single_layouts();
  printf("older_structs_test: %d failed checks\n", failures);
  return failures == 0 ? 0 : 1;
}
