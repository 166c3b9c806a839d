/* SPDX-License-Identifier: MIT */
/* librlmem from plain C11, as another language's runtime meets it: versions and status names,
 * inspect of real snapshots from a path and from bytes, every failure as a code and one line,
 * the leak rule, two threads inspecting at once, and the runtime on a fake device.
 * Usage: c_abi_test TESTDATA_DIR            runs the checks
 *        c_abi_test --print-json SNAPSHOT   prints the library's document (compared with the CLI's) */

#include <rlmem/rlmem.h>
#include <rlmem/rlmem_runtime.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
      ++failures;                                          \
    }                                                      \
  } while (0)

static char path_buffer[4096];

static const char* testdata_file(const char* dir, const char* name) {
  snprintf(path_buffer, sizeof path_buffer, "%s/snapshots/%s", dir, name);
  return path_buffer;
}

static char* read_whole_file(const char* path, size_t* size) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) return NULL;
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* data = malloc((size_t)length);
  if (data != NULL && fread(data, 1, (size_t)length, file) != (size_t)length) {
    free(data);
    data = NULL;
  }
  fclose(file);
  *size = (size_t)length;
  return data;
}

static void test_version_and_names(void) {
  char expected[32];
  snprintf(expected, sizeof expected, "%d.%d.%d", RLMEM_VERSION_MAJOR, RLMEM_VERSION_MINOR, RLMEM_VERSION_PATCH);
  CHECK(strcmp(rlmem_version(), expected) == 0, "library %s, header %s", rlmem_version(), expected);
  CHECK(strcmp(rlmem_status_name(RLMEM_OK), "RLMEM_OK") == 0, "got %s", rlmem_status_name(RLMEM_OK));
  CHECK(strcmp(rlmem_status_name(RLMEM_E_BAD_INPUT), "RLMEM_E_BAD_INPUT") == 0, "got %s",
        rlmem_status_name(RLMEM_E_BAD_INPUT));
  CHECK(strcmp(rlmem_status_name(42), "RLMEM_E_UNKNOWN") == 0, "got %s", rlmem_status_name(42));
  rlmem_string_free(NULL);
}

/* grpo_leak_logits: the fixture's one leak, 46.9 MiB per step from record.py:41 (README). */
static void test_inspect_leak_fixture(const char* dir) {
  char* json = NULL;
  char* error = NULL;
  int status = rlmem_inspect_file(testdata_file(dir, "grpo_leak_logits.pickle.zst"), NULL, &json, &error);
  CHECK(status == RLMEM_OK, "status %s, error %s", rlmem_status_name(status), error ? error : "(none)");
  CHECK(error == NULL, "error set on success: %s", error);
  if (json != NULL) {
    CHECK(strstr(json, "\"schema_version\": 3") != NULL, "no schema_version 3 in the document");
    CHECK(strstr(json, "rl/record.py:41 logprobs_of") != NULL, "the leaking site is not named");
    CHECK(strstr(json, "\"peak_allocated_bytes\": 893507072") != NULL, "peak allocated is not 893,507,072");
  }
  rlmem_string_free(json);
  rlmem_string_free(error);
}

/* The document from bytes equals the one from the path, byte for byte. */
static void test_bytes_equal_path(const char* dir) {
  const char* path = testdata_file(dir, "frag_default_oom.pickle.zst");
  size_t size = 0;
  char* data = read_whole_file(path, &size);
  CHECK(data != NULL, "cannot read %s", path);
  if (data == NULL) return;
  rlmem_inspect_options options;
  rlmem_inspect_options_init(&options);
  options.source_name = "oom";
  char* from_path = NULL;
  char* from_bytes = NULL;
  int a = rlmem_inspect_file(path, &options, &from_path, NULL);
  int b = rlmem_inspect_bytes(data, size, &options, &from_bytes, NULL);
  CHECK(a == RLMEM_OK && b == RLMEM_OK, "statuses %d and %d", a, b);
  if (from_path && from_bytes) CHECK(strcmp(from_path, from_bytes) == 0, "path and bytes documents differ");
  if (from_path) {
    CHECK(strstr(from_path, "\"verdict\": \"fragmentation\"") != NULL, "no fragmentation verdict");
    CHECK(strstr(from_path, "\"requested_bytes\": 490880000") != NULL, "request is not 490,880,000 bytes");
  }
  rlmem_string_free(from_path);
  rlmem_string_free(from_bytes);
  /* The page of `rlmem report`, from the path and from the bytes alike. */
  char* page = NULL;
  char* page_from_bytes = NULL;
  char* why = NULL;
  a = rlmem_report_file(path, &options, &page, &why);
  b = rlmem_report_bytes(data, size, &options, &page_from_bytes, NULL);
  if (a == RLMEM_E_INTERNAL && why != NULL && strstr(why, "without the report page") != NULL) {
    printf("note: %s; the report entry points are not checked\n", why);  /* a build without node and npm */
    a = b = RLMEM_OK;
  }
  rlmem_string_free(why);
  CHECK(a == RLMEM_OK && b == RLMEM_OK, "report statuses %d and %d", a, b);
  if (page && page_from_bytes) CHECK(strcmp(page, page_from_bytes) == 0, "path and bytes pages differ");
  if (page) {
    CHECK(strncmp(page, "<!DOCTYPE html>", 15) == 0, "the page does not start with <!DOCTYPE html>");
    CHECK(strstr(page, "\"event_index\":7971") != NULL, "the page lacks the OOM at event 7,971");
  }
  rlmem_string_free(page);
  rlmem_string_free(page_from_bytes);
  free(data);
}

