//! The worker's seccomp filter ([`super::SECCOMP_FILTER`]): an allow list
//! of what a driver does (memory, threads, files, ioctl for device nodes,
//! signals, time); every other system call fails with ENOSYS (so libraries
//! fall back, as glibc does from clone3 to clone), and the calls that reach
//! other processes or change the sandbox fail with EPERM.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Allowed unconditionally.
const ALLOWED: &[i64] = &[
    // Files and descriptors (the private root is all it sees).
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_openat,
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_lseek,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_readlinkat,
    libc::SYS_getdents64,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_fcntl,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_pipe2,
    libc::SYS_ioctl,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_ftruncate,
    libc::SYS_fallocate,
    libc::SYS_mkdirat,
    libc::SYS_unlinkat,
    libc::SYS_renameat2,
    libc::SYS_symlinkat,
    libc::SYS_linkat,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_utimensat,
    libc::SYS_getcwd,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_flock,
    libc::SYS_memfd_create,
    libc::SYS_eventfd2,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_ppoll,
    libc::SYS_pselect6,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_rm_watch,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
    // x86_64's legacy names, which older libraries still call.
    #[cfg(target_arch = "x86_64")]
    libc::SYS_open,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_stat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lstat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_access,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_readlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_pipe,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_dup2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_poll,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_select,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_wait,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_create,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getdents,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mkdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_unlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rename,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_arch_prctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_time,
    // Memory.
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_mlock,
    libc::SYS_munlock,
    libc::SYS_mbind,
    libc::SYS_get_mempolicy,
    libc::SYS_set_mempolicy,
    libc::SYS_membarrier,
    // Threads, processes of its own (the PID namespace holds nothing else).
    libc::SYS_futex,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_set_tid_address,
    libc::SYS_rseq,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_getparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_gettid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_getgroups,
    libc::SYS_getpgid,
    libc::SYS_setsid,
    libc::SYS_setpgid,
    libc::SYS_getrlimit,
    libc::SYS_prlimit64,
    libc::SYS_getrusage,
    libc::SYS_getpriority,
    libc::SYS_setpriority,
    libc::SYS_uname,
    libc::SYS_sysinfo,
    libc::SYS_getrandom,
    libc::SYS_prctl,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_kill,
    libc::SYS_tgkill,
    libc::SYS_tkill,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigsuspend,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    libc::SYS_pause,
    libc::SYS_capget,
    // Further filters only restrict (and the denials are installed with it).
    libc::SYS_seccomp,
    // Time.
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_gettimeofday,
    libc::SYS_timer_create,
    libc::SYS_timer_settime,
    libc::SYS_timer_gettime,
    libc::SYS_timer_delete,
    libc::SYS_setitimer,
    libc::SYS_getitimer,
    // Local sockets only (see `conditional`): GPU runtimes talk to their
    // daemons; the network namespace has no interface but loopback.
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_getsockopt,
    libc::SYS_setsockopt,
    libc::SYS_shutdown,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept4,
];

/// Refused with EPERM: reaching other processes (their memory, tracing) or
/// changing the sandbox itself (mounts, namespaces, keys, the kernel).
pub const DENIED: &[(i64, &str)] = &[
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_pidfd_open, "pidfd_open"),
    (libc::SYS_pidfd_getfd, "pidfd_getfd"),
    (libc::SYS_kcmp, "kcmp"),
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_chroot, "chroot"),
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_reboot, "reboot"),
    (libc::SYS_open_by_handle_at, "open_by_handle_at"),
    (libc::SYS_name_to_handle_at, "name_to_handle_at"),
    (libc::SYS_setuid, "setuid"),
    (libc::SYS_setgid, "setgid"),
    (libc::SYS_setresuid, "setresuid"),
    (libc::SYS_setresgid, "setresgid"),
    (libc::SYS_setgroups, "setgroups"),
    (libc::SYS_capset, "capset"),
    (libc::SYS_io_uring_setup, "io_uring_setup"),
];

/// The namespace flags a `clone` may not carry (clone3's flags sit in
/// memory a filter cannot read: clone3 is not allowed, so glibc falls back
/// to clone).
const CLONE_NAMESPACES: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u64;

fn arch() -> Result<TargetArch, String> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("no seccomp filter for {}: {e:?}", std::env::consts::ARCH))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(|e| e.to_string())
}

/// The two programs: the allow list (default ENOSYS), then the explicit
/// denials (EPERM), which take precedence for the calls they name.
pub fn programs() -> Result<[BpfProgram; 2], String> {
    let arch = arch()?;
    let mut allow: BTreeMap<i64, Vec<SeccompRule>> =
        ALLOWED.iter().map(|&n| (n, Vec::new())).collect();
    // clone: threads and plain forks, never new namespaces.
    allow.insert(
        libc::SYS_clone,
        vec![rule(vec![cond(
            0,
            SeccompCmpOp::MaskedEq(CLONE_NAMESPACES),
            0,
        )?])?],
    );
    #[cfg(target_arch = "x86_64")]
    {
        allow.insert(libc::SYS_fork, Vec::new());
        allow.insert(libc::SYS_vfork, Vec::new());
    }
    // socket: AF_UNIX and AF_NETLINK (device queries) only.
    allow.insert(
        libc::SYS_socket,
        vec![
            rule(vec![cond(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?])?,
            rule(vec![cond(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?])?,
        ],
    );
    let allow = SeccompFilter::new(
        allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| e.to_string())?;
    let deny = SeccompFilter::new(
        DENIED.iter().map(|&(n, _)| (n, Vec::new())).collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    Ok([
        allow
            .try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())?,
        deny.try_into()
            .map_err(|e: seccompiler::BackendError| e.to_string())?,
    ])
}

/// Sets no_new_privs and installs both programs on this thread (the
/// worker is single-threaded until the driver loads; threads inherit).
pub fn install() -> Result<(), String> {
    let [allow, deny] = programs()?;
    seccompiler::apply_filter(&allow).map_err(|e| format!("the allow list: {e}"))?;
    seccompiler::apply_filter(&deny).map_err(|e| format!("the denials: {e}"))
}
