//! The server's side of the sandbox, before any driver code loads: a
//! private root of read-only binds, the limits, no_new_privs and the
//! seccomp filter. Each step that the kernel refuses is recorded, never
//! fatal: the run goes on and its report says what was missing.

use super::facts::{Facts, SECCOMP_FILTER};
use super::launch::InitArgs;
use super::policy::{Policy, ETC_FILES, HIDDEN_SYSTEM_DIRS, SYSTEM_DIRS};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where the new root is assembled (in this mount namespace only).
const NEW_ROOT: &str = "/tmp";
/// Device nodes every worker has.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Applies the policy to this process; what held and what did not.
pub fn enter(args: &InitArgs) -> Facts {
    let policy = &args.policy;
    let mut facts = Facts {
        namespaces: args.namespaces.clone(),
        missing: args.missing.clone(),
        ..Facts::default()
    };
    // Before the new root hides the host's cgroup tree.
    let cgroup_version = args.cgroup.as_ref().map(|cg| {
        if Path::new(cg).join("memory.max").exists() {
            "cgroup v2"
        } else {
            "cgroup v1"
        }
    });
    if facts.namespaces.iter().any(|n| n == "mount") {
        match private_root(policy) {
            Ok(root) => {
                facts.private_root = true;
                facts.binds = root.binds;
                facts.writable = root.writable;
                facts.device_nodes = root.devices;
                facts.missing.extend(root.unhidden);
            }
            Err(e) => facts.missing.push(format!("private root: {e}")),
        }
    } else {
        facts
            .missing
            .push("private root: no mount namespace".to_string());
    }
    limits(policy, args, cgroup_version, &mut facts);
    if let Err(e) = drop_capabilities() {
        facts.missing.push(format!("dropping capabilities: {e}"));
    }
    match super::filter::install() {
        Ok(()) => {
            facts.no_new_privs = true;
            facts.seccomp = Some(SECCOMP_FILTER.to_string());
        }
        Err(e) => facts.missing.push(format!("seccomp: {e}")),
    }
    facts
}

/// Drops every capability (bounding set, ambient, then the sets): root
/// inside the namespace keeps no power over the mounts the sandbox made.
fn drop_capabilities() -> Result<(), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|t| t.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    // SAFETY: prctl with integer arguments on this process; capset with a
    // header and two data words laid out as <linux/capability.h> says.
    unsafe {
        for cap in 0..=last {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data::default(); 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
    }
    Ok(())
}

fn limits(policy: &Policy, args: &InitArgs, cgroup: Option<&str>, facts: &mut Facts) {
    use nix::sys::resource::{setrlimit, Resource};
    let mut set = |what: Resource, name: &str, value: u64| match setrlimit(what, value, value) {
        Ok(()) => true,
        Err(e) => {
            facts.missing.push(format!("{name}: {e}"));
            false
        }
    };
    let core = set(Resource::RLIMIT_CORE, "RLIMIT_CORE", 0);
    let nproc = set(Resource::RLIMIT_NPROC, "RLIMIT_NPROC", policy.max_processes);
    let fsize = set(
        Resource::RLIMIT_FSIZE,
        "RLIMIT_FSIZE",
        policy.max_file_bytes,
    );
    // With a cgroup counting touched memory (and OOM kills: MEMORY LIMIT),
    // RLIMIT_DATA only stops absurd reservations: twice the limit. Alone,
    // it is the limit.
    let data_limit = match &args.cgroup {
        Some(_) => policy.memory_limit_bytes.saturating_mul(2),
        None => policy.memory_limit_bytes,
    };
    let data = set(Resource::RLIMIT_DATA, "RLIMIT_DATA", data_limit);
    facts.core_dumps = !core;
    facts.max_processes = nproc.then_some(policy.max_processes);
    facts.max_file_bytes = fsize.then_some(policy.max_file_bytes);
    if let Some(version) = cgroup {
        facts.memory_limit_by.push(version.to_string());
    }
    if data {
        facts.memory_limit_by.push("rlimit".to_string());
    }
    if !facts.memory_limit_by.is_empty() {
        facts.memory_limit_bytes = Some(policy.memory_limit_bytes);
    }
}