static void expect_failure(int status, int expected_status, char* error, const char* expected_text) {
  CHECK(status == expected_status, "status %s, expected %s (message: %s)", rlmem_status_name(status),
        rlmem_status_name(expected_status), error ? error : "(none)");
  CHECK(error != NULL && strstr(error, expected_text) != NULL, "message '%s' lacks '%s'", error ? error : "(none)",
        expected_text);
  CHECK(error == NULL || strchr(error, '\n') == NULL, "message spans lines: %s", error);
  rlmem_string_free(error);
}

static void test_failures(const char* dir) {
  char* json = (char*)1;
  char* error = NULL;
  int status = rlmem_inspect_file("/nonexistent/snap.pickle", NULL, &json, &error);
  CHECK(json == NULL, "json_out not cleared on failure");
  expect_failure(status, RLMEM_E_BAD_INPUT, error, "/nonexistent/snap.pickle: IO_ERROR");

  static const unsigned char evil[] = {0x80, 0x04, 'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', '.'};
  status = rlmem_inspect_bytes(evil, sizeof evil, NULL, &json, &error);
  expect_failure(status, RLMEM_E_BAD_INPUT, error, "<bytes>: FORBIDDEN_OPCODE at byte 2");

  status = rlmem_inspect_bytes(NULL, 0, NULL, &json, &error);
  expect_failure(status, RLMEM_E_BAD_INPUT, error, "EMPTY_INPUT");
  status = rlmem_inspect_bytes(NULL, 5, NULL, &json, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "data is NULL");
  status = rlmem_inspect_file(NULL, NULL, &json, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "path is NULL");
  status = rlmem_inspect_file("x", NULL, NULL, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "json_out is NULL");
  status = rlmem_report_bytes(evil, sizeof evil, NULL, &json, &error);
  expect_failure(status, RLMEM_E_BAD_INPUT, error, "<bytes>: FORBIDDEN_OPCODE at byte 2");
  status = rlmem_report_file(NULL, NULL, &json, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "path is NULL");

  rlmem_inspect_options options;
  rlmem_inspect_options_init(&options);
  options.step_marker = "(";
  status = rlmem_inspect_file(testdata_file(dir, "tiny_oom_cpp_stacks.pickle"), &options, &json, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "step marker '(' is not a valid regular expression");

  rlmem_inspect_options_init(&options);
  options.device = 7;
  status = rlmem_inspect_file(testdata_file(dir, "tiny_oom_cpp_stacks.pickle"), &options, &json, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "has no device 7 (devices: 0)");

  rlmem_inspect_options_init(&options);
  options.category_rules = "weight foo\n";
  status = rlmem_inspect_file(testdata_file(dir, "tiny_oom_cpp_stacks.pickle"), &options, &json, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "category rules: line 1");

  rlmem_inspect_options_init(&options);
  options.struct_size = 8;
  status = rlmem_inspect_file(testdata_file(dir, "tiny_oom_cpp_stacks.pickle"), &options, &json, &error);
  expect_failure(status, RLMEM_E_INVALID_ARGUMENT, error, "struct_size is 8");
  CHECK(json == NULL, "json_out set on failure");
}

