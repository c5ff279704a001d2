/* SPDX-License-Identifier: Apache-2.0
 * Test helper: temporary directories (tu_fs.h). */
#include "tu_fs.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void tu_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    closedir(d);
    rmdir(dir);
}
