/*
 * powercut-fs: a FUSE file system that passes everything through to a backing folder and can lose,
 * on command, exactly what a power cut would lose: every write not yet made durable by an fsync, and
 * every directory change not yet made durable by an fsync of the directory. test/power-cut.int.test.ts
 * runs a SQLite database inside it, cuts, and checks what the server had acknowledged.
 *
 *   powercut-fs BACKING MOUNTPOINT [FUSE options, e.g. -f]
 *
 * Semantics (docs/reliability.md, "Power cuts"):
 *  - File data. write() and truncate go straight to the backing file. Per file (inode) the layer keeps
 *    its size at the last sync and, for each 4 KiB block of that synced extent overwritten or truncated
 *    away since, the block's synced content. fsync() or fdatasync() of any handle of the file makes its
 *    current content the synced one. A cut puts every file back to its synced content and size.
 *  - Directory entries. create, mkdir, unlink, rmdir and rename are logged in order. fsync() of a
 *    directory makes durable every logged change up to the last one that touched that directory (as
 *    parent of either name): an ordered metadata journal, as ext4's. A cut undoes the changes not
 *    made durable, newest first: a file created and never synced with its directory vanishes (even if
 *    its data was fsynced), an unlinked file comes back, a rename is reversed. An unlinked or replaced
 *    file is kept in BACKING/.powercut-graveyard until its removal is durable.
 *  - The control file MOUNTPOINT/.powercut (not listed): write "cut" to cut; after a cut every
 *    operation fails with EIO (the disk is off) until the file system is unmounted. Write "sync" to
 *    make everything durable (as syncfs). Read it for counters. A clean unmount makes everything
 *    durable, as a real file system's does.
 *  - Not supported (ENOTSUP): hard links, symbolic links, special files, RENAME_EXCHANGE.
 *
 * One global lock serialises every operation: this is a test instrument, correctness first. The kernel
 * keeps no written data back (no writeback cache) and caches no attributes or names, so that every
 * write reaches this layer when it is made and nothing stale is seen after a cut.
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#define BLOCK 4096
#define CONTROL "/.powercut"
#define GRAVEYARD ".powercut-graveyard"

/* One file (inode) whose content may differ from its synced content. */
struct tracked {
  dev_t dev;
  ino_t ino;
  int fd; /* the backing inode, read-write: the content can be put back whatever its name now */
  off_t synced_size;
  char **saved; /* saved[b]: block b as synced, for blocks of the synced extent changed since */
  size_t saved_len;
  uint64_t unsynced_bytes; /* written or truncated away since the last sync */
  struct tracked *next;
};

struct handle {
  int fd;
  struct tracked *file;
};

enum ns_kind { NS_CREATE, NS_MKDIR, NS_UNLINK, NS_RMDIR, NS_RENAME };

/* A directory change not yet durable. */
struct ns_op {
  enum ns_kind kind;
  char *path;  /* the name created, removed, or renamed from (relative to the root, no leading '/') */
  char *path2; /* rename: the new name */
  char *grave; /* unlink: where the file waits; rename: where the replaced file waits (or NULL) */
  mode_t mode; /* rmdir: the directory's mode */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int root_fd = -1;
static struct tracked *files;
static struct ns_op *ops;
static size_t ops_len, ops_cap;
static unsigned long grave_seq;
static int dead;
static struct {
  unsigned long cuts, files_reverted, blocks_restored, ops_undone, ops_committed, fsyncs, dir_fsyncs;
  uint64_t bytes_lost;
} counters;

/* "/a/b" -> "a/b"; "/" -> "." */
static const char *rel(const char *path) { return path[1] ? path + 1 : "."; }

static int is_hidden(const char *path) {
  return strcmp(path, "/" GRAVEYARD) == 0 || strncmp(path, "/" GRAVEYARD "/", sizeof(GRAVEYARD) + 1) == 0;
}

/* The directory holding `name` (relative form): "a/b" -> "a", "b" -> ".". */
static void parent_of(const char *name, char *out, size_t size) {
  const char *slash = strrchr(name, '/');
  if (!slash) snprintf(out, size, ".");
  else snprintf(out, size, "%.*s", (int)(slash - name), name);
}

/* ---------------------------------------------------------------------------------------------------
 * File data */

static struct tracked *find_tracked(dev_t dev, ino_t ino) {
  for (struct tracked *t = files; t; t = t->next)
    if (t->dev == dev && t->ino == ino) return t;
  return NULL;
}

/* The record of the inode `fd` refers to; a file first seen is synced as it is (the layer starts on a
 * durable disk, and a file it creates starts empty). */
static struct tracked *track_fd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
  struct tracked *t = find_tracked(st.st_dev, st.st_ino);
  if (t) return t;
  t = calloc(1, sizeof *t);
  if (!t) return NULL;
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  t->fd = open(self, O_RDWR | O_CLOEXEC);
  if (t->fd < 0) {
    free(t);
    return NULL;
  }
  t->dev = st.st_dev;
  t->ino = st.st_ino;
  t->synced_size = st.st_size;
  t->next = files;
  files = t;
  return t;
}

