//! The worker's sandbox on this host: every protection a certificate needs
//! holds (CI runs on the project's machine kind, which grants them all: a
//! host that refuses one fails here, naming it), the filter answers as
//! documented, and the worker's environment keeps nothing else.

use vips_sdk::isolation::{self, Failure, Worker, WorkerCommand};
use vips_sdk::sandbox::{filter, worker_env, Policy};
use vips_sdk::Provider;

fn worker() -> Worker {
    let library = Provider::locate("cpu").expect("the CPU provider is built");
    let command = WorkerCommand {
        program: env!("CARGO_BIN_EXE_vips-sdk-worker").into(),
        policy: Policy::for_library(&library, 1 << 20, None),
    };
    Worker::new(command, library, 0)
}

#[test]
fn a_worker_gets_every_protection_and_ends_with_nothing_left() {
    let w = worker();
    w.open().expect("the CPU provider loads in the sandbox");
    let facts = w.sandbox().expect("the worker reported its sandbox");
    // The test harness is not the CLI: it did not make itself non-dumpable.
    let lacking: Vec<String> = facts
        .lacking()
        .into_iter()
        .filter(|l| !l.contains("runner was dumpable"))
        .collect();
    assert!(lacking.is_empty(), "{lacking:?}; facts: {facts:?}");
    assert!(facts.missing.is_empty(), "{:?}", facts.missing);
    assert!(facts
        .binds
        .iter()
        .any(|b| library_dir().starts_with(b) || b == &library_dir()));
    w.close().expect("a clean shutdown");
}

/// A provider directory holding a mount of its own (as a GPU machine's
/// /usr holds /usr/local/nvidia): the kernel refuses a plain bind of such a
/// tree in a user namespace, so the bind is recursive, and every mount of it
/// read-only in the worker.
#[test]
fn a_bound_directory_with_a_mount_inside_is_shown_read_only_throughout() {
    // SAFETY: plain system calls on this test process's own namespace (a
    // process of its own under nextest): nothing of the host changes.
    unsafe {
        assert_eq!(
            libc::unshare(libc::CLONE_NEWNS),
            0,
            "unshare: {}",
            std::io::Error::last_os_error()
        );
        let root = c"/";
        let none = std::ptr::null();
        assert_eq!(
            libc::mount(
                none,
                root.as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                none.cast()
            ),
            0
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("libvsdk_provider_cpu.so");
    std::fs::copy(Provider::locate("cpu").unwrap(), &library).unwrap();
    let sub = dir.path().join("firmware");
    std::fs::create_dir(&sub).unwrap();
    mount_tmpfs(&sub);
    std::fs::write(sub.join("blob"), rand::random::<[u8; 16]>()).unwrap();
    // And one under a directory only its owner may enter: the worker's
    // user (nobody, under a root runner) cannot reach it by path.
    let closed = dir.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    let deep = closed.join("mnt");
    std::fs::create_dir(&deep).unwrap();
    mount_tmpfs(&deep);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();

    let command = WorkerCommand {
        program: env!("CARGO_BIN_EXE_vips-sdk-worker").into(),
        policy: Policy::for_library(&library, 1 << 20, None),
    };
    let w = Worker::new(command, library.clone(), 0);
    w.open()
        .expect("the provider loads from a directory holding a mount");
    let facts = w.sandbox().expect("the worker reported its sandbox");
    assert!(facts.missing.is_empty(), "{:?}", facts.missing);
    // Seen from the roots of this worker's sandboxed processes: all three
    // mounts read-only, nosuid, nodev.
    let roots = sandboxed_roots(dir.path());
    assert!(
        !roots.is_empty(),
        "no worker process showed {}",
        dir.path().display()
    );
    use nix::sys::statvfs::FsFlags;
    for root in roots {
        let inside = |p: &std::path::Path| root.join(p.strip_prefix("/").unwrap());
        for p in [dir.path(), sub.as_path(), deep.as_path()] {
            let vfs = nix::sys::statvfs::statvfs(&inside(p)).unwrap();
            for flag in [FsFlags::ST_RDONLY, FsFlags::ST_NOSUID, FsFlags::ST_NODEV] {
                assert!(vfs.flags().contains(flag), "{} lacks {flag:?}", p.display());
            }
        }
        let write = std::fs::write(inside(&sub).join("blob"), b"x");
        assert_eq!(
            write.map_err(|e| e.raw_os_error()),
            Err(Some(libc::EROFS)),
            "a write into the inner mount"
        );
    }
    w.close().expect("a clean shutdown");
}

/// A small tmpfs at `dir`, in this test process's own mount namespace.
fn mount_tmpfs(dir: &std::path::Path) {
    let target = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: a plain system call on the test's private mount namespace;
    // the strings outlive the call.
    let mounted = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            c"size=1m".as_ptr().cast(),
        )
    };
    assert_eq!(mounted, 0, "tmpfs: {}", std::io::Error::last_os_error());
}

