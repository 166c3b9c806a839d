/* SPDX-License-Identifier: MIT */
/* The C tests' one assertion: CHECK(condition, printf-style message) prints where it failed,
 * what was checked and the message, counts the failure in `failures`, and goes on. Each test
 * program includes it once and exits nonzero when `failures` is. */
#ifndef RLMEM_TESTS_C_CHECK_H
#define RLMEM_TESTS_C_CHECK_H

#include <stdio.h>

static int failures = 0;

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                     \
      fputc('\n', stderr);                                              \
      ++failures;                                                       \
    }                                                                   \
  } while (0)

#endif /* RLMEM_TESTS_C_CHECK_H */
