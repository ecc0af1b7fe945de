//! The worker program's first two processes, both the SDK's own code:
//!
//! - the **launcher** (the process the runner starts) reads the policy,
//!   joins the runner's cgroup for it, creates the worker's namespaces with
//!   `clone` (new user, PID, mount, IPC and network namespaces, fewer where
//!   the kernel refuses), maps the user (root inside; outside, `nobody` when
//!   the runner is root, else the runner's own user), and waits;
//! - the **init** (PID 1 of the new PID namespace) forks the server, which
//!   execs this program again to build its private root, limit itself and
//!   install its seccomp filter before any driver code loads; the init reaps,
//!   and when it exits the kernel kills whatever else lives in the namespace.
//!
//! The launcher mirrors how the server ended (its exit status or signal),
//! so the runner describes a crash as before. It dies with the runner's
//! kill, and the init with it (`PR_SET_PDEATHSIG`), which ends the namespace.

use super::facts::NAMESPACES;
use super::policy::Policy;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The argument that makes the worker program the sandboxed server.
pub const SERVE_ARG: &str = "--serve";
/// The most bytes of [`InitArgs`] the server reads.
const MAX_ARGS_BYTES: u64 = 1 << 20;
const INIT_STACK_BYTES: usize = 256 << 10;

/// What the launcher tells the server: the policy and what it obtained.
#[derive(Debug, Serialize, Deserialize)]
pub struct InitArgs {
    pub policy: Policy,
    pub namespaces: Vec<String>,
    pub cgroup: Option<String>,
    pub missing: Vec<String>,
    /// The init's PID as the runner sees it (its namespace identifies the
    /// worker's processes).
    pub init_pid: u32,
}

fn errno_text(e: nix::errno::Errno) -> String {
    format!("{} ({})", e.desc(), e as i32)
}

/// Reads the runner's first message, the policy, from the launcher's stdin
/// (the worker's wire format is the caller's: the isolation layer's protocol).
pub type PolicyReader = fn(&mut dyn Read) -> Result<Policy, String>;

/// The launcher: returns its exit code (or ends by the server's signal).
pub fn launch(read_policy: PolicyReader) -> i32 {
    match try_launch(read_policy) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vips-sdk-worker: {e}");
            3
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))
}

