/* SPDX-License-Identifier: Apache-2.0
 * bench: the baseline of `make bench-server`, a minimal libmicrohttpd server
 * configured like srv_http (internal polling thread pool of 4, epoll) that
 * answers every request with a fixed 200-byte body, queued on the second
 * call as MACHINE-NOTES.md advises. Listens on 127.0.0.1, port 0; prints
 * "port N" and runs until SIGTERM/SIGINT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

static volatile sig_atomic_t stop_flag = 0; /* the only mutable global: set by signals */

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static char body[201];

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    (void)data;
    if (*con_cls == NULL) {
        *con_cls = body; /* first call: headers only, queue later */
        return MHD_YES;
    }
    if (*data_size > 0) {
        *data_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(200, body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

int main(void)
{
    memset(body, 'x', 200);
    body[0] = '"';
    body[199] = '"';
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC, 0, NULL, NULL, on_request,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin, MHD_OPTION_THREAD_POOL_SIZE, 4u,
        MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "bench_server_min: cannot listen\n");
        return 1;
    }
    printf("port %u\n", (unsigned)MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
    fflush(stdout);
    while (!stop_flag) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    return 0;
}
