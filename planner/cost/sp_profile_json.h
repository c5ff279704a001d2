/* SPDX-License-Identifier: Apache-2.0
 * planner: device profiles (docs/device-profiles.md) decoded from JSON into
 * the plain sp_profile of sp_cost.h, and looked up by name in the profile
 * directory. Thread contract: reentrant. */
#ifndef SP_PROFILE_JSON_H
#define SP_PROFILE_JSON_H

#include "cm.h"
#include "sp_cost.h"

#include <stddef.h>

/* Decodes a profile document of len bytes into *out. Errors: CM_EINVAL with
 * err->path the JSON Pointer of the offending member ("/peak_flops/bf16"),
 * empty for a syntax error whose message carries line and column. */
cm_status sp_profile_decode(const char *text, size_t len, sp_profile *out, cm_error *err);

/* Loads a profile by file path (anything containing '/' or ending in
 * ".json") or by name: NAME.json in $SHARDPLAN_PROFILES, then ./profiles,
 * then the profiles folder of the source tree the binary was built in
 * (two levels above it: build/rel/shardplan). "cpu-local" falls back to the
 * built-in copy when no file is found. Errors: CM_ENOTFOUND, CM_EIO, those
 * of sp_profile_decode (err->msg names the file). */
cm_status sp_profile_load(const char *name_or_path, sp_profile *out, cm_error *err);

#endif /* SP_PROFILE_JSON_H */
