// Private directories and files of the worker (docs/security.md "Files").
// The worker writes launch plans (with the job's argv and environment) and
// rank output under its work dir, often as root and often under a shared
// /tmp: another local user must not be able to pre-create the directory, or
// plant symlinks or files in it, to make the worker overwrite or append to
// files elsewhere, or read what it writes.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace strata::worker {

// Creates `path` (and missing parents) with the last component mode 0700, or
// accepts an existing directory only if it is a real directory (not a
// symlink), owned by this process's effective user and not writable by group
// or others; it is then made 0700. FailedPrecondition naming the path, its
// owner and mode, and the fix, otherwise.
Status MakePrivateDir(const std::string& path);

// Writes `text` to `path` atomically: a new file next to it created with
// O_CREAT|O_EXCL|O_NOFOLLOW (mode `mode`), then renamed over `path`. A
// symlink or file planted at `path` is replaced, never followed.
Status WritePrivateFile(const std::string& path, const std::string& text,
                        int mode = 0600);

// For ranks run as another user (docs/security.md "Ranks as another
// user"): lets group `gid` traverse the directory `path`, which must be one
// MakePrivateDir accepted (owner kept, group `gid`, mode 0710: members
// reach the names they know, list nothing, write nothing). A symlink is
// refused.
Status OpenDirToGroup(const std::string& path, gid_t gid);

// Lets group `gid` read the file `path` this process wrote (owner kept,
// group `gid`, mode 0640), or traverse it if it is a directory (0710). A
// symlink is refused.
Status OpenToGroup(const std::string& path, gid_t gid);

// Gives `path` (a file or directory) to `uid`:`gid`, mode unchanged,
// without following a symlink. NotFound when it does not exist.
Status HandTo(const std::string& path, uid_t uid, gid_t gid);

// A directory owned by `uid`:`gid`, mode 0700, for a rank run as that
// user: created (and handed over) if missing, else accepted only if it is
// a real directory already owned by `uid` and not writable by others.
Status MakeDirFor(const std::string& path, uid_t uid, gid_t gid);

}  // namespace strata::worker
