/*
 * The listening socket of an HTTP server (http.h): "HOST:PORT" (an IPv6 host in brackets,
 * port 0 picks one), non-blocking, close-on-exec, SO_REUSEADDR, and the bound
 * address written back as text for the caller to print and tests to dial.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http.h"

int http_listen(const char *listen_text, int *fd_out, char *address, size_t address_size)
{
    char host[256];
    const char *colon = strrchr(listen_text, ':');
    if (colon == NULL || colon == listen_text || (size_t)(colon - listen_text) >= sizeof(host) ||
        colon[1] == '\0') {
        return -DS_EUSAGE;
    }
    /* glibc's getaddrinfo takes "99999" as port 34463 (it keeps 16 bits): a port is 1..5
     * digits up to 65535, checked here. */
    size_t port_len = strlen(colon + 1);
    if (port_len > 5 || strspn(colon + 1, "0123456789") != port_len ||
        strtoul(colon + 1, NULL, 10) > 65535u) {
        return -DS_EUSAGE;
    }
    size_t host_len = (size_t)(colon - listen_text);
    memcpy(host, listen_text, host_len);
    host[host_len] = '\0';
    if (host_len > 2 && host[0] == '[' && host[host_len - 1] == ']') {
        memmove(host, host + 1, host_len - 2);
        host[host_len - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL) {
        return -DS_EUSAGE;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
                    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0)) {
        rc = -errno;
    }
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof(bound);
    if (rc == 0 && getsockname(fd, (struct sockaddr *)&bound, &bound_len) != 0) {
        rc = -errno;
    }
    freeaddrinfo(ai);
    if (rc != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return rc;
    }
    uint16_t port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                      : ((struct sockaddr_in *)&bound)->sin_port);
    bool v6 = strchr(host, ':') != NULL;
    snprintf(address, address_size, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", port);
    *fd_out = fd;
    return 0;
}
