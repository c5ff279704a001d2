/* SPDX-License-Identifier: Apache-2.0
 * cmd: small helpers the subcommands share (their number arguments, the
 * medians of their timings, writing their result). Thread contract:
 * reentrant. */
#ifndef CMD_UTIL_H
#define CMD_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cm.h"

/* Parses s, decimal digits only (no sign, no blanks), into *out; false
 * otherwise (*out untouched). Values past UINT64_MAX read as UINT64_MAX, so
 * callers bound them. */
bool cmd_parse_u64(const char *s, uint64_t *out);

/* qsort comparator of doubles, ascending. */
int cmd_double_cmp(const void *a, const void *b);

/* Writes a subcommand's result b to out: 0 when written (or empty), 1 after
 * printing "shardplan CMD: out of memory" (b ran out of memory) or "...:
 * write error" to errs. */
int cmd_write_out(const cm_buf *b, const char *cmd, FILE *out, FILE *errs);
/* cm_buf sinks (cm_buf_init_sink): cmd_file_sink writes to the FILE * ctx
 * (false on a short write); cmd_discard_sink drops the bytes. */
bool cmd_file_sink(void *ctx, const char *data, size_t len);
bool cmd_discard_sink(void *ctx, const char *data, size_t len);

/* Whether argv[1..argc) holds "--help" or "-h" (before a "--" that ends
 * the options): every subcommand then prints its usage to out and exits 0. */
bool cmd_wants_help(int argc, char **argv);

/* Whether a is "--json", or "--format json" / "--format=json" (the older
 * spelling, still accepted). For "--format json" it advances *i past the
 * value. */
bool cmd_is_json_flag(int argc, char **argv, int *i);

/* Reports error e of subcommand cmd about file (NULL: none) to errs: the
 * line "shardplan CMD: [FILE: ]STATUS[ at PATH]: MSG", or under --json
 * (json true) one JSON line {"error":{"command","file","code","message",
 * "path"}} with the server's error members, so a pipeline parses both. */
void cmd_report(FILE *errs, bool json, const char *cmd, const char *file, const cm_error *e);

#endif /* CMD_UTIL_H */
