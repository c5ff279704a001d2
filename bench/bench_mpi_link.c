/* SPDX-License-Identifier: Apache-2.0
 * The raw link of make bench-mpi (bench/bench_mpi.sh): one plain TCP stream
 * between two hosts (network namespaces), the baseline the MPI collectives'
 * bus bandwidth is held against.
 *   bench_mpi_link recv PORT        accepts one connection, reads to EOF,
 *                                   prints "link BYTES SECONDS GB/s" (from
 *                                   the first byte to EOF)
 *   bench_mpi_link send HOST PORT MIB
 *                                   connects (retrying for 5 s) and writes
 *                                   MIB MiB in 4 MiB writes */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)4 << 20)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int do_recv(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        perror("bench_mpi_link: socket");
        return 1;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 1) != 0) {
        perror("bench_mpi_link: bind");
        close(s);
        return 1;
    }
    int c = accept(s, NULL, NULL);
    close(s);
    if (c < 0) {
        perror("bench_mpi_link: accept");
        return 1;
    }
    char *buf = malloc(CHUNK);
    if (buf == NULL) {
        close(c);
        return 1;
    }
    size_t total = 0;
    double t0 = 0;
    for (;;) {
        ssize_t n = read(c, buf, CHUNK);
        if (n <= 0) {
            break;
        }
        if (total == 0) {
            t0 = now();
        }
        total += (size_t)n;
    }
    double dt = now() - t0;
    close(c);
    free(buf);
    printf("link %zu %.6f %.3f\n", total, dt, dt > 0 ? (double)total / dt * 1e-9 : 0.0);
    return total > 0 ? 0 : 1;
}

static int do_send(const char *host, int port, long mib)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "bench_mpi_link: bad address %s\n", host);
        return 1;
    }
    int s = -1;
    for (int tries = 0; tries < 100; tries++) {
        s = socket(AF_INET, SOCK_STREAM, 0);
        if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
            break;
        }
        if (s >= 0) {
            close(s);
        }
        s = -1;
        nanosleep(&(struct timespec){0, 50000000L}, NULL);
    }
    if (s < 0) {
        perror("bench_mpi_link: connect");
        return 1;
    }
    char *buf = calloc(1, CHUNK);
    if (buf == NULL) {
        close(s);
        return 1;
    }
    size_t left = (size_t)mib << 20;
    while (left > 0) {
        size_t k = left < CHUNK ? left : CHUNK, off = 0;
        while (off < k) {
            ssize_t n = write(s, buf + off, k - off);
            if (n <= 0) {
                perror("bench_mpi_link: write");
                free(buf);
                close(s);
                return 1;
            }
            off += (size_t)n;
        }
        left -= k;
    }
    free(buf);
    close(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "recv") == 0) {
        return do_recv(atoi(argv[2]));
    }
    if (argc == 5 && strcmp(argv[1], "send") == 0) {
        return do_send(argv[2], atoi(argv[3]), atol(argv[4]));
    }
    fputs("usage: bench_mpi_link recv PORT | send HOST PORT MIB\n", stderr);
    return 2;
}
