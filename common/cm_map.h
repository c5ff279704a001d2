/* SPDX-License-Identifier: Apache-2.0
 * common: the hash map and the hash functions. A cm_map is an open-addressing
 * table (power-of-two capacity, linear probing, at most half full) of
 * fixed-size entries that the caller defines: an interned pointer, an index
 * into the caller's own array, or a small key/value struct. Each slot keeps
 * the entry's 64-bit hash beside it, so growing never calls back into the
 * caller and a probe compares hashes before it asks the caller's equality.
 * The map owns its slot array (cm_alloc); what entries point to stays the
 * caller's. Thread contract: single-owner; concurrent finds on a map that
 * nobody modifies are safe. */
#ifndef CM_MAP_H
#define CM_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"

/* ---- hashing ----------------------------------------------------------- */

/* 64-bit FNV-1a of the len bytes at data, followed by a finaliser that
 * spreads every input bit over the low bits a table index uses (plain
 * FNV-1a's low bits depend only on the inputs' low bits). Deterministic
 * across runs and machines; not for untrusted keys an attacker can choose
 * to collide (no seed). */
uint64_t cm_hash_bytes(const void *data, size_t len);

/* A bijective mix of x (distinct inputs give distinct hashes; 0 gives 0).
 * For integer keys and for combining fields. */
uint64_t cm_hash_u64(uint64_t x);

/* cm_hash_u64 of the pointer's address: distinct non-NULL pointers give
 * distinct non-zero hashes, so a map keyed by pointer identity needs no
 * equality callback. */
uint64_t cm_hash_ptr(const void *p);

/* The hash of the sequence (h's fields..., x): order matters. Start with
 * h = 0 or any constant, and fold each field's hash or value in. */
uint64_t cm_hash_combine(uint64_t h, uint64_t x);

/* ---- the map ----------------------------------------------------------- */

/* Whether the stored entry matches the caller's key (whatever key points
 * to: the caller passes it to find and reads it here). Called only for
 * slots whose stored hash equals the hash being looked up. */
typedef bool cm_map_eq_fn(const void *entry, const void *key);

typedef struct cm_map {
    unsigned char *slots; /* cap slots of stride bytes: uint64_t hash (0 = empty), entry */
    size_t stride;        /* bytes per slot: 8 + elem rounded up to a multiple of 8 */
    size_t elem;          /* bytes per entry */
    size_t cap;           /* slots: 0 or a power of two */
    size_t n;             /* entries */
} cm_map;

/* Prepares an empty map of entries of elem bytes (elem > 0); allocates
 * nothing. Entries are 8-byte aligned. */
void cm_map_init(cm_map *m, size_t elem);

/* Frees the slot array and leaves an empty map (m stays usable). */
void cm_map_fini(cm_map *m);

/* Forgets every entry but keeps the slot array. */
void cm_map_clear(cm_map *m);

/* Makes room for n entries in all, so that inserting up to n entries does
 * not grow (and cannot fail). On allocation failure (or a size that
 * overflows) returns CM_ENOMEM through cm_error_oom with the map unchanged. */
cm_status cm_map_reserve(cm_map *m, size_t n, cm_error *err);

/* The entry with this hash that eq(entry, key) accepts, or NULL. When eq is
 * NULL an equal hash is enough: pass NULL only when distinct keys cannot
 * have equal hashes and no key hashes to 0, as with cm_hash_ptr over
 * non-NULL pointers or cm_hash_u64 over non-zero integers (a hash of 0 is
 * stored as a fixed non-zero value, which another key could also have). The
 * pointer is the map's own storage: valid until the next insert, remove,
 * reserve, clear or fini; the caller may change the entry's contents but
 * not what its hash was computed from. */
void *cm_map_find(const cm_map *m, uint64_t hash, cm_map_eq_fn *eq, const void *key);

/* Adds an entry with this hash without looking for an equal one and stores
 * a pointer to it, zero-filled, in *entry_out (valid as for cm_map_find);
 * the caller fills it in. Grows the table first when it would become more
 * than half full (capacity doubles, from 16). On allocation failure returns
 * CM_ENOMEM through cm_error_oom with the map unchanged and *entry_out
 * NULL. */
cm_status cm_map_insert(cm_map *m, uint64_t hash, void **entry_out, cm_error *err);

/* cm_map_find, and cm_map_insert when nothing is found, in one probe:
 * *found_out says which (found_out may be NULL); *entry_out is the entry
 * found or the new zero-filled one. Fails only as cm_map_insert does, and
 * then leaves the map unchanged. */
cm_status cm_map_find_or_insert(cm_map *m, uint64_t hash, cm_map_eq_fn *eq, const void *key,
                                void **entry_out, bool *found_out, cm_error *err);

/* Removes the entry at entry (a pointer cm_map_find or an insert returned,
 * still valid). Later entries of its probe run move back, so the map never
 * holds tombstones; other entry pointers are invalidated. */
void cm_map_remove(cm_map *m, void *entry);

/* Iteration, in no particular order: set *pos = 0, then each call returns
 * the next entry, or NULL after the last. The map must not change during an
 * iteration except through cm_map_find's writable entries. */
void *cm_map_next(const cm_map *m, size_t *pos);

#endif /* CM_MAP_H */