static void test_leak_rule(void) {
  rlmem_leak_verdict verdict = {sizeof(rlmem_leak_verdict), 0, 0, 0, 0};
  /* Kept allocations from step 3 on: bytes and counts grow together. */
  const int64_t kept[] = {100, 150, 150, 160, 170, 180};
  const uint64_t kept_counts[] = {4, 5, 5, 6, 7, 8};
  CHECK(rlmem_leak_check(kept, kept_counts, 6, 0, &verdict) == RLMEM_OK, "status");
  CHECK(verdict.leaking == 1 && verdict.first_step == 3 && verdict.steps == 3 && verdict.bytes_per_step == 10,
        "leaking %d first %llu steps %llu per step %lld", verdict.leaking, (unsigned long long)verdict.first_step,
        (unsigned long long)verdict.steps, (long long)verdict.bytes_per_step);
  /* The same bytes with no counts: three growing steps are not yet steady growth. */
  CHECK(rlmem_leak_check(kept, NULL, 6, 0, &verdict) == RLMEM_OK && verdict.leaking == 0, "leaking %d without counts",
        verdict.leaking);
  /* Step 1's one-time growth (optimizer state) is not a leak. */
  const int64_t once[] = {0, 500, 500, 500};
  CHECK(rlmem_leak_check(once, NULL, 4, 0, &verdict) == RLMEM_OK && verdict.leaking == 0, "one-time growth leaked");
  /* Figures at the ends of the int64 range: no overflow, the mean clamps. */
  const int64_t extreme[] = {INT64_MIN, INT64_MIN, -1, INT64_MAX};
  const uint64_t extreme_counts[] = {1, 1, 2, 3};
  CHECK(rlmem_leak_check(extreme, extreme_counts, 4, 0, &verdict) == RLMEM_OK && verdict.leaking == 1 &&
            verdict.bytes_per_step == INT64_MAX,
        "leaking %d per step %lld", verdict.leaking, (long long)verdict.bytes_per_step);
  CHECK(rlmem_leak_check(NULL, NULL, 3, 0, &verdict) == RLMEM_E_INVALID_ARGUMENT, "NULL series accepted");
  CHECK(rlmem_leak_check(kept, NULL, 6, 0, NULL) == RLMEM_E_INVALID_ARGUMENT, "NULL verdict accepted");
  /* A ramp of four growing batches, no new allocations: steady for inspect's 4, not for 8. */
  const int64_t ramp[] = {100, 100, 132, 164, 196, 228};
  CHECK(rlmem_leak_check(ramp, kept_counts, 6, 0, &verdict) == RLMEM_OK && verdict.leaking == 1 && verdict.steps == 4,
        "leaking %d over %llu steps with the default", verdict.leaking, (unsigned long long)verdict.steps);
  CHECK(rlmem_leak_check(ramp, NULL, 6, 8, &verdict) == RLMEM_OK && verdict.leaking == 0, "a 4-step ramp leaked at 8");
  verdict.struct_size = 4;
  CHECK(rlmem_leak_check(kept, NULL, 6, 0, &verdict) == RLMEM_E_INVALID_ARGUMENT, "bad struct_size accepted");
}

struct thread_job {
  const char* path;
  char* json;
  int status;
};

static void* inspect_in_thread(void* argument) {
  struct thread_job* job = argument;
  job->status = rlmem_inspect_file(job->path, NULL, &job->json, NULL);
  return NULL;
}

/* Two callers on two threads at once get the documents one caller gets alone. */
static void test_two_threads(const char* dir) {
  char first_path[4096];
  char second_path[4096];
  snprintf(first_path, sizeof first_path, "%s", testdata_file(dir, "grpo_clean.pickle.zst"));
  snprintf(second_path, sizeof second_path, "%s", testdata_file(dir, "frag_default.pickle.zst"));
  struct thread_job jobs[2] = {{first_path, NULL, -99}, {second_path, NULL, -99}};
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, inspect_in_thread, &jobs[i]);
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < 2; ++i) {
    char* alone = NULL;
    int status = rlmem_inspect_file(jobs[i].path, NULL, &alone, NULL);
    CHECK(jobs[i].status == RLMEM_OK && status == RLMEM_OK, "statuses %d and %d", jobs[i].status, status);
    if (alone && jobs[i].json) CHECK(strcmp(alone, jobs[i].json) == 0, "%s differs across threads", jobs[i].path);
    rlmem_string_free(alone);
    rlmem_string_free(jobs[i].json);
  }
}

/* The runtime over a host-backed fake device: a tagged block paused to host memory and resumed
 * holds its bytes at its address; errors come back as codes and lines; statistics as JSON. */