/* Saves the synced content of every block of [from, to) not saved yet, before it is overwritten. */
static int save_range(struct tracked *t, off_t from, off_t to) {
  if (to > t->synced_size) to = t->synced_size;
  if (from >= to) return 0;
  size_t last = (size_t)((to - 1) / BLOCK);
  if (last >= t->saved_len) {
    size_t len = last + 1;
    char **grown = realloc(t->saved, len * sizeof *grown);
    if (!grown) return -ENOMEM;
    memset(grown + t->saved_len, 0, (len - t->saved_len) * sizeof *grown);
    t->saved = grown;
    t->saved_len = len;
  }
  for (size_t b = (size_t)(from / BLOCK); b <= last; b++) {
    if (t->saved[b]) continue;
    char *block = calloc(1, BLOCK);
    if (!block) return -ENOMEM;
    off_t at = (off_t)b * BLOCK;
    size_t want = (size_t)(t->synced_size - at < BLOCK ? t->synced_size - at : BLOCK);
    /* Short only where the file was truncated, which saved the blocks beyond first. */
    ssize_t got = pread(t->fd, block, want, at);
    if (got < 0) {
      free(block);
      return -errno;
    }
    t->saved[b] = block;
  }
  return 0;
}

static void forget_saved(struct tracked *t) {
  for (size_t b = 0; b < t->saved_len; b++) free(t->saved[b]);
  free(t->saved);
  t->saved = NULL;
  t->saved_len = 0;
}

static void sync_file(struct tracked *t) {
  struct stat st;
  forget_saved(t);
  if (fstat(t->fd, &st) == 0) t->synced_size = st.st_size;
  t->unsynced_bytes = 0;
}