struct Root {
    binds: Vec<String>,
    writable: Vec<String>,
    devices: Vec<String>,
    /// Parts of /sys that could not be hidden, and why.
    unhidden: Vec<String>,
}

fn err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// An `O_PATH` descriptor of a host path, taken before the new root hides
/// it (a bind source under /tmp, say), and its `/proc/self/fd` name.
struct Source {
    fd: OwnedFd,
    dir: bool,
    /// A character or block device (one a `--sandbox-bind` names, say):
    /// bound as it is, never `nodev`.
    device: bool,
}

impl Source {
    fn open(path: &Path) -> Result<Source, String> {
        use nix::fcntl::{open, OFlag};
        use nix::sys::stat::Mode;
        let meta = std::fs::metadata(path).map_err(|e| err(path.display(), e))?;
        let raw = open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| err(path.display(), e))?;
        // SAFETY: `open` returned a fresh descriptor that nothing else owns.
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        Ok(Source {
            fd,
            dir: kind.is_dir(),
            device: kind.is_char_device() || kind.is_block_device(),
        })
    }

    fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// Binds this source at `target` (created as a directory or an empty
    /// file) with the mounts under it, as `access` says.
    fn bind(&self, target: &Path, access: Access) -> Result<(), String> {
        if self.dir {
            std::fs::create_dir_all(target).map_err(|e| err(target.display(), e))?;
        } else {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| err(parent.display(), e))?;
            }
            if !target.exists() {
                std::fs::File::create(target).map_err(|e| err(target.display(), e))?;
            }
        }
        // Recursive: in a user namespace the kernel refuses (EINVAL) a plain
        // bind of a tree holding mounts inherited from the parent namespace
        // (they are locked: a plain bind would uncover what they hide), e.g.
        // a GPU machine's /usr/local/nvidia, or /sys's cgroups.
        mount(
            Some(&self.proc_path()),
            target,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| err(format!("bind {}", target.display()), e))?;
        let attrs = match access {
            Access::ReadOnly => {
                libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV
            }
            Access::Writable => libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
            Access::Device => return Ok(()),
        };
        match set_tree_attrs(target, attrs) {
            // Before Linux 5.12, or a container's filter refusing what it
            // does not know (EPERM).
            Err(nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM) => {
                remount_each(target, attrs)
            }
            other => other.map_err(|e| err(format!("restricting {}", target.display()), e)),
        }
    }
}

/// How a bound tree may be used: every mount of it nosuid and nodev (a
/// tree holding a devtmpfs shows no devices), read-only unless writable;
/// a device node is bound alone, as it is.
#[derive(Clone, Copy)]
enum Access {
    ReadOnly,
    Writable,
    Device,
}

/// Sets `attrs` on every mount of the tree at `target` at once
/// (`mount_setattr`, Linux 5.12): no lookups by path below the top, so a
/// mount under a directory this user may not enter, or one hidden by
/// another, is covered too; all or nothing.
fn set_tree_attrs(target: &Path, attrs: u64) -> Result<(), nix::errno::Errno> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(target.as_os_str().as_bytes())
        .map_err(|_| nix::errno::Errno::EINVAL)?;
    let attr = libc::mount_attr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is a NUL-terminated string and `attr` a mount_attr that
    // both outlive the call; the size passed is the struct's.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::errno::Errno::last())
    }
}

/// Without `mount_setattr`: each mount of the tree remounted by path, keeping the
/// flags the kernel locks. A mount below the top that this user cannot
/// reach (EACCES, ENOENT) is left: the worker, with fewer rights, cannot
/// reach it either.
fn remount_each(target: &Path, attrs: u64) -> Result<(), String> {
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if attrs & libc::MOUNT_ATTR_RDONLY != 0 {
        flags |= MsFlags::MS_RDONLY;
    }
    for point in mounts_under(target)? {
        let done = mount(
            None::<&str>,
            &point,
            None::<&str>,
            flags | locked_flags(&point),
            None::<&str>,
        );
        match done {
            Ok(()) => {}
            Err(nix::errno::Errno::EACCES | nix::errno::Errno::ENOENT) if point != target => {}
            Err(e) => return Err(err(format!("restricting {}", point.display()), e)),
        }
    }
    Ok(())
}

