/* SPDX-License-Identifier: Apache-2.0
 * server: the plan cache (srv_int.h): two direct-mapped maps under one
 * mutex, plan id -> the plan's response body (a reference-counted srv_blob
 * shared with the responses that send it) and the hash of a raw request ->
 * the plan id it was answered with. A collision overwrites: the store is
 * the truth, the cache only saves work. Every lookup first asks the store
 * for its data version (a dedicated handle, PRAGMA data_version): when any
 * connection has committed since, another server on the same file
 * included, the cache epoch moves on and every entry stored before is
 * stale. The store is asked at most every SRV_CACHE_CHECK_US: a plan deleted
 * through another server is not served from memory later than that after
 * the delete commits (deletes through this server drop their entry at once). */
#include <string.h>

#include "srv_int.h"

void srv_cache_init(srv_app *app)
{
    pthread_mutex_init(&app->cache_mu, NULL);
    pthread_mutex_init(&app->watch_mu, NULL);
    atomic_init(&app->cache_epoch, 1);
    atomic_init(&app->dv_checked_us, 0);
    app->data_version = 0;
    app->cache = NULL;
    app->keys = NULL;
    app->n_slots = 0;
}

cm_status srv_cache_alloc(srv_app *app, size_t entries, cm_error *err)
{
    if (entries == 0) {
        return CM_OK;
    }
    app->n_slots = entries < SRV_CACHE_SLOTS_MIN ? SRV_CACHE_SLOTS_MIN : entries;
    app->cache = cm_calloc(app->n_slots, sizeof *app->cache);
    app->keys = cm_calloc(app->n_slots, sizeof *app->keys);
    if (app->cache == NULL || app->keys == NULL) {
        return cm_error_oom(err);
    }
    return CM_OK;
}

void srv_cache_fini(srv_app *app)
{
    for (size_t i = 0; i < app->n_slots && app->cache != NULL; i++) {
        srv_blob_release(app->cache[i].blob);
    }
    cm_free(app->cache);
    cm_free(app->keys);
    app->cache = NULL;
    app->keys = NULL;
    app->n_slots = 0;
    pthread_mutex_destroy(&app->cache_mu);
    pthread_mutex_destroy(&app->watch_mu);
}

/* The current epoch, moved on first when the store changed since the last
 * look (or cannot tell: then nothing cached is trusted). The store is asked
 * at most every SRV_CACHE_CHECK_US microseconds, by one thread at a time:
 * the others use the epoch as it stands, so a hit costs no store call. */
static uint64_t epoch_now(srv_app *app)
{
    uint64_t now = (uint64_t)(cm_now() * 1e6);
    if (app->watch_db == NULL || now - atomic_load(&app->dv_checked_us) < SRV_CACHE_CHECK_US ||
        pthread_mutex_trylock(&app->watch_mu) != 0) {
        return atomic_load(&app->cache_epoch);
    }
    int64_t v = 0;
    cm_status st = st_db_data_version(app->watch_db, &v, NULL);
    if (st != CM_OK || v != app->data_version) {
        app->data_version = v;
        atomic_fetch_add(&app->cache_epoch, 1);
    }
    atomic_store(&app->dv_checked_us, now);
    uint64_t e = atomic_load(&app->cache_epoch);
    pthread_mutex_unlock(&app->watch_mu);
    return e;
}

srv_blob *srv_blob_create(const char *data, size_t len)
{
    srv_blob *b = cm_alloc(sizeof *b + len + 1);
    if (b == NULL) {
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->len = len;
    b->etag[0] = '\0';
    if (data != NULL) {
        memcpy(b->data, data, len);
    }
    b->data[len] = '\0';
    return b;
}

void srv_blob_release(void *blob)
{
    srv_blob *b = blob;
    if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1) {
        cm_free(b);
    }
}

static size_t slot_of(const srv_app *app, uint64_t h)
{
    return (size_t)(h * 0x9E3779B97F4A7C15ull >> 20) % app->n_slots;
}