static void revert_file(struct tracked *t) {
  int changed = t->unsynced_bytes > 0 || t->saved_len > 0;
  struct stat st;
  if (fstat(t->fd, &st) == 0 && st.st_size != t->synced_size) changed = 1;
  if (!changed) return;
  counters.files_reverted++;
  counters.bytes_lost += t->unsynced_bytes;
  if (ftruncate(t->fd, t->synced_size) != 0) perror("powercut-fs: revert (truncate)");
  for (size_t b = 0; b < t->saved_len; b++) {
    if (!t->saved[b]) continue;
    off_t at = (off_t)b * BLOCK;
    size_t len = (size_t)(t->synced_size - at < BLOCK ? t->synced_size - at : BLOCK);
    if (pwrite(t->fd, t->saved[b], len, at) != (ssize_t)len) perror("powercut-fs: revert (write)");
    counters.blocks_restored++;
  }
  forget_saved(t);
  t->unsynced_bytes = 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Directory changes */

static int log_op(enum ns_kind kind, const char *path, const char *path2, const char *grave, mode_t mode) {
  if (ops_len == ops_cap) {
    size_t cap = ops_cap ? ops_cap * 2 : 64;
    struct ns_op *grown = realloc(ops, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    ops = grown;
    ops_cap = cap;
  }
  struct ns_op *op = &ops[ops_len++];
  op->kind = kind;
  op->path = strdup(path);
  op->path2 = path2 ? strdup(path2) : NULL;
  op->grave = grave ? strdup(grave) : NULL;
  op->mode = mode;
  return 0;
}

static void free_op(struct ns_op *op) {
  free(op->path);
  free(op->path2);
  free(op->grave);
}

/* Removes a file or a folder tree from the graveyard for good. */
static void remove_grave(const char *grave) {
  if (unlinkat(root_fd, grave, 0) == 0 || errno != EISDIR) return;
  int dir = openat(root_fd, grave, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    DIR *d = fdopendir(dir);
    struct dirent *e;
    char child[PATH_MAX];
    while (d && (e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(child, sizeof child, "%s/%s", grave, e->d_name);
      remove_grave(child);
    }
    if (d) closedir(d);
    else close(dir);
  }
  unlinkat(root_fd, grave, AT_REMOVEDIR);
}

/* Makes the first `n` logged changes durable. */
static void commit_ops(size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (ops[i].grave) remove_grave(ops[i].grave);
    free_op(&ops[i]);
    counters.ops_committed++;
  }
  memmove(ops, ops + n, (ops_len - n) * sizeof *ops);
  ops_len -= n;
}

static int touches(const struct ns_op *op, const char *dir) {
  char parent[PATH_MAX];
  parent_of(op->path, parent, sizeof parent);
  if (!strcmp(parent, dir)) return 1;
  if (!op->path2) return 0;
  parent_of(op->path2, parent, sizeof parent);
  return !strcmp(parent, dir);
}

static void undo_op(const struct ns_op *op) {
  int rc = 0;
  switch (op->kind) {
  case NS_CREATE:
    rc = unlinkat(root_fd, op->path, 0);
    break;
  case NS_MKDIR:
    rc = unlinkat(root_fd, op->path, AT_REMOVEDIR);
    break;
  case NS_UNLINK:
    rc = renameat(root_fd, op->grave, root_fd, op->path);
    break;
  case NS_RMDIR:
    rc = mkdirat(root_fd, op->path, op->mode);
    break;
  case NS_RENAME:
    rc = renameat(root_fd, op->path2, root_fd, op->path);
    if (rc == 0 && op->grave) rc = renameat(root_fd, op->grave, root_fd, op->path2);
    break;
  }
  if (rc != 0) fprintf(stderr, "powercut-fs: undo of a change to %s failed: %s\n", op->path, strerror(errno));
  counters.ops_undone++;
}

static int new_grave(char *out, size_t size) {
  snprintf(out, size, GRAVEYARD "/%lu", ++grave_seq);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Control */

static void sync_everything(void) {
  for (struct tracked *t = files; t; t = t->next) sync_file(t);
  commit_ops(ops_len);
}

static void cut(void) {
  counters.cuts++;
  for (struct tracked *t = files; t; t = t->next) revert_file(t);
  while (ops_len > 0) {
    undo_op(&ops[ops_len - 1]);
    free_op(&ops[ops_len - 1]);
    ops_len--;
  }
  dead = 1;
}

static int control_text(char *out, size_t size) {
  uint64_t pending = 0;
  unsigned long pending_files = 0;
  for (struct tracked *t = files; t; t = t->next)
    if (t->unsynced_bytes > 0 || t->saved_len > 0) {
      pending += t->unsynced_bytes;
      pending_files++;
    }
  return snprintf(out, size,
                  "dead %d\ncuts %lu\npending_files %lu\npending_bytes %llu\npending_dir_changes %zu\n"
                  "files_reverted %lu\nblocks_restored %lu\nbytes_lost %llu\ndir_changes_undone %lu\n"
                  "dir_changes_committed %lu\nfsyncs %lu\ndir_fsyncs %lu\n",
                  dead, counters.cuts, pending_files, (unsigned long long)pending, ops_len,
                  counters.files_reverted, counters.blocks_restored, (unsigned long long)counters.bytes_lost,
                  counters.ops_undone, counters.ops_committed, counters.fsyncs, counters.dir_fsyncs);
}

/* ---------------------------------------------------------------------------------------------------
 * Operations */

#define ENTER(path)                                                                                    \
  pthread_mutex_lock(&lock);                                                                           \
  int rc_ = 0;                                                                                         \
  if (dead) {                                                                                          \
    rc_ = -EIO;                                                                                        \
    goto out;                                                                                          \
  }                                                                                                    \
  if ((path) && is_hidden(path)) {                                                                     \
    rc_ = -ENOENT;                                                                                     \
    goto out;                                                                                          \
  }
#define LEAVE                                                                                          \
  out:                                                                                                 \
  pthread_mutex_unlock(&lock);                                                                         \
  return rc_;
#define FAIL(code)                                                                                     \
  do {                                                                                                 \
    rc_ = (code);                                                                                      \
    goto out;                                                                                          \
  } while (0)

static void *pc_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  cfg->attr_timeout = 0;
  cfg->entry_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->hard_remove = 1; /* unlink really unlinks (no .fuse_hidden renames) */
  cfg->nullpath_ok = 1;
  cfg->kernel_cache = 0;
  return NULL;
}

static void pc_destroy(void *data) {
  (void)data;
  pthread_mutex_lock(&lock);
  if (!dead) sync_everything();
  pthread_mutex_unlock(&lock);
}

static int pc_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
  if (path && !strcmp(path, CONTROL)) {
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG | 0600;
    st->st_nlink = 1;
    return 0;
  }
  ENTER(path);
  if (fi && fi->fh) {
    if (fstat(((struct handle *)(uintptr_t)fi->fh)->fd, st) != 0) FAIL(-errno);
  } else if (fstatat(root_fd, rel(path), st, AT_SYMLINK_NOFOLLOW) != 0) FAIL(-errno);
  LEAVE;
}

/* A directory handle keeps the directory's name: with nullpath_ok the kernel's requests on an open
 * directory (readdir, fsyncdir) come without it. */
static int pc_opendir(const char *path, struct fuse_file_info *fi) {
  ENTER(path);
  char *name = strdup(path);
  if (!name) FAIL(-ENOMEM);
  fi->fh = (uint64_t)(uintptr_t)name;
  LEAVE;
}

static int pc_releasedir(const char *path, struct fuse_file_info *fi) {
  (void)path;
  free((char *)(uintptr_t)fi->fh);
  return 0;
}

static int pc_readdir(const char *unused, void *buf, fuse_fill_dir_t filler, off_t offset,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
  (void)unused;
  (void)offset;
  (void)flags;
  const char *path = (const char *)(uintptr_t)fi->fh;
  ENTER(path);
  int dir = openat(root_fd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) FAIL(-errno);
  DIR *d = fdopendir(dir);
  if (!d) {
    close(dir);
    FAIL(-errno);
  }
  struct dirent *e;
  int top = !strcmp(path, "/");
  while ((e = readdir(d))) {
    if (top && !strcmp(e->d_name, GRAVEYARD)) continue;
    if (filler(buf, e->d_name, NULL, 0, 0)) break;
  }
  closedir(d);
  LEAVE;
}

static int pc_mkdir(const char *path, mode_t mode) {
  ENTER(path);
  if (mkdirat(root_fd, rel(path), mode) != 0) FAIL(-errno);
  rc_ = log_op(NS_MKDIR, rel(path), NULL, NULL, 0);
  LEAVE;
}

static int pc_rmdir(const char *path) {
  ENTER(path);
  struct stat st;
  if (fstatat(root_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW) != 0) FAIL(-errno);
  if (unlinkat(root_fd, rel(path), AT_REMOVEDIR) != 0) FAIL(-errno);
  rc_ = log_op(NS_RMDIR, rel(path), NULL, NULL, st.st_mode & 07777);
  LEAVE;
}

static int pc_unlink(const char *path) {
  ENTER(path);
  char grave[64];
  new_grave(grave, sizeof grave);
  /* Kept (its inode and any open handle with it) until the removal is durable or undone. */
  if (renameat(root_fd, rel(path), root_fd, grave) != 0) FAIL(-errno);
  rc_ = log_op(NS_UNLINK, rel(path), NULL, grave, 0);
  LEAVE;
}

static int pc_rename(const char *from, const char *to, unsigned int flags) {
  ENTER(from);
  if (is_hidden(to) || !strcmp(to, CONTROL)) FAIL(-EPERM);
  if (flags & RENAME_EXCHANGE) FAIL(-ENOTSUP);
  struct stat st;
  char grave[64];
  int replaces = fstatat(root_fd, rel(to), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (replaces && (flags & RENAME_NOREPLACE)) FAIL(-EEXIST);
  if (fstatat(root_fd, rel(from), &st, AT_SYMLINK_NOFOLLOW) != 0) FAIL(-errno);
  if (replaces) {
    new_grave(grave, sizeof grave);
    if (renameat(root_fd, rel(to), root_fd, grave) != 0) FAIL(-errno);
  }
  if (renameat(root_fd, rel(from), root_fd, rel(to)) != 0) {
    int error = errno;
    if (replaces) renameat(root_fd, grave, root_fd, rel(to));
    FAIL(-error);
  }
  rc_ = log_op(NS_RENAME, rel(from), rel(to), replaces ? grave : NULL, 0);
  LEAVE;
}

static int pc_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
  ENTER(path);
  int rc = fi && fi->fh ? fchmod(((struct handle *)(uintptr_t)fi->fh)->fd, mode)
                        : fchmodat(root_fd, rel(path), mode, 0);
  if (rc != 0) FAIL(-errno);
  LEAVE;
}

static int pc_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
  ENTER(path);
  int rc = fi && fi->fh ? fchown(((struct handle *)(uintptr_t)fi->fh)->fd, uid, gid)
                        : fchownat(root_fd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
  if (rc != 0) FAIL(-errno);
  LEAVE;
}

static int pc_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
  ENTER(path);
  int rc = fi && fi->fh ? futimens(((struct handle *)(uintptr_t)fi->fh)->fd, tv)
                        : utimensat(root_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW);
  if (rc != 0) FAIL(-errno);
  LEAVE;
}

