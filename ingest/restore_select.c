/*
 * The selection of restore_select.h. A sorted array and binary search, not a hash table: the
 * keys are known before the partition is scanned, and a sort keeps equal contents adjacent, so
 * a multiset costs no extra structure.
 */
#include <stdlib.h>
#include <string.h>

#include "ingest/restore_select.h"

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

static uint64_t hash_id(uint64_t h, const struct ds_id *id)
{
    uint8_t kind = id->is_string ? 1 : 0;
    h = fnv(h, &kind, 1);
    if (id->is_string) {
        h = fnv(h, &id->len, 1);
        return fnv(h, id->text, id->len);
    }
    return fnv(h, &id->value, sizeof(id->value));
}

uint64_t restore_select_hash(const struct ds_event *event)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = hash_id(h, &event->order_id);
    h = hash_id(h, &event->customer_id);
    h = fnv(h, &event->ts_ms, sizeof(event->ts_ms));
    h = fnv(h, &event->amount_units, sizeof(event->amount_units));
    h = fnv(h, &event->status_len, 1);
    h = fnv(h, event->status, event->status_len);
    uint8_t has_version = event->has_version ? 1 : 0;
    h = fnv(h, &has_version, 1);
    h = fnv(h, &event->version, sizeof(event->version));
    return ds_mix64(h);
}

static int key_compare(const void *a, const void *b)
{
    const struct restore_key *x = a;
    const struct restore_key *y = b;
    if (x->hash != y->hash) {
        return x->hash < y->hash ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

void restore_select_sort(struct restore_key *keys, uint64_t count)
{
    if (count > 0) {
        qsort(keys, count, sizeof(*keys), key_compare);
    }
}

bool restore_select_take(struct restore_key *keys, uint64_t count, uint64_t hash)
{
    /* The first key with this hash: lower bound. */
    uint64_t lo = 0;
    uint64_t hi = count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (keys[mid].hash < hash) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (uint64_t i = lo; i < count && keys[i].hash == hash; i++) {
        if (!keys[i].taken) {
            keys[i].taken = true;
            return true;
        }
    }
    return false;
}
