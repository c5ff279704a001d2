/* SPDX-License-Identifier: Apache-2.0
 * common: the hash map and hash functions (see cm_map.h). A slot is the
 * entry's hash followed by the entry, so a probe reads one cache line for
 * both; hash 0 marks an empty slot, and a real hash of 0 is stored as
 * ZERO_HASH. Removal shifts the rest of the probe run back (no tombstones),
 * which keeps every run as short as the keys in it make it. */
#include "cm_map.h"

#include <string.h>

#define MIN_CAP   16u
#define ZERO_HASH 0x9e3779b97f4a7c15ull /* what a hash of 0 is stored as */

/* ---- hashing ------------------------------------------------------------- */

uint64_t cm_hash_u64(uint64_t x)
{
    /* the 64-bit finaliser of MurmurHash3: a bijection with full avalanche */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

uint64_t cm_hash_bytes(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 1099511628211ull; /* FNV prime */
    }
    return cm_hash_u64(h);
}

uint64_t cm_hash_ptr(const void *p)
{
    return cm_hash_u64((uint64_t)(uintptr_t)p);
}

uint64_t cm_hash_combine(uint64_t h, uint64_t x)
{
    /* multiply-xor, then the finaliser: neither commutative nor prone to
     * cancel equal fields as a plain xor would */
    return cm_hash_u64((h ^ x) * 0x9e3779b97f4a7c15ull + x);
}

/* ---- the map ------------------------------------------------------------- */

static uint64_t stored_hash(uint64_t hash)
{
    return hash != 0 ? hash : ZERO_HASH;
}

static unsigned char *slot_at(const cm_map *m, size_t i)
{
    return m->slots + i * m->stride;
}

static uint64_t slot_hash(const unsigned char *slot)
{
    uint64_t h;
    memcpy(&h, slot, sizeof h);
    return h;
}

static void set_slot_hash(unsigned char *slot, uint64_t h)
{
    memcpy(slot, &h, sizeof h);
}

void cm_map_init(cm_map *m, size_t elem)
{
    m->slots = NULL;
    m->elem = elem;
    m->stride = sizeof(uint64_t) + ((elem + 7u) & ~(size_t)7u);
    m->cap = 0;
    m->n = 0;
}

void cm_map_fini(cm_map *m)
{
    cm_free(m->slots);
    m->slots = NULL;
    m->cap = 0;
    m->n = 0;
}

void cm_map_clear(cm_map *m)
{
    if (m->slots != NULL) {
        memset(m->slots, 0, m->cap * m->stride);
    }
    m->n = 0;
}

/* Moves every entry into a fresh slot array of cap slots; on failure the
 * map is unchanged. */
static cm_status rehash(cm_map *m, size_t cap, cm_error *err)
{
    size_t bytes;
    if (!cm_mul_size(cap, m->stride, &bytes)) {
        return cm_error_oom(err);
    }
    unsigned char *slots = cm_calloc(1, bytes);
    if (slots == NULL) {
        return cm_error_oom(err);
    }
    size_t mask = cap - 1;
    for (size_t i = 0; i < m->cap; i++) {
        const unsigned char *from = slot_at(m, i);
        uint64_t h = slot_hash(from);
        if (h == 0) {
            continue;
        }
        size_t j = (size_t)h & mask;
        while (slot_hash(slots + j * m->stride) != 0) {
            j = (j + 1) & mask;
        }
        memcpy(slots + j * m->stride, from, m->stride);
    }
    cm_free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return CM_OK;
}

cm_status cm_map_reserve(cm_map *m, size_t n, cm_error *err)
{
    /* at most half full: n entries need 2n slots */
    if (n == 0) {
        return CM_OK;
    }
    if (n > SIZE_MAX / 4) {
        return cm_error_oom(err);
    }
    size_t cap = m->cap < MIN_CAP ? MIN_CAP : m->cap;
    while (cap < 2 * n) {
        cap *= 2;
    }
    return cap == m->cap ? CM_OK : rehash(m, cap, err);
}