/* Truncation: the synced blocks it cuts away are saved first. */
static int truncate_fd(struct tracked *t, int fd, off_t size) {
  if (t) {
    int saved = save_range(t, size, t->synced_size);
    if (saved) return saved;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size != size)
      t->unsynced_bytes += (uint64_t)(st.st_size > size ? st.st_size - size : size - st.st_size);
  }
  return ftruncate(fd, size) == 0 ? 0 : -errno;
}

static int pc_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
  if (path && !strcmp(path, CONTROL)) return 0;
  ENTER(path);
  if (fi && fi->fh) {
    struct handle *h = (struct handle *)(uintptr_t)fi->fh;
    FAIL(truncate_fd(h->file, h->fd, size));
  }
  int fd = openat(root_fd, rel(path), O_WRONLY | O_CLOEXEC);
  if (fd < 0) FAIL(-errno);
  rc_ = truncate_fd(track_fd(fd), fd, size);
  close(fd);
  LEAVE;
}

static int open_handle(const char *path, int flags, mode_t mode, int create, struct fuse_file_info *fi) {
  struct stat st;
  int existed = fstatat(root_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0;
  /* Positions come with each write (the kernel resolves O_APPEND); truncation is done here, tracked. */
  int backing_flags = (flags & ~(O_APPEND | O_TRUNC)) | O_CLOEXEC;
  int fd = create ? openat(root_fd, rel(path), backing_flags | O_CREAT, mode) : openat(root_fd, rel(path), backing_flags);
  if (fd < 0) return -errno;
  struct handle *h = calloc(1, sizeof *h);
  if (!h) {
    close(fd);
    return -ENOMEM;
  }
  h->fd = fd;
  h->file = track_fd(fd);
  if (create && !existed) {
    /* A new file starts empty and unsynced: its record must not take it as durable. */
    if (h->file) h->file->synced_size = 0;
    int logged = log_op(NS_CREATE, rel(path), NULL, NULL, 0);
    if (logged) {
      close(fd);
      free(h);
      return logged;
    }
  }
  if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
    int truncated = truncate_fd(h->file, fd, 0);
    if (truncated) {
      close(fd);
      free(h);
      return truncated;
    }
  }
  fi->fh = (uint64_t)(uintptr_t)h;
  fi->keep_cache = 0;
  return 0;
}

