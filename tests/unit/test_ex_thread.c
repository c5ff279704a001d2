/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_thread: a group of threads runs its function
 * once per thread, with each thread's own argument; when a thread cannot be
 * created (here: pinned to a CPU this process may not use), none of the
 * group runs the function, the threads already created are joined (ASan
 * sees no leak) and the start fails with CM_EIO naming the CPU. */
#define _GNU_SOURCE /* sched_getaffinity, cpu_set_t */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ex_thread_int.h"

typedef struct item {
    atomic_int *calls;
    int seen; /* set by the thread that got this item */
} item;

static void *count(void *arg)
{
    item *it = arg;
    it->seen++;
    atomic_fetch_add(it->calls, 1);
    return NULL;
}

static void test_ex_threads_start_runs_each_once(void **state)
{
    (void)state;
    atomic_int calls;
    atomic_init(&calls, 0);
    item items[5];
    for (int i = 0; i < 5; i++) {
        items[i].calls = &calls;
        items[i].seen = 0;
    }
    ex_threads *t = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(ex_threads_start(5, count, items, sizeof items[0], NULL, 0, &t, &err), CM_OK);
    assert_non_null(t);
    ex_threads_join(t);
    assert_int_equal(atomic_load(&calls), 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(items[i].seen, 1);
    }
}

static void test_ex_threads_start_fails_whole_when_one_cannot_be_pinned(void **state)
{
    (void)state;
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    size_t ok_cpu = 0;
    while (ok_cpu < (size_t)CPU_SETSIZE && !CPU_ISSET(ok_cpu, &set)) {
        ok_cpu++;
    }
    size_t bad_cpu = (size_t)CPU_SETSIZE - 1u;
    if (ok_cpu >= (size_t)CPU_SETSIZE || CPU_ISSET(bad_cpu, &set)) {
        skip(); /* no CPU to pin to, or every CPU allowed */
    }
    atomic_int calls;
    atomic_init(&calls, 0);
    item it = {&calls, 0};
    const size_t cpus[3] = {ok_cpu, ok_cpu, bad_cpu};
    ex_threads *t = (ex_threads *)&it; /* must be reset */
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(ex_threads_start(3, count, &it, 0, cpus, 3, &t, &err), CM_EIO);
    assert_null(t);
    assert_int_equal(err.code, CM_EIO);
    assert_non_null(strstr(err.msg, "cannot pin thread 2"));
    assert_int_equal(atomic_load(&calls), 0);
    ex_threads_join(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_threads_start_runs_each_once),
        cmocka_unit_test(test_ex_threads_start_fails_whole_when_one_cannot_be_pinned),
    };
    return cmocka_run_group_tests_name("ex_thread", tests, NULL, NULL);
}