static void test_runtime(void) {
  const uint64_t mib = 1u << 20;
  char* error = NULL;
  rlmem_runtime_options options;
  rlmem_runtime_options_init(&options);
  options.copy_chunk_bytes = 4 * mib;
  CHECK(rlmem_runtime_open_fake(3, 64 * mib, 2 * mib, &options, &error) == RLMEM_OK, "%s", error ? error : "");
  rlmem_string_free(error);
  CHECK(rlmem_runtime_is_open(3) == 1, "device 3 not open");
  CHECK(rlmem_runtime_open_fake(3, 64 * mib, 2 * mib, NULL, NULL) == RLMEM_E_STATE, "opened twice");

  CHECK(rlmem_runtime_enter_region(3, "train", NULL) == RLMEM_OK, "enter_region");
  uint64_t address = 0;
  CHECK(rlmem_runtime_allocate(3, 5 * mib, 0, &address, NULL) == RLMEM_OK, "allocate");
  CHECK(rlmem_runtime_leave_region(3, NULL) == RLMEM_OK, "leave_region");
  unsigned char* written = malloc(5 * mib);
  unsigned char* read = malloc(5 * mib);
  for (uint64_t i = 0; i < 5 * mib; ++i) written[i] = (unsigned char)(i * 2654435761u >> 24);
  CHECK(rlmem_runtime_write(3, address, written, 5 * mib, NULL) == RLMEM_OK, "write");
  CHECK(rlmem_runtime_pause(3, "train", 1, &error) == RLMEM_OK, "pause: %s", error ? error : "");
  rlmem_string_free(error);
  error = NULL;
  CHECK(rlmem_runtime_read(3, address, read, 5 * mib, NULL) == RLMEM_E_INVALID_ARGUMENT, "a paused block is not readable");
  CHECK(rlmem_runtime_enter_region(3, "train", NULL) == RLMEM_OK, "enter_region");
  uint64_t refused = 0;
  CHECK(rlmem_runtime_allocate(3, mib, 0, &refused, &error) == RLMEM_E_STATE, "allocating in a paused tag");
  CHECK(error != NULL && strstr(error, "paused") != NULL, "the line says why: %s", error ? error : "(none)");
  rlmem_string_free(error);
  error = NULL;
  CHECK(rlmem_runtime_leave_region(3, NULL) == RLMEM_OK, "leave_region");
  CHECK(rlmem_runtime_resume(3, "train", NULL) == RLMEM_OK, "resume");
  CHECK(rlmem_runtime_read(3, address, read, 5 * mib, NULL) == RLMEM_OK, "read");
  CHECK(memcmp(read, written, 5 * mib) == 0, "5 MiB differ after pause and resume");
  free(written);
  free(read);

  char* json = NULL;
  CHECK(rlmem_runtime_statistics_json(3, &json, NULL) == RLMEM_OK, "statistics");
  CHECK(json != NULL && strstr(json, "\"name\":\"train\"") != NULL && strstr(json, "\"pauses\":1") != NULL,
        "statistics name the tag and its pause: %s", json ? json : "(none)");
  rlmem_string_free(json);

  CHECK(rlmem_runtime_free(3, address, NULL) == RLMEM_OK, "free");
  CHECK(rlmem_runtime_free(3, address, &error) == RLMEM_E_INVALID_ARGUMENT, "a second free");
  rlmem_string_free(error);
  CHECK(rlmem_runtime_close(3) == RLMEM_OK, "close");
  CHECK(rlmem_runtime_close(3) == RLMEM_E_STATE, "close twice");
  CHECK(rlmem_runtime_allocate(3, mib, 0, &address, NULL) == RLMEM_E_STATE, "allocate after close");
  CHECK(rlmem_runtime_open_fake(64, 64 * mib, 2 * mib, NULL, NULL) == RLMEM_E_INVALID_ARGUMENT, "device 64");
  CHECK(rlmem_runtime_open_fake(4, 63 * mib, 2 * mib, NULL, NULL) == RLMEM_E_INVALID_ARGUMENT, "a size off the granularity");
  CHECK(strcmp(rlmem_status_name(RLMEM_E_STATE), "RLMEM_E_STATE") == 0, "got %s", rlmem_status_name(RLMEM_E_STATE));
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--print-json") == 0) {
    char* json = NULL;
    char* error = NULL;
    int status = rlmem_inspect_file(argv[2], NULL, &json, &error);
    if (status != RLMEM_OK) {
      fprintf(stderr, "rlmem: %s\n", error ? error : rlmem_status_name(status));
      rlmem_string_free(error);
      return 2;
    }
    int written = fputs(json, stdout);
    rlmem_string_free(json);
    return written < 0 ? 1 : 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: c_abi_test TESTDATA_DIR | --print-json SNAPSHOT\n");
    return 2;
  }
  test_version_and_names();
  test_inspect_leak_fixture(argv[1]);
  test_bytes_equal_path(argv[1]);
  test_failures(argv[1]);
  test_leak_rule();
  test_two_threads(argv[1]);
  test_runtime();
  printf("c_abi_test: %d failed checks\n", failures);
  return failures == 0 ? 0 : 1;
}
