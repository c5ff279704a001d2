/* SPDX-License-Identifier: Apache-2.0
 * store: st_db_backup, the online backup through SQLite's backup API
 * (st_db.h, "online backup"). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

/* ---- online backup ---------------------------------------------------------------------
 * Added for the container image and docs/operations.md; self-contained. */

/* True when a and b name the same existing file. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a != NULL && a[0] != '\0' && stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* fsync of the directory holding path, so a rename into it is durable. */
static void sync_parent_dir(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: the backup itself is already synced */
        close(fd);
    }
}

/* Runs the page copy from db into the open connection out. One step of -1
 * pages copies everything from one read snapshot: smaller steps would restart
 * whenever another connection commits in between, and might never finish on a
 * busy server. SQLITE_BUSY/LOCKED (a WAL read lock race) is retried for up to
 * the busy timeout. Called with db->mu held. */
static cm_status backup_copy(st_db *db, sqlite3 *out, cm_error *err)
{
    sqlite3_backup *b = sqlite3_backup_init(out, "main", db->conn, "main");
    if (b == NULL) {
        int rc = sqlite3_extended_errcode(out);
        cm_status st = st_map_rc(rc) == CM_ENOMEM ? CM_ENOMEM : CM_EIO;
        return cm_error_set(err, st, NULL, "backup: %s", sqlite3_errmsg(out));
    }
    int rc;
    int waited_ms = 0;
    for (;;) {
        rc = sqlite3_backup_step(b, -1);
        if (((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) &&
            waited_ms < ST_DB_BUSY_TIMEOUT_MS) {
            waited_ms += sqlite3_sleep(20);
            continue;
        }
        if (rc != SQLITE_OK) {
            break;
        }
    }
    int frc = sqlite3_backup_finish(b);
    if (rc == SQLITE_DONE) {
        rc = frc;
    }
    if (rc == SQLITE_OK || rc == SQLITE_DONE) {
        return CM_OK;
    }
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
        return cm_error_set(err, CM_EIO, NULL, "backup: database busy for more than %d ms",
                            ST_DB_BUSY_TIMEOUT_MS);
    }
    cm_status st = st_map_rc(rc);
    return cm_error_set(err, st == CM_ENOMEM ? CM_ENOMEM : CM_EIO, NULL, "backup: %s",
                        sqlite3_errstr(rc));
}

cm_status st_db_backup(st_db *db, const char *dest, cm_error *err)
{
    if (dest == NULL || dest[0] == '\0') {
        return cm_error_set(err, CM_EINVAL, "/dest", "must be a non-empty file name");
    }
    static const char suffix[] = ".partial";
    if (strlen(dest) + sizeof suffix > PATH_MAX) {
        return cm_error_set(err, CM_EINVAL, "/dest", "file name too long");
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s%s", dest, suffix);
    st_db_lock(db);
    if (same_file(sqlite3_db_filename(db->conn, "main"), dest)) {
        st_db_unlock(db);
        return cm_error_set(err, CM_EINVAL, "/dest", "'%s' is the database itself", dest);
    }
    (void)unlink(tmp); /* left over from an interrupted backup */
    sqlite3 *out = NULL;
    cm_status st = CM_OK;
    int rc = sqlite3_open_v2(
        tmp, &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        st = st_map_rc(rc) == CM_ENOMEM ? CM_ENOMEM : CM_EIO;
        st = cm_error_set(err, st, "/dest", "cannot create '%s': %s", tmp,
                          out != NULL ? sqlite3_errmsg(out) : sqlite3_errstr(rc));
    }
    if (st == CM_OK) {
        sqlite3_extended_result_codes(out, 1);
        st = backup_copy(db, out, err);
    }
    st_db_unlock(db);
    /* The destination connection commits with synchronous=FULL (its default in
     * rollback mode), so the pages are on disk once it closes. */
    if (out != NULL) {
        rc = sqlite3_close(out);
        if (rc != SQLITE_OK && st == CM_OK) {
            st = cm_error_set(err, CM_EIO, "/dest", "closing '%s': %s", tmp, sqlite3_errstr(rc));
        }
    }
    if (st == CM_OK && rename(tmp, dest) != 0) {
        st = cm_error_set(err, CM_EIO, "/dest", "rename to '%s': %s", dest, strerror(errno));
    }
    if (st != CM_OK) {
        char j[PATH_MAX + 16];
        snprintf(j, sizeof j, "%s-journal", tmp);
        (void)unlink(j);
        (void)unlink(tmp);
        return st;
    }
    sync_parent_dir(dest);
    return CM_OK;
}