void *cm_map_find(const cm_map *m, uint64_t hash, cm_map_eq_fn *eq, const void *key)
{
    if (m->n == 0) {
        return NULL;
    }
    uint64_t h = stored_hash(hash);
    size_t mask = m->cap - 1;
    for (size_t j = (size_t)h & mask;; j = (j + 1) & mask) {
        unsigned char *s = slot_at(m, j);
        uint64_t sh = slot_hash(s);
        if (sh == 0) {
            return NULL;
        }
        if (sh == h && (eq == NULL || eq(s + sizeof(uint64_t), key))) {
            return s + sizeof(uint64_t);
        }
    }
}

/* Fills the empty slot j for hash h and returns its entry. */
static void *claim(cm_map *m, size_t j, uint64_t h)
{
    unsigned char *s = slot_at(m, j);
    set_slot_hash(s, h);
    memset(s + sizeof(uint64_t), 0, m->stride - sizeof(uint64_t));
    m->n++;
    return s + sizeof(uint64_t);
}

/* The first empty slot of h's probe run. */
static size_t free_slot(const cm_map *m, uint64_t h)
{
    size_t mask = m->cap - 1;
    size_t j = (size_t)h & mask;
    while (slot_hash(slot_at(m, j)) != 0) {
        j = (j + 1) & mask;
    }
    return j;
}

/* Grows, when needed, so that one more entry keeps the map at most half
 * full. */
static cm_status make_room(cm_map *m, cm_error *err)
{
    if ((m->n + 1) * 2 <= m->cap) {
        return CM_OK;
    }
    if (m->cap > SIZE_MAX / 2) {
        return cm_error_oom(err);
    }
    return rehash(m, m->cap < MIN_CAP ? MIN_CAP : m->cap * 2, err);
}

cm_status cm_map_insert(cm_map *m, uint64_t hash, void **entry_out, cm_error *err)
{
    *entry_out = NULL;
    cm_status st = make_room(m, err);
    if (st != CM_OK) {
        return st;
    }
    uint64_t h = stored_hash(hash);
    *entry_out = claim(m, free_slot(m, h), h);
    return CM_OK;
}

cm_status cm_map_find_or_insert(cm_map *m, uint64_t hash, cm_map_eq_fn *eq, const void *key,
                                void **entry_out, bool *found_out, cm_error *err)
{
    uint64_t h = stored_hash(hash);
    *entry_out = NULL;
    if (found_out != NULL) {
        *found_out = false;
    }
    size_t j = 0;
    if (m->cap > 0) {
        size_t mask = m->cap - 1;
        for (j = (size_t)h & mask;; j = (j + 1) & mask) {
            unsigned char *s = slot_at(m, j);
            uint64_t sh = slot_hash(s);
            if (sh == 0) {
                break;
            }
            if (sh == h && (eq == NULL || eq(s + sizeof(uint64_t), key))) {
                if (found_out != NULL) {
                    *found_out = true;
                }
                *entry_out = s + sizeof(uint64_t);
                return CM_OK;
            }
        }
    }
    if ((m->n + 1) * 2 > m->cap) {
        cm_status st = make_room(m, err);
        if (st != CM_OK) {
            return st;
        }
        j = free_slot(m, h); /* the slots moved */
    }
    *entry_out = claim(m, j, h);
    return CM_OK;
}

void cm_map_remove(cm_map *m, void *entry)
{
    unsigned char *e = entry;
    size_t hole = (size_t)(e - sizeof(uint64_t) - m->slots) / m->stride;
    size_t mask = m->cap - 1;
    /* Knuth's deletion for linear probing: an entry later in the run moves
     * into the hole unless its home slot lies cyclically in (hole, j] */
    for (size_t j = (hole + 1) & mask;; j = (j + 1) & mask) {
        unsigned char *s = slot_at(m, j);
        uint64_t h = slot_hash(s);
        if (h == 0) {
            break;
        }
        size_t home = (size_t)h & mask;
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            memcpy(slot_at(m, hole), s, m->stride);
            hole = j;
        }
    }
    memset(slot_at(m, hole), 0, m->stride);
    m->n--;
}

void *cm_map_next(const cm_map *m, size_t *pos)
{
    for (size_t i = *pos; i < m->cap; i++) {
        unsigned char *s = slot_at(m, i);
        if (slot_hash(s) != 0) {
            *pos = i + 1;
            return s + sizeof(uint64_t);
        }
    }
    *pos = m->cap;
    return NULL;
}