static int pc_open(const char *path, struct fuse_file_info *fi) {
  if (path && !strcmp(path, CONTROL)) {
    fi->direct_io = 1;
    fi->fh = 0;
    return 0;
  }
  ENTER(path);
  rc_ = open_handle(path, fi->flags, 0, 0, fi);
  LEAVE;
}

static int pc_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
  ENTER(path);
  if (!strcmp(path, CONTROL)) FAIL(-EEXIST);
  rc_ = open_handle(path, fi->flags, mode, 1, fi);
  LEAVE;
}

static int pc_read(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  if (!fi->fh) {
    (void)path;
    char text[1024];
    pthread_mutex_lock(&lock);
    int len = control_text(text, sizeof text);
    pthread_mutex_unlock(&lock);
    if (offset >= len) return 0;
    size_t n = (size_t)(len - offset) < size ? (size_t)(len - offset) : size;
    memcpy(buf, text + offset, n);
    return (int)n;
  }
  ENTER(NULL);
  ssize_t n = pread(((struct handle *)(uintptr_t)fi->fh)->fd, buf, size, offset);
  rc_ = n < 0 ? -errno : (int)n;
  LEAVE;
}

static int pc_write(const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  (void)path;
  if (!fi->fh) {
    pthread_mutex_lock(&lock);
    int rc = (int)size;
    if (size >= 3 && !strncmp(buf, "cut", 3)) {
      if (!dead) cut();
    } else if (size >= 4 && !strncmp(buf, "sync", 4)) {
      if (dead) rc = -EIO;
      else sync_everything();
    } else rc = -EINVAL;
    pthread_mutex_unlock(&lock);
    return rc;
  }
  ENTER(NULL);
  struct handle *h = (struct handle *)(uintptr_t)fi->fh;
  if (h->file) {
    int saved = save_range(h->file, offset, offset + (off_t)size);
    if (saved) FAIL(saved);
  }
  ssize_t n = pwrite(h->fd, buf, size, offset);
  if (n < 0) FAIL(-errno);
  if (h->file) h->file->unsynced_bytes += (uint64_t)n;
  rc_ = (int)n;
  LEAVE;
}

