/* SPDX-License-Identifier: Apache-2.0
 * server: serves the built dashboard (web/, built into $(BUILD)/web) as
 * static files under / when `serve --web DIR` is given. Only regular files
 * inside DIR are served: paths with "..", "." segments, backslashes or a
 * resolved location outside DIR are refused as not found. Content-hashed
 * asset names (NAME-HASH.EXT, the build's naming) get a one-year immutable
 * Cache-Control, everything else (index.html) "no-cache".
 * Thread contract: reentrant; reads the file system on each call. */
#ifndef SRV_WEB_H
#define SRV_WEB_H

#include <stdbool.h>

#include "cm.h"
#include "srv_http.h"

/* True when a request of this method and path is for the dashboard (GET or
 * HEAD of a path outside /v1/ and the health, metrics routes). */
bool srv_web_wants(const char *method, const char *path);

/* Replies to r with the file for path under root ("/" is index.html), with
 * its Content-Type and Cache-Control. Errors (no reply sent; the caller
 * answers): CM_ENOTFOUND (no such regular file inside root, or a refused
 * path), CM_ENOMEM, CM_EIO (read failed). */
cm_status srv_web_reply(const char *root, srv_req *r, cm_error *err);

/* The Content-Type for a file name, from its extension (static string). */
const char *srv_web_content_type(const char *name);

/* True when the file name is content-hashed (NAME-HASH.EXT, HASH of 8 or
 * more letters and digits), so it may be cached forever. */
bool srv_web_is_hashed(const char *name);

#endif /* SRV_WEB_H */
