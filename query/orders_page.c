/*
 * query_orders_get (query.h): one page of a customer's orders from a by-customer index handle,
 * as the order APIs show it (the node's and `serve`'s /v1/customers/{id}/orders, `orders`).
 *
 * In the orders model the index keeps every (customer, ts, order id)
 * an order ever had, and a page lists an entry only when the storage handle beside it says that
 * is the order's current customer and ts; it refills from the index (asking for what the page
 * still lacks, from the last entry looked at) so a page keeps its size and the next token stays
 * exact. Rejected: deleting superseded entries from the index (the builder would have to learn
 * an order's previous version, which only the orders-by-id store knows, and the index has no
 * delete), and filtering in the index by a per-order version (two stores' versions to keep in
 * step).
 *
 *
 * In the events model, and without a storage handle, a page lists the index's entries as
 * stored, cut at the first one of a day retention dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index/index.h"
#include "query/query.h"

static struct query_order order_of_entry(const struct index_entry *e)
{
    struct query_order o = {.order_id = e->order_id,
                            .ts_ms = e->ts_ms,
                            .day = e->day,
                            .status_len = e->status_len,
                            .amount_units = e->amount_units};
    memcpy(o.status, e->status, e->status_len);
    return o;
}

/* Whether entry e is its order's current version as st knows it (the orders model), and then
 * that version's figures into *o. An order st does not know yet (an entry newer than st's view)
 * is not current. Returns 1, 0, or a storage error. */
static int entry_current(struct storage *st, const struct index_entry *e, void *scratch,
                         struct query_order *o)
{
    struct storage_order cur;
    int rc = storage_order_get(st, &e->order_id, &cur, scratch, STORAGE_ORDER_SCRATCH_BYTES);
    if (rc == -ENOENT) {
        return 0;
    }
    if (rc != 0) {
        return rc;
    }
    if (cur.ts_ms != e->ts_ms || !ds_id_equal(&cur.customer_id, &e->customer_id)) {
        return 0;
    }
    *o = (struct query_order){.order_id = e->order_id,
                              .ts_ms = cur.ts_ms,
                              .day = cur.day,
                              .status_len = cur.status_len,
                              .amount_units = cur.amount_units};
    memcpy(o->status, cur.status, cur.status_len);
    return 1;
}

/* The orders model's page (see query.h): each round asks the index for the page's remainder
 * after the last entry looked at, so the index's own next token always stands right after the
 * last entry taken or skipped, and a full page ends exactly at an entry it lists. */
static int orders_current(struct index *ix, struct storage *st, const struct ds_id *customer,
                          uint32_t limit, const char *page_token, struct index_page *page,
                          struct query_orders_page *out)
{
    void *scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    if (scratch == NULL) {
        return -ENOMEM;
    }
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    if (page_token != NULL && strlen(page_token) >= sizeof(token)) {
        free(scratch);
        return -DS_EUSAGE; /* longer than any token the index hands out */
    }
    if (page_token != NULL) {
        memcpy(token, page_token, strlen(page_token) + 1);
    }
    uint32_t count = 0;
    uint32_t examined = 0;
    int rc = 0;
    for (;;) { /* bounded by the index's end and QUERY_ORDERS_EXAMINED_MAX */
        rc = index_query(ix, customer, limit - count, token, page);
        for (uint32_t i = 0; rc == 0 && i < page->count; i++) {
            struct query_order o;
            rc = entry_current(st, &page->entries[i], scratch, &o);
            if (rc == 1) {
                out->orders[count++] = o;
                rc = 0;
            }
        }
        examined += rc == 0 ? page->count : 0;
        if (rc != 0 || count == limit || !page->has_next || examined >= QUERY_ORDERS_EXAMINED_MAX) {
            break;
        }
        ASSERT(page->count > 0); /* a page with a next token holds an entry */
        memcpy(token, page->next_token, sizeof(token));
    }
    free(scratch);
    if (rc != 0) {
        return rc;
    }
    ASSERT(count <= limit);
    out->count = count;
    out->has_next = page->has_next;
    _Static_assert(sizeof(out->next_token) == sizeof(page->next_token), "same token size");
    memcpy(out->next_token, page->next_token, sizeof(out->next_token));
    return 0;
}

int query_orders_get(struct index *ix, struct storage *st, const struct ds_id *customer,
                     uint32_t limit, const char *page_token, struct query_orders_page *out)
{
    if (limit == 0 || limit > QUERY_ORDERS_LIMIT_MAX) {
        return -DS_EUSAGE;
    }
    struct index_page page = {.entries = malloc((size_t)limit * sizeof(struct index_entry))};
    if (page.entries == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    if (st != NULL && storage_model(st) == STORAGE_MODEL_ORDERS) {
        rc = orders_current(ix, st, customer, limit, page_token, &page, out);
    } else {
        rc = index_query(ix, customer, limit, page_token, &page);
        /* Entries come newest first: the first of a day retention dropped ends the view (every
         * later one is older), which hides a dropped day whole from the moment of its drop. */
        int32_t floor = st != NULL ? storage_retention_floor(st) : 0;
        uint32_t kept = 0;
        while (rc == 0 && kept < page.count && page.entries[kept].day >= floor) {
            out->orders[kept] = order_of_entry(&page.entries[kept]);
            kept++;
        }
        if (rc == 0) {
            out->count = kept;
            out->has_next = page.has_next && kept == page.count;
            _Static_assert(sizeof(out->next_token) == sizeof(page.next_token), "same token size");
            memcpy(out->next_token, page.next_token, sizeof(out->next_token));
        }
    }
    free(page.entries);
    return rc;
}
