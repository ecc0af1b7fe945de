//! The runner's view of a worker's processes: the memory cgroup it made
//! for them (limit, OOM kills), and every process of the worker's PID
//! namespace, found by the namespace's identity in `/proc` (a process that
//! left the runner's process tree is still in the namespace).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A memory cgroup made for one worker, removed when dropped.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    v2: bool,
}

impl Cgroup {
    /// A child of this process's memory cgroup (v2, or v1's memory
    /// controller), limited to `bytes`; `None` where the runner may not make
    /// one (containers, unprivileged users): RLIMIT_DATA still applies.
    pub fn create(bytes: u64) -> Option<Cgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let name = format!(
            "vsdk-worker-{}-{}",
            std::process::id(),
            crate::execution::runtime_seed() % 1_000_000_000
        );
        let mut candidates = Vec::new();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            if controllers.is_empty() {
                candidates.push((Path::new("/sys/fs/cgroup").join(path), true));
            } else if controllers.split(',').any(|c| c == "memory") {
                candidates.push((Path::new("/sys/fs/cgroup/memory").join(path), false));
            }
        }
        for (parent, v2) in candidates {
            let limit_file = if v2 {
                "memory.max"
            } else {
                "memory.limit_in_bytes"
            };
            let dir = parent.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let cg = Cgroup { dir, v2 };
            let ok = std::fs::write(cg.dir.join(limit_file), bytes.to_string()).is_ok();
            // No swap either (v1 counts it separately; absent without swap accounting).
            if v2 {
                let _ = std::fs::write(cg.dir.join("memory.swap.max"), "0");
            }
            if ok {
                return Some(cg);
            }
        }
        None
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// How many times the kernel killed a process of this cgroup for memory.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Fails while processes remain (they are confirmed gone first).
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A worker's PID namespace, by the inode of its `ns/pid` link, and a
/// pidfd of its init (a signal through it cannot reach a process that
/// reused the PID).
#[derive(Debug)]
pub struct PidNamespace {
    inode: u64,
    /// The init's PID in the runner's namespace.
    pub init: u32,
    pidfd: std::os::fd::OwnedFd,
}

impl PidNamespace {
    /// The namespace of process `init`, when it is not the runner's own.
    pub fn of(init: u32) -> Option<PidNamespace> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a PID and flags, returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, init as libc::pid_t, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor from pidfd_open, owned from here.
        let pidfd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
        // Read after the pidfd is held: the same process, alive.
        let theirs = std::fs::metadata(format!("/proc/{init}/ns/pid"))
            .ok()?
            .ino();
        let ours = std::fs::metadata("/proc/self/ns/pid").ok()?.ino();
        (theirs != ours).then_some(PidNamespace {
            inode: theirs,
            init,
            pidfd,
        })
    }

    /// Every process in it (the init and the server among them), with its
    /// command name.
    pub fn members(&self) -> Vec<(u32, String)> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::metadata(format!("/proc/{pid}/ns/pid"))
                    .is_ok_and(|m| m.ino() == self.inode)
                    && !zombie(*pid)
            })
            .map(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim().to_string())
                    .unwrap_or_default();
                (pid, comm)
            })
            .collect()
    }

    /// Processes besides the init (PID 1 inside) and the server it forks
    /// first (PID 2): what a driver started.
    pub fn leftovers(&self) -> Vec<(u32, String)> {
        let mut m = self.members();
        m.retain(|(pid, _)| {
            let inner = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("NSpid:"))
                        .and_then(|l| l.split_whitespace().last()?.parse::<u32>().ok())
                });
            // Gone meanwhile (no status): not left behind.
            inner.is_some_and(|p| p > 2)
        });
        m
    }

    /// Kills the init through its pidfd (the kernel then kills every other
    /// process of the namespace) and waits until none is left: `false` if
    /// some outlived `patience`.
    pub fn end(&self, patience: Duration) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: pidfd_send_signal on the init's own pidfd; no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        let deadline = Instant::now() + patience;
        loop {
            if self.members().is_empty() {
                // Reaps the init's zombie when the runner is its subreaper.
                // SAFETY: waitpid on one PID without blocking; ECHILD when it
                // is not this process's child.
                unsafe {
                    libc::waitpid(
                        self.init as libc::pid_t,
                        std::ptr::null_mut(),
                        libc::WNOHANG,
                    )
                };
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether this process is non-dumpable (see [`protect_runner`]).
pub fn runner_non_dumpable() -> bool {
    // SAFETY: prctl query with integer arguments.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 }
}

/// A process that ended and waits to be reaped (runs nothing, holds
/// nothing; the orphaned init's zombie waits for the host's init).
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        // The state follows the command name's closing parenthesis.
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|c| c == 'Z' || c == 'X')
    })
}

/// Makes this process non-dumpable: no process of the same user can then
/// read or write its memory through `/proc/<pid>/mem` or ptrace; and the
/// subreaper of its descendants, so a worker's orphaned init is reaped here.
/// Returns whether non-dumpable holds. For a program that is only a runner
/// (the CLI): an engine linking the C library keeps its own settings.
pub fn protect_runner() -> bool {
    // SAFETY: prctl on this process with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    runner_non_dumpable()
}
