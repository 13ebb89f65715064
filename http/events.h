/*
 * Private to http/: what the event streams (events.c) and the server core (server.c) share.
 * The core owns a server's struct http_events (created with the server when it takes event
 * streams) and answers with the streams events.c makes; events.c keeps the streams and calls
 * nothing of the core (the layers call downward: server.c over events.c).
 */
#ifndef DS_HTTP_EVENTS_H
#define DS_HTTP_EVENTS_H

#include <microhttpd.h>

#include "http/http.h"

struct http_events;

/* A server's streams (at most streams_max; tick and user as in http_server_config; s is the
 * server the tick is given). Returns 0 or -ENOMEM. */
DS_MUST_USE int events_create(uint32_t streams_max, http_events_tick_fn tick, void *user,
                              struct http_server *s, struct http_events **out);
/* Starts the pump thread. Returns 0 or a negated errno of pthread_create. */
DS_MUST_USE int events_start(struct http_events *e);
/* Refuses new streams, ends every open one (resuming the suspended ones, which libmicrohttpd
 * requires before its daemon stops) and joins the pump. Before MHD_stop_daemon. */
void events_stop(struct http_events *e);
/* After MHD_stop_daemon (which freed every stream's answer). Accepts NULL. */
void events_destroy(struct http_events *e);

/* A new stream on connection: *out gets its answer (200 text/event-stream, to queue). Returns
 * 0, -EAGAIN (streams_max open, or stopping) or -ENOMEM. */
DS_MUST_USE int events_open(struct http_events *e, struct MHD_Connection *connection,
                            struct MHD_Response **out);
uint32_t events_streams_max(const struct http_events *e);
/* As http_events_list and http_events_send (http.h). */
uint32_t events_list(struct http_events *e, struct http_events_cursor *out, uint32_t capacity);
int events_send(struct http_events *e, uint64_t id, char *event, size_t len, int64_t position);

#endif /* DS_HTTP_EVENTS_H */
