/* SPDX-License-Identifier: Apache-2.0
 * Test helper (not a test): the tests' temporary directories. */
#ifndef TU_FS_H
#define TU_FS_H

/* Removes the files directly in dir, then dir (a test's mkdtemp directory;
 * nothing deeper). Missing entries are ignored. */
void tu_dir_remove(const char *dir);

#endif /* TU_FS_H */