/// A mount's flags that a bind remount may not drop (read-only, nosuid,
/// noexec, atime): the kernel refuses a remount that clears a locked one.
fn locked_flags(point: &Path) -> MsFlags {
    use nix::sys::statvfs::FsFlags as S;
    let Ok(vfs) = nix::sys::statvfs::statvfs(point) else {
        return MsFlags::empty();
    };
    let set = vfs.flags();
    [
        (S::ST_RDONLY, MsFlags::MS_RDONLY),
        (S::ST_NOSUID, MsFlags::MS_NOSUID),
        (S::ST_NODEV, MsFlags::MS_NODEV),
        (S::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (S::ST_NOATIME, MsFlags::MS_NOATIME),
        (S::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (S::ST_RELATIME, MsFlags::MS_RELATIME),
    ]
    .into_iter()
    .filter(|(s, _)| set.contains(*s))
    .fold(MsFlags::empty(), |a, (_, m)| a | m)
}

/// The mount points at or under `top` in this mount namespace, from
/// `/proc/thread-self/mountinfo` (the host's /proc, still mounted at this point;
/// the calling thread's: a mount namespace belongs to a thread).
fn mounts_under(top: &Path) -> Result<Vec<PathBuf>, String> {
    let info = std::fs::read_to_string("/proc/thread-self/mountinfo")
        .map_err(|e| err("/proc/thread-self/mountinfo", e))?;
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4).map(unescape_mount_point))
        .filter(|p| p.starts_with(top))
        .collect();
    points.sort();
    points.dedup();
    if points.is_empty() {
        return Err(format!(
            "{}: not in /proc/thread-self/mountinfo after its bind",
            top.display()
        ));
    }
    Ok(points)
}

/// A mountinfo path: space, tab, newline and backslash are written `\NNN`
/// (octal).
fn unescape_mount_point(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push(
                    d.iter()
                        .fold(0u8, |a, b| a.wrapping_mul(8).wrapping_add(b - b'0')),
                );
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// How a host path appears in the new root.
enum Shown {
    /// The same symbolic link (`/lib -> usr/lib`).
    Link(PathBuf),
    /// Bound from the source, writable or not.
    Bind(Source, bool),
}

fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Makes every mount of this namespace private: nothing done here reaches
/// the host's namespace, nor the other way.
fn make_mounts_private() -> Result<(), String> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| err("making mounts private", e))
}

