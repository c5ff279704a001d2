/* SPDX-License-Identifier: Apache-2.0
 * server: the HTTP client over libcurl (srv_client.h), for `shardplan
 * client` (cmd/cmd_client.c) and the benchmark webhooks. One easy handle per
 * request; the response body accumulates in the caller's cm_buf. */
#include "srv_client.h"

#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "cm.h"

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    cm_buf *b = userdata;
    cm_buf_append(b, ptr, size * nmemb);
    return b->oom ? 0 : size * nmemb;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    (void)ptr;
    (void)userdata;
    return size * nmemb;
}

/* Runs the transfer h is set up for, stores the HTTP status (0 when none came
 * back), then frees h and hdrs. Errors: CM_EIO with libcurl's message. */
static cm_status perform(CURL *h, struct curl_slist *hdrs, long *status_out, cm_error *err)
{
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status_out);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        return cm_error_set(err, CM_EIO, NULL, "%s", curl_easy_strerror(rc));
    }
    return CM_OK;
}

cm_status srv_client_post_json(const char *url, const char *body, size_t body_len, double timeout_s,
                               long *status_out, cm_error *err)
{
    *status_out = 0;
    CURL *h = curl_easy_init();
    if (h == NULL) {
        return cm_error_set(err, CM_EIO, NULL, "cannot initialize libcurl");
    }
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = hdrs != NULL ? curl_slist_append(hdrs, "Expect:") : NULL;
    hdrs = h2 != NULL ? h2 : hdrs;
    long ms = (long)(timeout_s * 1000);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    return perform(h, hdrs, status_out, err);
}


cm_status srv_client_global_init(cm_error *err)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return cm_error_set(err, CM_EIO, NULL, "cannot initialize libcurl");
    }
    return CM_OK;
}

void srv_client_global_fini(void)
{
    curl_global_cleanup();
}

cm_status srv_client_request(const srv_client_req *rq, long *status_out, cm_buf *body_out,
                             cm_error *err)
{
    *status_out = 0;
    CURL *h = curl_easy_init();
    if (h == NULL) {
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot initialize libcurl");
    }
    struct curl_slist *hdrs = NULL;
    char auth[600];
    if (rq->token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", rq->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (rq->ctype != NULL) {
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", rq->ctype);
        hdrs = curl_slist_append(hdrs, ct);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, rq->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body_out);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
    if (rq->body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    if (strcmp(rq->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    }
    return perform(h, hdrs, status_out, err);
}
