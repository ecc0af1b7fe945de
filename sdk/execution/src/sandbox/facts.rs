//! What protected the runner from a worker: recorded in results and reports,
//! required in full for CERTIFIED (docs/runner.md, "The sandbox").

use serde::{Deserialize, Serialize};

/// The namespaces a fully sandboxed worker runs in.
pub const NAMESPACES: [&str; 5] = ["user", "pid", "mount", "ipc", "net"];

/// The seccomp filter's name: bumped whenever its allow list changes.
pub const SECCOMP_FILTER: &str = "vsdk-worker-v1";

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    /// The namespaces the worker ran in, of [`NAMESPACES`].
    pub namespaces: Vec<String>,
    /// `PR_SET_NO_NEW_PRIVS` was set before the driver loaded.
    pub no_new_privs: bool,
    /// The seccomp filter installed before the driver loaded ([`SECCOMP_FILTER`]).
    pub seccomp: Option<String>,
    /// The worker saw a private root of read-only binds (its library's
    /// directory, the system's libraries) instead of the host's files.
    pub private_root: bool,
    /// Paths bound into the private root besides the system's (read-only
    /// unless listed in `writable`).
    pub binds: Vec<String>,
    pub writable: Vec<String>,
    /// Device nodes visible to the worker (GPU drivers need theirs).
    pub device_nodes: Vec<String>,
    /// The most memory the worker's processes may hold, and what enforces it
    /// ("cgroup v1", "cgroup v2": touched memory, OOM kills counted; and
    /// "rlimit": RLIMIT_DATA, an allocation past it fails).
    pub memory_limit_bytes: Option<u64>,
    pub memory_limit_by: Vec<String>,
    /// RLIMIT_NPROC, RLIMIT_FSIZE; RLIMIT_CORE was 0.
    pub max_processes: Option<u64>,
    pub max_file_bytes: Option<u64>,
    pub core_dumps: bool,
    /// The runner was non-dumpable (`PR_SET_DUMPABLE 0`): no same-user
    /// process could read or write its memory.
    pub runner_non_dumpable: bool,
    /// Every worker's process tree was confirmed gone before results and
    /// reports were written.
    pub tree_confirmed_dead: bool,
    /// What could not be set up, and why (the kernel's answer).
    pub missing: Vec<String>,
}

impl Facts {
    /// The protections a certificate requires that these facts lack, in
    /// words: empty for a full sandbox. Derived from the facts themselves
    /// (not from `missing`), as every verifier does.
    pub fn lacking(&self) -> Vec<String> {
        let mut out = Vec::new();
        let absent: Vec<&str> = NAMESPACES
            .into_iter()
            .filter(|n| !self.namespaces.iter().any(|m| m == n))
            .collect();
        if !absent.is_empty() {
            out.push(format!("no {} namespace", absent.join(", ")));
        }
        if !self.no_new_privs {
            out.push("no no_new_privs".into());
        }
        if self.seccomp.as_deref() != Some(SECCOMP_FILTER) {
            out.push(format!("no seccomp filter {SECCOMP_FILTER}"));
        }
        if !self.private_root {
            out.push("the worker saw the host's files".into());
        }
        if self.memory_limit_bytes.is_none() || self.memory_limit_by.is_empty() {
            out.push("no memory limit".into());
        }
        if self.max_processes.is_none() {
            out.push("no process limit".into());
        }
        if self.max_file_bytes.is_none() {
            out.push("no file size limit".into());
        }
        if self.core_dumps {
            out.push("core dumps allowed".into());
        }
        if !self.runner_non_dumpable {
            out.push("the runner was dumpable".into());
        }
        if !self.tree_confirmed_dead {
            out.push("the worker's processes were not confirmed gone".into());
        }
        out
    }

    /// One line for people: what held, or what is lacking.
    pub fn summary(&self) -> String {
        let lacking = self.lacking();
        let memory = self
            .memory_limit_bytes
            .map_or("no memory limit".to_string(), |b| {
                format!(
                    "memory {} MiB ({})",
                    b >> 20,
                    self.memory_limit_by.join(", ")
                )
            });
        let held = format!(
            "{} namespaces; seccomp {}; {}; {} device node(s)",
            self.namespaces.join(", "),
            self.seccomp.as_deref().unwrap_or("none"),
            memory,
            self.device_nodes.len()
        );
        if lacking.is_empty() {
            format!("full ({held})")
        } else {
            let why = if self.missing.is_empty() {
                String::new()
            } else {
                format!(" [{}]", self.missing.join("; "))
            };
            format!(
                "INCOMPLETE, nothing can be certified: {} ({held}){why}",
                lacking.join("; ")
            )
        }
    }

    /// The weaker of two workers' facts (a run restarts workers; a report
    /// records what held for all of them).
    pub fn weakest(self, other: &Facts) -> Facts {
        let both = |a: Vec<String>, b: &[String]| -> Vec<String> {
            a.into_iter().filter(|x| b.contains(x)).collect()
        };
        let union = |mut a: Vec<String>, b: &[String]| -> Vec<String> {
            for x in b {
                if !a.contains(x) {
                    a.push(x.clone());
                }
            }
            a
        };
        let max = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        Facts {
            namespaces: both(self.namespaces, &other.namespaces),
            no_new_privs: self.no_new_privs && other.no_new_privs,
            seccomp: self.seccomp.filter(|s| other.seccomp.as_ref() == Some(s)),
            private_root: self.private_root && other.private_root,
            binds: union(self.binds, &other.binds),
            writable: union(self.writable, &other.writable),
            device_nodes: union(self.device_nodes, &other.device_nodes),
            memory_limit_bytes: max(self.memory_limit_bytes, other.memory_limit_bytes),
            memory_limit_by: both(self.memory_limit_by, &other.memory_limit_by),
            max_processes: max(self.max_processes, other.max_processes),
            max_file_bytes: max(self.max_file_bytes, other.max_file_bytes),
            core_dumps: self.core_dumps || other.core_dumps,
            runner_non_dumpable: self.runner_non_dumpable && other.runner_non_dumpable,
            tree_confirmed_dead: self.tree_confirmed_dead && other.tree_confirmed_dead,
            missing: union(self.missing, &other.missing),
        }
    }
}
