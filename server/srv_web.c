/* SPDX-License-Identifier: Apache-2.0
 * server: static files of the dashboard (srv_web.h). Files are small (the
 * bundle is a few hundred KiB), so each is read whole into a heap buffer
 * that the response takes. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "srv_web.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEB_MAX_FILE ((size_t)64 << 20) /* refuse larger files, bytes */

bool srv_web_wants(const char *method, const char *path)
{
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        return false;
    }
    return path[0] == '/' && strncmp(path, "/v1/", 4) != 0 && strcmp(path, "/v1") != 0;
}

static const struct {
    const char *ext;
    const char *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".woff2", "font/woff2"},
    {".txt", "text/plain; charset=utf-8"},
};

const char *srv_web_content_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot != NULL && strchr(dot, '/') == NULL) {
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            if (strcmp(dot, types[i].ext) == 0) {
                return types[i].type;
            }
        }
    }
    return "application/octet-stream";
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool srv_web_is_hashed(const char *name)
{
    const char *base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    const char *dot = strchr(base, '.');
    const char *dash = strrchr(base, '-');
    if (dot == NULL || dash == NULL || dash > dot) {
        return false;
    }
    size_t n = 0;
    for (const char *p = dash + 1; p < dot; p++, n++) {
        if (!is_alnum(*p)) {
            return false;
        }
    }
    return n >= 8;
}

/* Refuses anything but plain relative segments: no "..", no "." or hidden
 * segments, no empty segments, no backslashes or control characters. */
static bool path_ok(const char *rel)
{
    const char *seg = rel;
    for (const char *p = rel;; p++) {
        if (*p == '/' || *p == '\0') {
            if (p == seg || seg[0] == '.') {
                return false;
            }
            if (*p == '\0') {
                return true;
            }
            seg = p + 1;
        } else if (*p == '\\' || (unsigned char)*p < 0x20 || *p == 0x7f) {
            return false;
        }
    }
}

cm_status srv_web_reply(const char *root, srv_req *r, cm_error *err)
{
    const char *path = srv_req_path(r);
    const char *rel = strcmp(path, "/") == 0 ? "index.html" : path + 1;
    if (!path_ok(rel)) {
        return cm_error_set(err, CM_ENOTFOUND, NULL, "no resource at %s", path);
    }
    char want[PATH_MAX];
    int w = snprintf(want, sizeof want, "%s/%s", root, rel);
    if (w < 0 || (size_t)w >= sizeof want) {
        return cm_error_set(err, CM_ENOTFOUND, NULL, "no resource at %s", path);
    }
    /* Belt and braces against symlinks leading out of root. */
    char root_real[PATH_MAX], file_real[PATH_MAX];
    if (realpath(root, root_real) == NULL || realpath(want, file_real) == NULL) {
        return cm_error_set(err, CM_ENOTFOUND, NULL, "no resource at %s", path);
    }
    size_t rn = strlen(root_real);
    if (strncmp(file_real, root_real, rn) != 0 || file_real[rn] != '/') {
        return cm_error_set(err, CM_ENOTFOUND, NULL, "no resource at %s", path);
    }
    int fd = open(file_real, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return cm_error_set(err, CM_ENOTFOUND, NULL, "no resource at %s", path);
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (size_t)sb.st_size > WEB_MAX_FILE) {
        close(fd);
        return cm_error_set(err, CM_ENOTFOUND, NULL, "no resource at %s", path);
    }
    size_t len = (size_t)sb.st_size;
    char *data = cm_alloc(len + 1);
    if (data == NULL) {
        close(fd);
        return cm_error_oom(err);
    }
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, data + got, len - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            close(fd);
            cm_free(data);
            return cm_error_set(err, CM_EIO, NULL, "cannot read %s", path);
        }
        got += (size_t)n;
    }
    close(fd);
    data[len] = '\0';
    srv_req_add_header(r, "Cache-Control",
                       srv_web_is_hashed(rel) ? "public, max-age=31536000, immutable" : "no-cache");
    srv_req_add_header(r, "X-Content-Type-Options", "nosniff");
    srv_req_reply_take(r, 200, srv_web_content_type(rel), data, len);
    return CM_OK;
}
