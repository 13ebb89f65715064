/*
 * Bounded SPSC ring. The producer owns tail, the consumer owns head; each reads the other's
 * index with acquire and publishes its own with release, so a popped pointer's pointee is fully
 * visible. Capacity is a power of two so wrap-around is a mask. Rejected: a mutex+condvar queue,
 * which costs a syscall under contention on the ingest hot path.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/common.h"

int ds_ring_init(struct ds_ring *ring, size_t capacity)
{
    if (capacity < 2 || capacity > DS_RING_CAPACITY_MAX || (capacity & (capacity - 1)) != 0) {
        return -EINVAL;
    }
    void **slots = calloc(capacity, sizeof(*slots));
    if (slots == NULL) {
        return -ENOMEM;
    }
    atomic_init(&ring->head, 0);
    atomic_init(&ring->tail, 0);
    ring->mask = capacity - 1;
    ring->slots = slots;
    return 0;
}

void ds_ring_deinit(struct ds_ring *ring)
{
    if (ring == NULL) {
        return;
    }
    free(ring->slots);
    ring->slots = NULL;
}

int ds_ring_push(struct ds_ring *ring, void *item)
{
    ASSERT(item != NULL);
    size_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    if (tail - head > ring->mask) {
        return -EAGAIN;
    }
    ring->slots[tail & ring->mask] = item;
    atomic_store_explicit(&ring->tail, tail + 1, memory_order_release);
    return 0;
}

void *ds_ring_pop(struct ds_ring *ring)
{
    size_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
    size_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    if (head == tail) {
        return NULL;
    }
    void *item = ring->slots[head & ring->mask];
    ASSERT(item != NULL);
    atomic_store_explicit(&ring->head, head + 1, memory_order_release);
    return item;
}

size_t ds_ring_count(const struct ds_ring *ring)
{
    size_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
    size_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    return tail - head;
}
