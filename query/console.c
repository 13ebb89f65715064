/*
 * The live console (GET /): the page, its script and its style sheet, compiled into the binary
 * (console_assets.h), and the token's way into a browser.
 *
 * The page is static: everything live comes over the server's own paths (one EventSource on
 * /v1/heat/stream; /v1/count?by=day where there is no heat), so the node, the router and
 * `serve` answer it alike and the router serves it locally without asking a node.
 *
 * A browser can put no bearer on a page load or an EventSource, so with --http-token the page
 * at /?token=T trades the token for an HttpOnly, SameSite=Strict cookie (303 to the same path
 * without the query, so the token leaves the address bar and the history), which the core
 * accepts wherever it accepts the bearer (http_request_authorized). A wrong token is a 401 with
 * no cookie; no token at all is a 401 page saying how to open the console.
 *
 * Rejected: reading the assets from files at run time (a binary and a directory to keep in
 * step, and a path for an attacker to aim at), and the token in the page's own requests as
 * ?token= (it would sit in every URL the browser keeps and every proxy logs).
 */
#include <string.h>

#include "query/console_assets.h"
#include "query/query.h"

/* What a browser shows without the token: how to give it, nothing about the server. It uses
 * the console's style sheet, which (like the script) is served without the token: both are the
 * same public bytes in every binary. */
#define CONSOLE_PAGE_HEAD                                                                          \
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>dayshard console"       \
    "</title><link rel=\"stylesheet\" href=\"/console.css\"></head><body><main class=\"layout "    \
    "single\"><section class=\"panel\"><h2>dayshard console</h2><p class=\"lead\">"
#define CONSOLE_PAGE_TAIL "</p></section></main></body></html>\n"
static const char console_unauthorized_page[] =
    CONSOLE_PAGE_HEAD "This server requires its token. Open <code>/?token=&lt;the "
                      "--http-token&gt;</code> once; the browser then keeps it in a cookie "
                      "for this server." CONSOLE_PAGE_TAIL;
static const char console_wrong_token_page[] =
    CONSOLE_PAGE_HEAD "That is not this server's token. Open <code>/?token=&lt;the "
                      "--http-token&gt;</code> with the right one." CONSOLE_PAGE_TAIL;

static const struct console_asset *console_asset_find(const char *path, size_t len)
{
    for (size_t i = 0; i < CONSOLE_ASSETS; i++) {
        if (strlen(console_assets[i].path) == len &&
            memcmp(console_assets[i].path, path, len) == 0) {
            return &console_assets[i];
        }
    }
    return NULL;
}

const char *query_console_text(const char *name, size_t *len)
{
    ASSERT(name != NULL);
    ASSERT(len != NULL);
    for (size_t i = 0; i < CONSOLE_ASSETS; i++) {
        if (strcmp(console_assets[i].path + 1, name) == 0 && name[0] != '\0') {
            *len = console_assets[i].len;
            return (const char *)console_assets[i].bytes;
        }
    }
    return NULL;
}

enum http_result query_console_respond(struct http_request *req, const struct query_route *route)
{
    ASSERT(route->endpoint == QUERY_EP_CONSOLE);
    size_t len = 0;
    const char *target = http_request_target(req, &len);
    const char *q = memchr(target, '?', len);
    size_t path_len = q != NULL ? (size_t)(q - target) : len;
    const struct console_asset *asset = console_asset_find(target, path_len);
    if (asset == NULL) { /* the route matched the decoded path ("/%63onsole.js"): no such asset */
        return http_respond_error(req, 404, "no such path: the console's files have plain names");
    }
    static const char html[] = "text/html; charset=utf-8";
    if (route->has_token) {
        if (!http_request_token_required(req) ||
            http_request_token_is(req, route->token, route->token_len)) {
            return http_respond_login(req, asset->path);
        }
        return http_respond_static(req, 401, console_wrong_token_page,
                                   sizeof(console_wrong_token_page) - 1, html);
    }
    bool page = strcmp(asset->path, "/") == 0;
    if (page && !http_request_authorized(req)) {
        return http_respond_static(req, 401, console_unauthorized_page,
                                   sizeof(console_unauthorized_page) - 1, html);
    }
    return http_respond_static(req, 200, asset->bytes, asset->len, asset->content_type);
}
