/* SPDX-License-Identifier: Apache-2.0
 * cmd: small helpers the subcommands share (their number arguments, the
 * medians of their timings). Thread contract: reentrant. */
#ifndef CMD_UTIL_H
#define CMD_UTIL_H

#include <stdbool.h>
#include <stdint.h>

/* Parses s, decimal digits only (no sign, no blanks), into *out; false
 * otherwise (*out untouched). Values past UINT64_MAX read as UINT64_MAX, so
 * callers bound them. */
bool cmd_parse_u64(const char *s, uint64_t *out);

/* qsort comparator of doubles, ascending. */
int cmd_double_cmp(const void *a, const void *b);

#endif /* CMD_UTIL_H */
