/*
 * Private to query/: the console's assets, compiled into the binary from query/console/ by
 * query/console/embed.cmake (the generated console_assets.c defines the table). console.c
 * serves them.
 */
#ifndef DS_QUERY_CONSOLE_ASSETS_H
#define DS_QUERY_CONSOLE_ASSETS_H

#include <stddef.h>

/* The page, its script and its style sheet, and the load test report's script (not served: no
 * route names it; query_console_text hands it to the report's writer). */
#define CONSOLE_ASSETS 4u

struct console_asset {
    const char *path;         /* the request path that serves it ("/" for the page) */
    const char *content_type; /* with its charset */
    const unsigned char *bytes;
    size_t len;
};

extern const struct console_asset console_assets[CONSOLE_ASSETS];

#endif /* DS_QUERY_CONSOLE_ASSETS_H */