srv_blob *srv_cache_get(srv_app *app, int64_t id)
{
    if (app->n_slots == 0) {
        return NULL;
    }
    srv_blob *b = NULL;
    uint64_t epoch = epoch_now(app);
    pthread_mutex_lock(&app->cache_mu);
    srv_cache_slot *s = &app->cache[slot_of(app, (uint64_t)id)];
    if (s->id == id && s->blob != NULL && s->epoch == epoch) {
        b = s->blob;
        atomic_fetch_add(&b->refs, 1);
    }
    pthread_mutex_unlock(&app->cache_mu);
    return b;
}

void srv_cache_put(srv_app *app, int64_t id, srv_blob *blob)
{
    if (app->n_slots == 0) {
        return;
    }
    atomic_fetch_add(&blob->refs, 1);
    uint64_t epoch = epoch_now(app);
    pthread_mutex_lock(&app->cache_mu);
    srv_cache_slot *s = &app->cache[slot_of(app, (uint64_t)id)];
    srv_blob *old = s->blob;
    s->id = id;
    s->epoch = epoch;
    s->blob = blob;
    pthread_mutex_unlock(&app->cache_mu);
    srv_blob_release(old);
}

void srv_cache_drop(srv_app *app, int64_t id)
{
    if (app->n_slots == 0) {
        return;
    }
    srv_blob *old = NULL;
    pthread_mutex_lock(&app->cache_mu);
    srv_cache_slot *s = &app->cache[slot_of(app, (uint64_t)id)];
    if (s->id == id) {
        old = s->blob;
        s->blob = NULL;
        s->id = 0;
    }
    for (size_t i = 0; i < app->n_slots; i++) {
        if (app->keys[i].id == id) {
            app->keys[i].id = 0;
        }
    }
    pthread_mutex_unlock(&app->cache_mu);
    srv_blob_release(old);
}

static uint64_t key_u64(const uint8_t key[CM_SHA256_LEN])
{
    uint64_t h = 0;
    memcpy(&h, key, sizeof h);
    return h;
}

int64_t srv_cache_key_get(srv_app *app, const uint8_t key[CM_SHA256_LEN])
{
    if (app->n_slots == 0) {
        return 0;
    }
    int64_t id = 0;
    uint64_t epoch = epoch_now(app);
    pthread_mutex_lock(&app->cache_mu);
    const srv_key_slot *s = &app->keys[slot_of(app, key_u64(key))];
    if (s->id != 0 && s->epoch == epoch && memcmp(s->key, key, CM_SHA256_LEN) == 0) {
        id = s->id;
    }
    pthread_mutex_unlock(&app->cache_mu);
    return id;
}

void srv_cache_key_put(srv_app *app, const uint8_t key[CM_SHA256_LEN], int64_t id)
{
    if (app->n_slots == 0) {
        return;
    }
    uint64_t epoch = epoch_now(app);
    pthread_mutex_lock(&app->cache_mu);
    srv_key_slot *s = &app->keys[slot_of(app, key_u64(key))];
    memcpy(s->key, key, CM_SHA256_LEN);
    s->id = id;
    s->epoch = epoch;
    pthread_mutex_unlock(&app->cache_mu);
}

void srv_cache_keys_clear(srv_app *app)
{
    pthread_mutex_lock(&app->cache_mu);
    for (size_t i = 0; i < app->n_slots; i++) {
        app->keys[i].id = 0;
    }
    pthread_mutex_unlock(&app->cache_mu);
}

void srv_cache_clear(srv_app *app)
{
    pthread_mutex_lock(&app->cache_mu);
    for (size_t i = 0; i < app->n_slots; i++) {
        srv_blob_release(app->cache[i].blob);
        app->cache[i].blob = NULL;
        app->cache[i].id = 0;
        app->keys[i].id = 0;
    }
    pthread_mutex_unlock(&app->cache_mu);
}