/// The roots (`/proc/PID/root`) of the sandboxed worker processes that show
/// `marker`, a directory only the test's own worker binds: other tests'
/// workers run the same program, and the launcher (outside the new root)
/// sees the host's tree, where `unshown` exists.
fn sandboxed_roots(marker: &std::path::Path) -> Vec<std::path::PathBuf> {
    let unshown = tempfile::tempdir().unwrap();
    let program = std::path::Path::new(env!("CARGO_BIN_EXE_vips-sdk-worker"));
    let relative = |p: &std::path::Path| p.strip_prefix("/").unwrap().to_path_buf();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path().join("exe")).ok().as_deref() == Some(program))
        .map(|e| e.path().join("root"))
        .filter(|root| {
            root.join(relative(marker)).exists() && !root.join(relative(unshown.path())).exists()
        })
        .collect()
}

/// Where /sys is shown (to GPU workers; here by a bind), its host-wide
/// parts are not: the cgroup tree would list the host's processes.
#[test]
fn sys_is_shown_without_the_hosts_cgroups_or_kernel_interfaces() {
    let library = Provider::locate("cpu").unwrap();
    let mut policy = Policy::for_library(&library, 1 << 20, None);
    policy.bind(std::path::Path::new("/sys"), false);
    let marker = tempfile::tempdir().unwrap();
    policy.bind(marker.path(), false);
    let command = WorkerCommand {
        program: env!("CARGO_BIN_EXE_vips-sdk-worker").into(),
        policy,
    };
    let w = Worker::new(command, library, 0);
    w.open().expect("the provider loads with /sys shown");
    let facts = w.sandbox().expect("the worker reported its sandbox");
    assert!(facts.missing.is_empty(), "{:?}", facts.missing);
    assert!(
        std::fs::read_dir("/sys/fs/cgroup").unwrap().count() > 0,
        "this host's cgroup tree is mounted (or the check below proves nothing)"
    );
    let roots = sandboxed_roots(marker.path());
    assert!(!roots.is_empty(), "no sandboxed worker process found");
    for root in roots {
        let sys = root.join("sys");
        assert!(
            std::fs::read_dir(sys.join("devices")).unwrap().count() > 0,
            "/sys/devices is shown"
        );
        let vfs = nix::sys::statvfs::statvfs(&sys).unwrap();
        assert!(vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY));
        // The one that matters most, required readable (an empty tmpfs).
        let cgroup = std::fs::read_dir(sys.join("fs/cgroup")).expect("/sys/fs/cgroup is shown");
        assert_eq!(cgroup.count(), 0, "/sys/fs/cgroup is not empty");
        for hidden in vips_sdk::sandbox::HIDDEN_SYSTEM_DIRS {
            let shown = root.join(hidden.strip_prefix('/').unwrap());
            if let Ok(entries) = std::fs::read_dir(&shown) {
                let names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
                assert!(names.is_empty(), "{hidden} shows {names:?}");
            }
        }
    }
    w.close().expect("a clean shutdown");
}

fn library_dir() -> String {
    let lib = Provider::locate("cpu").unwrap().canonicalize().unwrap();
    lib.parent().unwrap().display().to_string()
}

#[test]
fn the_probe_reports_the_same_sandbox() {
    let lib = Provider::locate("cpu").unwrap();
    std::env::set_var(isolation::WORKER_ENV, env!("CARGO_BIN_EXE_vips-sdk-worker"));
    let facts = isolation::probe_sandbox(&lib).expect("probe");
    assert!(facts.namespaces.len() == 5, "{facts:?}");
    assert!(
        facts.summary().contains("seccomp vsdk-worker-v1"),
        "{}",
        facts.summary()
    );
}