fn try_launch(read_policy: PolicyReader) -> Result<i32, String> {
    use nix::sys::resource::{setrlimit, Resource};
    // Nothing of the driver dumps core; no descriptor of the runner's (a
    // key passed by number among them) reaches the worker.
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(|e| format!("RLIMIT_CORE: {e}"))?;
    // SAFETY: closes every descriptor from 3 up: this program holds none it
    // needs there yet (std opens nothing before main).
    unsafe { libc::close_range(3, libc::c_uint::MAX, 0) };
    // The policy, read unbuffered: the server reads the next message.
    // SAFETY: fd 0 is this process's stdin; ManuallyDrop keeps it open.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    let policy = read_policy(&mut *stdin)?;
    let mut missing = Vec::new();
    let cgroup = match &policy.cgroup {
        Some(dir) => {
            use std::os::unix::ffi::OsStrExt;
            let dir = std::path::Path::new(std::ffi::OsStr::from_bytes(dir));
            match std::fs::write(dir.join("cgroup.procs"), b"0") {
                Ok(()) => Some(dir.display().to_string()),
                Err(e) => {
                    missing.push(format!("cgroup {}: {e}", dir.display()));
                    None
                }
            }
        }
        None => None,
    };
    let (go_read, go_write) = pipe()?;
    let (args_read, args_write) = pipe()?;
    let (status_read, status_write) = pipe()?;
    // This program, opened while the launcher can read it: the server
    // (`nobody` outside when the runner is root) execs it by descriptor,
    // wherever it lives. Opened after the pipes, so that it never sits at
    // descriptor 3, where the server finds its arguments.
    let exe = nix::fcntl::open(
        "/proc/self/exe",
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| format!("this program's file: {e}"))?;

    use nix::sched::CloneFlags as F;
    let all =
        F::CLONE_NEWUSER | F::CLONE_NEWPID | F::CLONE_NEWNS | F::CLONE_NEWIPC | F::CLONE_NEWNET;
    let root = nix::unistd::geteuid().is_root();
    let mut attempts = vec![all];
    if root {
        // Real root without a user namespace (containers refusing them).
        attempts.push(all - F::CLONE_NEWUSER);
    }
    attempts.push(F::empty());
    let mut stack = vec![0u8; INIT_STACK_BYTES];
    let (go_fd, args_fd, status_fd) = (
        go_read.as_raw_fd(),
        args_read.as_raw_fd(),
        status_write.as_raw_fd(),
    );
    let mut obtained = None;
    for flags in attempts {
        let user = flags.contains(F::CLONE_NEWUSER);
        let init = Box::new(move || init(go_fd, args_fd, status_fd, user, exe));
        // SAFETY: this process is single-threaded (nothing has started a
        // thread), so the child's copy of the address space is consistent;
        // `stack` outlives the call and the child runs on its own copy.
        match unsafe { nix::sched::clone(init, &mut stack, flags, Some(libc::SIGCHLD)) } {
            Ok(pid) => {
                obtained = Some((pid, flags));
                break;
            }
            Err(e) => missing.push(format!(
                "namespaces {:?}: the kernel answered {}",
                flags_names(flags),
                errno_text(e)
            )),
        }
    }
    let (pid, flags) = obtained.ok_or("cannot start the worker's init process")?;
    drop((go_read, args_read, status_write));
    if flags.contains(F::CLONE_NEWUSER) {
        map_user(pid.as_raw(), root)?;
    }
    let namespaces = flags_names(flags).into_iter().map(String::from).collect();
    let args = InitArgs {
        policy,
        namespaces,
        cgroup,
        missing,
        init_pid: pid.as_raw() as u32,
    };
    let bytes = postcard::to_stdvec(&args).map_err(|e| e.to_string())?;
    let mut go = std::fs::File::from(go_write);
    let mut to_server = std::fs::File::from(args_write);
    // The server reads its arguments as soon as it runs, so a policy larger
    // than the pipe's buffer only waits for it.
    go.write_all(b"g")
        .map_err(|e| format!("cannot release the init: {e}"))?;
    drop(go);
    to_server
        .write_all(&(bytes.len() as u64).to_le_bytes())
        .and_then(|()| to_server.write_all(&bytes))
        .map_err(|e| format!("cannot pass the policy: {e}"))?;
    drop(to_server);
    let init_status = wait(pid);
    let mut server_status = [0u8; 4];
    let mut status_pipe = std::fs::File::from(status_read);
    let status = match status_pipe.read_exact(&mut server_status) {
        Ok(()) => i32::from_le_bytes(server_status),
        Err(_) => init_status,
    };
    Ok(mirror(status))
}

/// The namespaces `flags` create, by the names of [`NAMESPACES`].
fn flags_names(flags: nix::sched::CloneFlags) -> Vec<&'static str> {
    use nix::sched::CloneFlags as F;
    [
        F::CLONE_NEWUSER,
        F::CLONE_NEWPID,
        F::CLONE_NEWNS,
        F::CLONE_NEWIPC,
        F::CLONE_NEWNET,
    ]
    .into_iter()
    .zip(NAMESPACES)
    .filter(|(f, _)| flags.contains(*f))
    .map(|(_, n)| n)
    .collect()
}