/// Builds the new root in a tmpfs, then pivots into it.
fn private_root(policy: &Policy) -> Result<Root, String> {
    let root = Path::new(NEW_ROOT);
    make_mounts_private()?;
    // Every source opened while the host's tree is still visible.
    let mut plan: Vec<(PathBuf, Shown)> = Vec::new();
    let system = SYSTEM_DIRS.iter().chain(&ETC_FILES).map(PathBuf::from);
    let extra = policy.binds.iter().map(|b| (b.path(), b.writable));
    for (path, writable) in system.map(|p| (p, false)).chain(extra) {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() && SYSTEM_DIRS.iter().any(|d| Path::new(d) == path) {
            // /lib -> usr/lib on merged-/usr systems: the same link.
            let target = std::fs::read_link(&path).map_err(|e| err(path.display(), e))?;
            plan.push((path, Shown::Link(target)));
        } else {
            let source = Source::open(&path)?;
            plan.push((path, Shown::Bind(source, writable)));
        }
    }
    // Parents before children: a provider directory under /usr lands on
    // /usr's bind.
    plan.sort_by_key(|(p, ..)| p.components().count());
    let null = Source::open(Path::new("/dev/null"))?;
    let devices: Vec<(String, Source)> = device_nodes()
        .into_iter()
        .filter_map(|d| Source::open(Path::new(&d)).ok().map(|s| (d, s)))
        .collect();
    let gpu = devices
        .iter()
        .any(|(d, _)| !DEVICES.iter().any(|n| format!("/dev/{n}") == *d));
    let sys = if gpu {
        Some(Source::open(Path::new("/sys"))?)
    } else {
        None
    };

    mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("size=16m,mode=0755"),
    )
    .map_err(|e| err("tmpfs for the new root", e))?;
    let mut out = Root {
        binds: Vec::new(),
        writable: Vec::new(),
        devices: Vec::new(),
        unhidden: Vec::new(),
    };
    // The private /tmp first: binds of paths under the host's /tmp (a
    // provider in a temporary directory) land on it, not under it.
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| err("/tmp", e))?;
    private_tmp(&tmp, policy.tmp_bytes)?;
    for (path, shown) in &plan {
        let target = under(root, path);
        let name = path.display().to_string();
        match shown {
            Shown::Link(link) => {
                std::os::unix::fs::symlink(link, &target).map_err(|e| err(target.display(), e))?
            }
            Shown::Bind(source, writable) => {
                let access = match (source.device, writable) {
                    (true, _) => Access::Device,
                    (false, true) => Access::Writable,
                    (false, false) => Access::ReadOnly,
                };
                source.bind(&target, access)?;
                if *writable {
                    out.writable.push(name);
                } else if policy.binds.iter().any(|b| b.path() == *path) {
                    out.binds.push(name);
                }
            }
        }
    }
    // /dev: a tmpfs holding only the device nodes a driver needs.
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| err("/dev", e))?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("size=64k,mode=0755"),
    )
    .map_err(|e| err("tmpfs for /dev", e))?;
    for (name, source) in &devices {
        source.bind(&under(root, Path::new(name)), Access::Device)?;
        out.devices.push(name.clone());
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, dev.join(link)).map_err(|e| err(link, e))?;
    }
    let shm = root.join("dev/shm");
    std::fs::create_dir_all(&shm).map_err(|e| err("/dev/shm", e))?;
    private_tmp(&shm, policy.tmp_bytes)?;
    if let Some(sys) = &sys {
        sys.bind(&root.join("sys"), Access::ReadOnly)?;
    }
    // A fresh /proc of this PID namespace: the runner's is not in it.
    let proc = root.join("proc");
    std::fs::create_dir_all(&proc).map_err(|e| err("/proc", e))?;
    mount(
        Some("proc"),
        &proc,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| err("a new /proc", e))?;
    // The signing key and the like, wherever a bind shows them (a failure
    // loses the private root: the key must never show), then /sys's
    // host-wide parts (a failure is named in the facts). One this user
    // cannot reach (debugfs is 0700) is out of the worker's reach too.
    for masked in &policy.masked {
        use std::os::unix::ffi::OsStrExt;
        mask(root, Path::new(std::ffi::OsStr::from_bytes(masked)), &null)?;
    }
    for hidden in HIDDEN_SYSTEM_DIRS {
        if let Err(e) = mask(root, Path::new(hidden), &null) {
            out.unhidden.push(e);
        }
    }
    mount(
        None::<&str>,
        root,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(|e| err("read-only new root", e))?;
    // pivot_root(".", "."): the old root ends up on top, and is detached.
    nix::unistd::chdir(root).map_err(|e| err("chdir", e))?;
    nix::unistd::pivot_root(".", ".").map_err(|e| err("pivot_root", e))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| err("detaching the old root", e))?;
    nix::unistd::chdir("/").map_err(|e| err("chdir /", e))?;
    drop((plan, devices, null, sys));
    Ok(out)
}

/// Hides `path` in the new root, if a bind shows it: an empty read-only
/// tmpfs over a directory, `/dev/null` (unopenable: nodev) over a file.
fn mask(root: &Path, path: &Path, null: &Source) -> Result<(), String> {
    let target = under(root, path);
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => mount(
            Some("tmpfs"),
            &target,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("size=4k"),
        )
        .map_err(|e| err(format!("masking {}", path.display()), e)),
        Ok(_) => null.bind(&target, Access::ReadOnly),
        Err(_) => Ok(()),
    }
}