static int pc_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
  (void)path;
  (void)datasync; /* fdatasync keeps the data and the size, all this layer tracks */
  if (!fi->fh) return 0;
  ENTER(NULL);
  struct handle *h = (struct handle *)(uintptr_t)fi->fh;
  counters.fsyncs++;
  if (h->file) sync_file(h->file);
  LEAVE;
}

static int pc_fsyncdir(const char *unused, int datasync, struct fuse_file_info *fi) {
  (void)unused;
  (void)datasync;
  const char *path = (const char *)(uintptr_t)fi->fh;
  ENTER(path);
  counters.dir_fsyncs++;
  const char *dir = rel(path);
  size_t upto = 0;
  for (size_t i = 0; i < ops_len; i++)
    if (touches(&ops[i], dir)) upto = i + 1;
  commit_ops(upto);
  LEAVE;
}

static int pc_release(const char *path, struct fuse_file_info *fi) {
  (void)path;
  struct handle *h = (struct handle *)(uintptr_t)fi->fh;
  if (!h) return 0;
  close(h->fd);
  free(h);
  return 0;
}

static int pc_statfs(const char *path, struct statvfs *st) {
  (void)path;
  return fstatvfs(root_fd, st) == 0 ? 0 : -errno;
}

static int pc_access(const char *path, int mask) {
  if (path && !strcmp(path, CONTROL)) return 0;
  ENTER(path);
  if (faccessat(root_fd, rel(path), mask, 0) != 0) FAIL(-errno);
  LEAVE;
}

static int pc_unsupported_link(const char *from, const char *to) {
  (void)from;
  (void)to;
  return -ENOTSUP;
}

static int pc_mknod(const char *path, mode_t mode, dev_t rdev) {
  (void)rdev;
  if (!S_ISREG(mode)) return -ENOTSUP;
  struct fuse_file_info fi = {.flags = O_WRONLY | O_EXCL};
  int rc = pc_create(path, mode, &fi);
  if (rc == 0) pc_release(path, &fi);
  return rc;
}

static const struct fuse_operations operations = {
    .init = pc_init,
    .destroy = pc_destroy,
    .getattr = pc_getattr,
    .opendir = pc_opendir,
    .releasedir = pc_releasedir,
    .readdir = pc_readdir,
    .mkdir = pc_mkdir,
    .rmdir = pc_rmdir,
    .unlink = pc_unlink,
    .rename = pc_rename,
    .chmod = pc_chmod,
    .chown = pc_chown,
    .utimens = pc_utimens,
    .truncate = pc_truncate,
    .open = pc_open,
    .create = pc_create,
    .read = pc_read,
    .write = pc_write,
    .fsync = pc_fsync,
    .fsyncdir = pc_fsyncdir,
    .release = pc_release,
    .statfs = pc_statfs,
    .access = pc_access,
    .symlink = pc_unsupported_link,
    .link = pc_unsupported_link,
    .mknod = pc_mknod,
};

int main(int argc, char *argv[]) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s BACKING MOUNTPOINT [FUSE options]\n", argv[0]);
    return 2;
  }
  root_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    perror(argv[1]);
    return 1;
  }
  /* Left over from a layer that stopped without being unmounted: the removals they waited on stand. */
  remove_grave(GRAVEYARD);
  if (mkdirat(root_fd, GRAVEYARD, 0700) != 0 && errno != EEXIST) {
    perror(GRAVEYARD);
    return 1;
  }
  /* The backing folder is argv[1]; FUSE gets the rest. */
  argv[1] = argv[0];
  return fuse_main(argc - 1, argv + 1, &operations, NULL);
}