#[test]
fn a_missing_worker_program_is_a_clear_error() {
    let library = Provider::locate("cpu").unwrap();
    let command = WorkerCommand {
        program: "/nonexistent/vips-sdk-worker".into(),
        policy: Policy::for_library(&library, 0, None),
    };
    match Worker::new(command, library, 0).open() {
        Err(Failure::Crashed { how, .. }) => {
            assert!(how.contains("/nonexistent/vips-sdk-worker"), "{how}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_environment_keeps_only_the_allowed_variables() {
    std::env::set_var("VIPS_SIGN_KEY", "/secret/key.pem");
    std::env::set_var("SOME_TOKEN", "x");
    std::env::set_var("VSDK_HOSTILE_TARGET", "/lib/x.so");
    std::env::set_var("CUDA_VISIBLE_DEVICES", "0");
    let env = worker_env();
    let has = |k: &str| env.iter().any(|(n, _)| n == k);
    assert!(!has("VIPS_SIGN_KEY") && !has("SOME_TOKEN"));
    assert!(has("VSDK_HOSTILE_TARGET") && has("CUDA_VISIBLE_DEVICES"));
    assert!(env.iter().any(|(n, v)| n == "HOME" && v == "/tmp"));
}

/// The reference GPU providers' settings reach the worker, and what they
/// name is shown to it: else a sandboxed CUDA provider cannot find the
/// NVRTC its user pointed it at.
#[test]
fn the_gpu_providers_settings_reach_the_worker_with_their_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (lib_dir, include) = (dir.path().join("nvrtc/lib"), dir.path().join("include"));
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::create_dir_all(&include).unwrap();
    let nvrtc = lib_dir.join(format!("libnvrtc.so.{}", rand::random::<u16>()));
    std::fs::write(&nvrtc, b"not a library").unwrap();
    // Named through a symbolic link the worker will not see: it gets the
    // path the link resolves to, the one that is bound.
    let alias = dir.path().join("libnvrtc.so");
    std::os::unix::fs::symlink(&nvrtc, &alias).unwrap();
    std::env::set_var("VIPS_NVRTC_LIBRARY", &alias);
    std::env::set_var("VIPS_CUDA_INCLUDE", &include);
    std::env::set_var("VIPS_HIP_ARCH", "gfx90a");
    std::env::set_var("VIPS_SIGN_KEY", "/secret/key.pem");
    // Never the whole host, whatever a setting says.
    let ld = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    std::env::set_var("LD_LIBRARY_PATH", format!("/:{ld}"));
    let env = worker_env();
    let value = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(
        value("VIPS_NVRTC_LIBRARY"),
        Some(nvrtc.canonicalize().unwrap().into())
    );
    assert_eq!(value("VIPS_HIP_ARCH"), Some("gfx90a".into()));
    assert_eq!(value("VIPS_SIGN_KEY"), None);

    let library = dir.path().join("libvsdk_provider_x.so");
    std::fs::write(&library, b"").unwrap();
    let policy = Policy::for_library(&library, 0, None);
    let shown: Vec<_> = policy.binds.iter().map(|b| b.path()).collect();
    for p in [
        lib_dir.canonicalize().unwrap(),
        include.canonicalize().unwrap(),
    ] {
        assert!(shown.contains(&p), "{} not in {shown:?}", p.display());
    }
    assert!(
        !shown.iter().any(|p| p.parent().is_none()),
        "the whole host is bound: {shown:?}"
    );
}

/// The filter in a child process: a denied call is EPERM, an unlisted one
/// ENOSYS, an allowed one works, and clone with a namespace flag is refused.
#[test]
fn the_filter_answers_as_documented() {
    // SAFETY: the child only makes raw system calls and `_exit`s: nothing
    // that needs the test harness's other threads (no allocation after the
    // filter is compiled, which happens before the fork).
    let programs = filter::programs().expect("the filter compiles");
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: as above; each check's result becomes one bit of the exit code.
        unsafe {
            let ok = seccompiler::apply_filter(&programs[0]).is_ok()
                && seccompiler::apply_filter(&programs[1]).is_ok();
            if !ok {
                libc::_exit(100);
            }
            let errno = || *libc::__errno_location();
            let mut bad = 0;
            if libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) != -1
                || errno() != libc::EPERM
            {
                bad |= 1;
            }
            if libc::syscall(libc::SYS_process_vm_readv, 1, 0, 0, 0, 0, 0) != -1
                || errno() != libc::EPERM
            {
                bad |= 2;
            }
            // Not on the allow list: ENOSYS.
            if libc::syscall(libc::SYS_syslog, 3, 0, 0) != -1 || errno() != libc::ENOSYS {
                bad |= 4;
            }
            if libc::syscall(libc::SYS_getpid) <= 0 {
                bad |= 8;
            }
            let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_long;
            if libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) != -1 || errno() != libc::ENOSYS {
                bad |= 16;
            }
            libc::_exit(bad);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "the child died: {status}");
    let code = libc::WEXITSTATUS(status);
    assert_eq!(
        code, 0,
        "failed checks (bits: 1 ptrace, 2 process_vm_readv, 4 ENOSYS, 8 getpid, 16 clone with a namespace; 100 the filter did not install)"
    );
}