/// Root inside; outside `nobody` (65534) when the runner is root (so the
/// worker owns none of the host's files), else the runner's own user (the
/// only mapping an unprivileged process may write).
fn map_user(pid: i32, root: bool) -> Result<(), String> {
    let proc = format!("/proc/{pid}");
    let (uid, gid) = if root {
        (super::policy::NOBODY, super::policy::NOBODY)
    } else {
        (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    };
    if !root {
        std::fs::write(format!("{proc}/setgroups"), "deny")
            .map_err(|e| format!("{proc}/setgroups: {e}"))?;
    }
    std::fs::write(format!("{proc}/uid_map"), format!("0 {uid} 1"))
        .map_err(|e| format!("{proc}/uid_map: {e}"))?;
    std::fs::write(format!("{proc}/gid_map"), format!("0 {gid} 1"))
        .map_err(|e| format!("{proc}/gid_map: {e}"))
}

/// Waits for `pid`; its raw wait status.
fn wait(pid: nix::unistd::Pid) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waits for a child of this process; `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(pid.as_raw(), &mut status, 0) };
        if r == pid.as_raw() {
            return status;
        }
        if r < 0 && nix::errno::Errno::last() != nix::errno::Errno::EINTR {
            return 0;
        }
    }
}

/// Ends this process as `status` says the server ended: the same exit code,
/// or the same signal (core dumps are off).
fn mirror(status: i32) -> i32 {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restores the default action of `sig`, unblocks it and
        // raises it on this process, which then ends as the server did.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        return 128 + sig;
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        3
    }
}

/// The init: runs in the clone child, on the launcher's small stack, in
/// the new namespaces. Returns its exit code.
fn init(go: i32, args: i32, status: i32, user: bool, exe: i32) -> isize {
    // SAFETY: plain system calls on this process and descriptors it
    // inherited; `fork` in a single-threaded process; the child execs at once
    // (or exits), touching nothing else.
    unsafe {
        let mut byte = 0u8;
        if libc::read(go, (&mut byte as *mut u8).cast(), 1) != 1 {
            return 1; // the launcher is gone
        }
        libc::close(go);
        if user {
            libc::setgroups(0, std::ptr::null());
            if libc::setresgid(0, 0, 0) != 0 || libc::setresuid(0, 0, 0) != 0 {
                return 1;
            }
        }
        // Dies with the launcher (killed by the runner): the kernel then
        // kills everything in this PID namespace. Set after the credentials
        // change, which clears it; and if the launcher died before, the
        // status pipe has no reader left.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut probe = libc::pollfd {
            fd: status,
            events: libc::POLLOUT,
            revents: 0,
        };
        if libc::poll(&mut probe, 1, 0) < 0 || probe.revents & libc::POLLERR != 0 {
            return 1;
        }
        let server = libc::fork();
        if server < 0 {
            return 1;
        }
        if server == 0 {
            // The server keeps only the arguments' pipe, at a known number.
            libc::close(status);
            let placed = if args == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(args, 3)
            };
            if placed < 0 {
                libc::_exit(127);
            }
            let argv0 = c"vips-sdk-worker";
            let serve = c"--serve";
            let argv = [argv0.as_ptr(), serve.as_ptr(), std::ptr::null()];
            extern "C" {
                static environ: *const *const libc::c_char;
            }
            libc::fexecve(exe, argv.as_ptr(), environ);
            libc::_exit(127);
        }
        libc::close(args);
        // Reaps every orphan the driver leaves; returns when the server ends.
        loop {
            let mut st = 0;
            let pid = libc::waitpid(-1, &mut st, 0);
            if pid == server {
                let bytes = st.to_le_bytes();
                libc::write(status, bytes.as_ptr().cast(), bytes.len());
                return 0;
            }
            if pid < 0 && nix::errno::Errno::last() != nix::errno::Errno::EINTR {
                return 1;
            }
        }
    }
}

/// The server's arguments from the launcher (descriptor 3), bounded.
pub fn read_init_args() -> Result<InitArgs, String> {
    let fifo = nix::sys::stat::fstat(3).is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFIFO);
    if !fifo {
        return Err(format!(
            "{SERVE_ARG}: descriptor 3 is not the launcher's pipe (this program is started by the runner)"
        ));
    }
    // SAFETY: descriptor 3 is open and a pipe: the arguments' pipe the init
    // placed there; this File owns it from now on.
    let mut pipe = unsafe { std::fs::File::from_raw_fd(3) };
    let mut len = [0u8; 8];
    pipe.read_exact(&mut len)
        .map_err(|e| format!("the launcher's arguments: {e}"))?;
    let len = u64::from_le_bytes(len);
    if len > MAX_ARGS_BYTES {
        return Err(format!("the launcher's arguments claim {len} bytes"));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    pipe.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("the launcher's arguments: {e}"))?;
    postcard::from_bytes(&bytes).map_err(|e| format!("the launcher's arguments: {e}"))
}