/// A tmpfs of `bytes` at `target`, writable by all (sticky).
fn private_tmp(target: &Path, bytes: u64) -> Result<(), String> {
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("size={bytes},mode=1777").as_str()),
    )
    .map_err(|e| err(format!("tmpfs for {}", target.display()), e))
}

/// The device nodes shown: the plain ones, and the GPU drivers' where the
/// host has them (NVIDIA's, AMD's KFD, DRM render and card nodes).
fn device_nodes() -> Vec<String> {
    let mut out: Vec<String> = DEVICES.iter().map(|n| format!("/dev/{n}")).collect();
    let list = |dir: &str, keep: &dyn Fn(&str) -> bool| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| keep(n))
                    .map(|n| format!("{dir}/{n}"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    out.extend(list("/dev", &|n| n.starts_with("nvidia") || n == "kfd"));
    out.extend(list("/dev/nvidia-caps", &|_| true));
    out.extend(list("/dev/dri", &|_| true));
    out.retain(|d| Path::new(d).exists() && !Path::new(d).is_dir());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped() {
        let cases = [
            (r"/usr/local/nvidia", "/usr/local/nvidia"),
            (r"/mnt/a\040b\011c", "/mnt/a b\tc"),
            (r"/x\134y\012", "/x\\y\n"),
            (r"/odd\0", r"/odd\0"),
            (r"/end\", r"/end\"),
        ];
        for (field, path) in cases {
            assert_eq!(unescape_mount_point(field), PathBuf::from(path), "{field}");
        }
    }

    /// Both ways of restricting a bound tree (mount_setattr, and the
    /// remount by path of kernels without it) leave every mount of it
    /// read-only, nosuid and nodev, and a writable bind nosuid and nodev.
    #[test]
    fn a_bound_tree_is_restricted_throughout_either_way() {
        use nix::sys::statvfs::{statvfs, FsFlags};
        // SAFETY: a private mount namespace for this test process (nextest
        // runs each test in its own): nothing of the host changes.
        let unshared = unsafe { libc::unshare(libc::CLONE_NEWNS) };
        assert_eq!(unshared, 0, "{}", std::io::Error::last_os_error());
        make_mounts_private().unwrap();
        let host = tempfile::tempdir().unwrap();
        let inner = host.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        // Neither nosuid nor nodev of its own.
        mount(
            Some("tmpfs"),
            &inner,
            Some("tmpfs"),
            MsFlags::empty(),
            Some("size=1m"),
        )
        .unwrap();
        let source = Source::open(host.path()).unwrap();
        let shown = tempfile::tempdir().unwrap();
        type Restrict = fn(&Path, u64) -> Result<(), String>;
        let by_setattr: Restrict = |t, a| set_tree_attrs(t, a).map_err(|e| e.to_string());
        for (how, restrict) in [("mount_setattr", by_setattr), ("remount", remount_each)] {
            for writable in [false, true] {
                let target = shown.path().join(format!("{how}-{writable}"));
                // The bind alone, then the restriction under test.
                std::fs::create_dir(&target).unwrap();
                mount(
                    Some(&source.proc_path()),
                    &target,
                    None::<&str>,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    None::<&str>,
                )
                .unwrap();
                let mut attrs = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
                if !writable {
                    attrs |= libc::MOUNT_ATTR_RDONLY;
                }
                restrict(&target, attrs).unwrap();
                for point in [target.clone(), target.join("inner")] {
                    let flags = statvfs(&point).unwrap().flags();
                    assert!(
                        flags.contains(FsFlags::ST_NOSUID | FsFlags::ST_NODEV),
                        "{how} {point:?}"
                    );
                    assert_eq!(
                        flags.contains(FsFlags::ST_RDONLY),
                        !writable,
                        "{how} {point:?}"
                    );
                }
                let write = std::fs::write(target.join("inner/blob"), b"x");
                assert_eq!(write.is_ok(), writable, "{how} {writable}");
            }
        }
    }
}
