//! The provider in a worker process. The runner talks to it over pipes
//! ([`protocol`]); a worker that dies (crash, abort, `exit` of any status,
//! an exception, a signal) or stays silent past its timeout is reported as
//! such and replaced by a fresh one at the next request, so the run goes on.
//! The driver's stdout and stderr never reach the runner's own output: the
//! last lines of its stderr are kept for the report.

mod serve;

pub use serve::serve;

use crate::execution::{Executed, Program, Spec};
use crate::install::push_unique;
use crate::protocol::{self, Message, Reply, Request};
use crate::sandbox::tree::{Cgroup, PidNamespace};
use crate::sandbox::{Facts, Policy, SERVE_ARG};
use crate::{DeviceInfo, ProviderInfo};
use std::collections::VecDeque;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vips_data::HostTensor;
use vsdk_catalog::DType;

/// How to start a worker: the worker program (`vips-sdk-worker`, the same
/// for the CLI and the C library, see [`worker_program`]) and its sandbox.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub policy: Policy,
}

/// Added when a program calls a kernel its worker process has not run yet:
/// a GPU driver creates its context and library handles and compiles its
/// kernels on first use (the CUDA provider on an H200: 2.3-4.4 s for the
/// first stage, NVRTC and cuBLAS; hiprtc and larger kernel sources take
/// longer). A restarted worker pays it again. `--first-call-allowance`.
pub const FIRST_CALL_ALLOWANCE: Duration = Duration::from_secs(30);

/// The worker program's name, and the environment variable that overrides
/// where it is found.
pub const WORKER_PROGRAM: &str = "vips-sdk-worker";
pub const WORKER_ENV: &str = "VSDK_WORKER";

/// The worker program: `$VSDK_WORKER`, else beside this program or the
/// library the SDK is in (a build directory), else `../libexec/vips-sdk/`
/// from either (an installed prefix), else `libexec/vips-sdk/` of the prefix
/// recorded at install time, `/usr/local` and `/usr`; every place looked
/// when not found.
pub fn worker_program() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(WORKER_ENV).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "${WORKER_ENV} names {}, which is not a file",
                p.display()
            ))
        };
    }
    let mut dirs = Vec::new();
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok())
        .and_then(|e| e.parent().map(std::path::Path::to_path_buf));
    for dir in [exe_dir, crate::install::sdk_binary_dir()]
        .into_iter()
        .flatten()
    {
        push_unique(&mut dirs, dir.clone());
        // cargo's test programs live in target/<profile>/deps.
        if let Some(parent) = dir.parent().filter(|_| dir.ends_with("deps")) {
            push_unique(&mut dirs, parent.to_path_buf());
        }
        push_unique(&mut dirs, dir.join("../libexec/vips-sdk"));
    }
    // The prefix recorded at install time (a program linked with
    // libvips_sdk.a), then /usr/local and /usr.
    for prefix in crate::install::install_prefixes() {
        push_unique(&mut dirs, prefix.join("libexec/vips-sdk"));
    }
    dirs.iter()
        .map(|d| d.join(WORKER_PROGRAM))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "the worker program {WORKER_PROGRAM} was not found (looked in {}); build it (`cargo build`), install it (tools/install), or name it with ${WORKER_ENV}",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// What a worker gets on this host: a sandboxed worker started with the
/// provider `library`, asked, and shut down.
pub fn probe_sandbox(library: &std::path::Path) -> Result<Facts, String> {
    let command = WorkerCommand {
        program: worker_program()?,
        policy: Policy::for_library(library, 0, None),
    };
    let worker = Worker::new(command, library.to_path_buf(), 0);
    worker.open().map_err(|f| f.to_string())?;
    let facts = worker.sandbox();
    worker.close().map_err(|f| f.to_string())?;
    facts.ok_or_else(|| "the worker did not report its sandbox".to_string())
}

/// The worker program's `main`: the launcher, or with [`SERVE_ARG`] the
/// sandboxed server. Returns the exit code.
pub fn worker_main() -> i32 {
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new(SERVE_ARG)) {
        let args = match crate::sandbox::read_init_args() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("vips-sdk-worker: {e}");
                return 3;
            }
        };
        let facts = crate::sandbox::enter(&args);
        serve(Some(Reply::Sandboxed {
            facts,
            init_pid: args.init_pid,
        }))
    } else {
        crate::sandbox::launch(read_policy)
    }
}

/// The launcher's first message: the sandbox policy.
fn read_policy(r: &mut dyn Read) -> Result<Policy, String> {
    match protocol::read::<Request>(&mut &mut *r).map_err(|e| e.to_string())? {
        protocol::Message {
            header: Request::Sandbox(p),
            ..
        } => Ok(p),
        other => Err(format!(
            "expected the sandbox policy, got {:?}",
            other.header
        )),
    }
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The provider returned an error status: a normal failure.
    Provider(String),
    /// The worker died: how (signal or exit status) and the last lines the
    /// driver wrote to stderr.
    Crashed { how: String, stderr: Vec<String> },
    /// Not run: the provider failed to load twice in a row (the last
    /// failure), so no more workers are started.
    NotLoaded(String),
    /// No answer within the timeout; the worker was killed. `during`: the
    /// kernel it was running, when known; `step`: that kernel's step of the
    /// program.
    Timeout {
        seconds: f64,
        during: String,
        step: Option<u32>,
        stderr: Vec<String>,
    },
    /// The worker's processes passed the sandbox's memory limit and the
    /// kernel killed one (the cgroup's OOM count).
    MemoryLimit {
        limit_bytes: u64,
        during: String,
        stderr: Vec<String>,
    },
    /// The driver started processes that were still running when its call
    /// returned (their command names); all were killed with the worker.
    ProcessesLeft { during: String, names: Vec<String> },
}

fn with_stderr(f: &mut std::fmt::Formatter<'_>, stderr: &[String]) -> std::fmt::Result {
    if !stderr.is_empty() {
        write!(
            f,
            "; the driver's last stderr lines: {}",
            stderr.join(" | ")
        )?;
    }
    Ok(())
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Provider(m) => write!(f, "{m}"),
            Failure::NotLoaded(last) => write!(
                f,
                "not run: the provider failed to load twice, no more workers are started (the last time: {last})"
            ),
            Failure::Crashed { how, stderr } => {
                write!(f, "the provider's worker process {how}")?;
                with_stderr(f, stderr)
            }
            Failure::Timeout {
                seconds,
                during,
                stderr,
                ..
            } => {
                write!(f, "no answer within {seconds:.1} s")?;
                if !during.is_empty() {
                    write!(f, " {during}")?;
                }
                write!(f, ": the worker was killed")?;
                with_stderr(f, stderr)
            }
            Failure::MemoryLimit {
                limit_bytes,
                during,
                stderr,
            } => {
                write!(
                    f,
                    "the worker's processes passed the sandbox's memory limit ({} MiB) and the kernel killed one {during}",
                    limit_bytes >> 20
                )?;
                with_stderr(f, stderr)
            }
            Failure::ProcessesLeft { during, names } => {
                // By name, counted: a fork bomb is one line.
                let mut counted: Vec<(&str, usize)> = Vec::new();
                for n in names {
                    match counted.iter_mut().find(|(m, _)| m == n) {
                        Some((_, c)) => *c += 1,
                        None => counted.push((n, 1)),
                    }
                }
                let listed: Vec<String> = counted
                    .iter()
                    .map(|(n, c)| if *c == 1 { format!("`{n}`") } else { format!("`{n}` x{c}") })
                    .collect();
                write!(
                    f,
                    "the driver left {} process(es) running {during} ({}): all were killed with the worker",
                    names.len(),
                    listed.join(", ")
                )
            }
        }
    }
}

const STDERR_LINES: usize = 12;
const STDERR_LINE_BYTES: usize = 400;
/// Time for a worker to start and load its provider, and to shut down.
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);
const CLOSE_TIMEOUT: Duration = Duration::from_secs(20);

/// The last lines a process wrote, each cut to a bounded length.
#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
    partial: Vec<u8>,
    closed: bool,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                let line = String::from_utf8_lossy(&self.partial)
                    .trim_end()
                    .to_string();
                self.partial.clear();
                if self.lines.len() == STDERR_LINES {
                    self.lines.pop_front();
                }
                self.lines.push_back(line);
            } else if self.partial.len() < STDERR_LINE_BYTES {
                self.partial.push(b);
            }
        }
    }

    fn snapshot(&self) -> Vec<String> {
        let mut out: Vec<String> = self.lines.iter().cloned().collect();
        if !self.partial.is_empty() {
            out.push(String::from_utf8_lossy(&self.partial).to_string());
        }
        out.retain(|l| !l.is_empty());
        out
    }
}

struct Live {
    /// The worker program's launcher (see `sandbox::launch`).
    child: Child,
    /// The worker's PID namespace (all its processes), once it said.
    ns: Option<PidNamespace>,
    cgroup: Option<Cgroup>,
    limit_bytes: u64,
    /// Cleared when a worker's processes could not be confirmed gone.
    confirmed: Arc<std::sync::atomic::AtomicBool>,
    /// Encoded requests for the writer thread: a worker that stops reading
    /// blocks that thread, never the runner (the timeout still runs).
    requests: SyncSender<Vec<u8>>,
    replies: Receiver<Result<Message<Reply>, String>>,
    tail: Arc<(Mutex<Tail>, std::sync::Condvar)>,
    /// Kernels (name, version) this process has already run: a later call
    /// has paid its JIT compile and device set-up.
    warm: std::collections::BTreeSet<(String, u32)>,
}

impl Live {
    /// The driver's last stderr lines, once the pipe has closed (or after
    /// a short wait: a driver may have handed its stderr to a child).
    fn stderr(&self) -> Vec<String> {
        let (lock, cv) = &*self.tail;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, Duration::from_secs(2), |t| !t.closed)
            .unwrap_or_else(|p| p.into_inner());
        guard.snapshot()
    }

    /// How the process ended (waiting a little for it), killing it if it
    /// has not; then every process of the worker is ended and confirmed gone.
    fn death(self) -> String {
        let Live {
            mut child,
            requests,
            ns,
            cgroup,
            confirmed,
            ..
        } = self;
        // A worker waiting for its next request exits on end of input.
        drop(requests);
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = child.kill();
                    break None;
                }
            }
        };
        let _ = child.wait();
        end_tree(ns.as_ref(), &confirmed);
        drop(cgroup);
        status.map_or("stopped answering".into(), describe)
    }

    /// The memory limit's verdict on a worker that died: the kernel's OOM
    /// count says whether the limit killed it.
    fn killed_for_memory(&self) -> bool {
        self.cgroup.as_ref().is_some_and(|c| c.oom_kills() > 0)
    }
}

/// Ends every process of a worker (its PID namespace) and waits until none
/// is left; `confirmed` is cleared when that cannot be shown (no PID
/// namespace: the worker's processes cannot all be found).
fn end_tree(ns: Option<&PidNamespace>, confirmed: &std::sync::atomic::AtomicBool) {
    let gone = ns.is_some_and(|ns| ns.end(Duration::from_secs(10)));
    if !gone {
        confirmed.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// "exited with status 0", "was killed by signal 11 (SIGSEGV)".
pub fn describe(status: ExitStatus) -> String {
    if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGABRT => "SIGABRT",
            libc::SIGBUS => "SIGBUS",
            libc::SIGFPE => "SIGFPE",
            libc::SIGILL => "SIGILL",
            libc::SIGKILL => "SIGKILL",
            libc::SIGTERM => "SIGTERM",
            libc::SIGTRAP => "SIGTRAP",
            libc::SIGPIPE => "SIGPIPE",
            _ => "",
        };
        if name.is_empty() {
            format!("was killed by signal {sig}")
        } else {
            format!("was killed by signal {sig} ({name})")
        }
    } else {
        format!("exited with status {}", status.code().unwrap_or(-1))
    }
}

struct State {
    live: Option<Live>,
    opened: Option<(ProviderInfo, DeviceInfo)>,
    /// Consecutive failures to load the provider, and the last one: after
    /// two, no more workers are started (a driver that crashes in `create`
    /// would otherwise be retried for every stage).
    open_failures: u32,
    last_open_failure: Option<Failure>,
    /// The weakest sandbox any worker ran in.
    sandbox: Option<crate::sandbox::Facts>,
    /// Kernels of a program that timed out with the first-call allowance:
    /// never given it again (a hanging driver would otherwise get it in
    /// every restarted worker).
    allowance_spent: std::collections::BTreeSet<(String, u32)>,
}

/// Appends where it happened to a crash or timeout.
fn during(f: Failure, what: &str) -> Failure {
    match f {
        Failure::Crashed { how, stderr } => Failure::Crashed {
            how: format!("{how} {what}"),
            stderr,
        },
        other => other,
    }
}

/// A provider device in a worker process, restarted on demand.
pub struct Worker {
    command: WorkerCommand,
    library: PathBuf,
    device: u32,
    state: Mutex<State>,
    /// Every ended worker's processes were confirmed gone.
    confirmed: Arc<std::sync::atomic::AtomicBool>,
    /// Added to a program's timeout when it calls a kernel this worker
    /// process has not run yet (see [`Worker::run`]).
    first_call_allowance: Duration,
}

impl Worker {
    /// A worker for `library`'s device `device`; nothing starts until
    /// [`Worker::open`] or the first request.
    pub fn new(command: WorkerCommand, library: PathBuf, device: u32) -> Worker {
        // The path the worker opens must resolve inside its private root,
        // which holds the library's real directory and none of the
        // components (`bin/..`, links) a search path may have taken.
        let library = library.canonicalize().unwrap_or(library);
        Worker {
            command,
            library,
            device,
            state: Mutex::new(State {
                live: None,
                opened: None,
                open_failures: 0,
                last_open_failure: None,
                sandbox: None,
                allowance_spent: Default::default(),
            }),
            confirmed: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            first_call_allowance: FIRST_CALL_ALLOWANCE,
        }
    }

    /// Sets the extra time a kernel's first call in a worker process gets
    /// (default [`FIRST_CALL_ALLOWANCE`]).
    pub fn with_first_call_allowance(mut self, allowance: Duration) -> Worker {
        self.first_call_allowance = allowance;
        self
    }

    /// The kernels of `program` that the current worker process has not
    /// run, and the time to add to its timeout for them: the allowance (a
    /// GPU driver compiles its kernels, creates its context and library
    /// handles on first use; a restarted worker pays again), unless one of
    /// them already timed out with it.
    fn allowance(&self, state: &State, program: &Program) -> (Vec<(String, u32)>, Duration) {
        let cold: Vec<(String, u32)> = program
            .steps
            .iter()
            .map(|s| (s.kernel.clone(), s.version))
            .filter(|k| state.live.as_ref().is_none_or(|l| !l.warm.contains(k)))
            .collect();
        let spent = cold.iter().any(|k| state.allowance_spent.contains(k));
        let allowance = if cold.is_empty() || spent {
            Duration::ZERO
        } else {
            self.first_call_allowance
        };
        (cold, allowance)
    }

    /// Starts the worker and loads the provider: a load error is
    /// `Failure::Provider`, a crash while loading `Crashed`.
    pub fn open(&self) -> Result<(), Failure> {
        let mut state = self.lock();
        self.ensure(&mut state).map(|_| ())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What confined the workers so far: the weakest of them (whether
    /// their processes were all confirmed gone included).
    pub fn sandbox(&self) -> Option<Facts> {
        let mut facts = self.lock().sandbox.clone()?;
        facts.tree_confirmed_dead &= self.confirmed.load(std::sync::atomic::Ordering::SeqCst);
        Some(facts)
    }

    /// What the provider and device said about themselves at the last open.
    pub fn opened(&self) -> Option<(ProviderInfo, DeviceInfo)> {
        self.lock().opened.clone()
    }

    pub fn program(&self) -> &std::path::Path {
        &self.command.program
    }

    pub fn library(&self) -> &std::path::Path {
        &self.library
    }

    fn spawn(&self) -> Result<Live, Failure> {
        use std::os::unix::process::CommandExt;
        let mut policy = self.command.policy.clone();
        let cgroup = Cgroup::create(policy.memory_limit_bytes);
        policy.cgroup = cgroup.as_ref().map(|c| {
            use std::os::unix::ffi::OsStrExt;
            c.path().as_os_str().as_bytes().to_vec()
        });
        // The same name, directory and environment whoever runs it (the CLI
        // or an engine through the C library): nothing tells them apart.
        let mut child = Command::new(&self.command.program)
            .arg0(WORKER_PROGRAM)
            .env_clear()
            .envs(crate::sandbox::worker_env())
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::Crashed {
                how: format!(
                    "could not be started ({}: {e})",
                    self.command.program.display()
                ),
                stderr: Vec::new(),
            })?;
        let (stdin, stdout, mut stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => unreachable!("all three are piped above"),
            };
        // One reply at a time: anything more a driver forges waits in the pipe.
        let (tx, replies) = mpsc::sync_channel(1);
        let (requests, to_write) = mpsc::sync_channel::<Vec<u8>>(1);
        std::thread::spawn(move || {
            let mut w = BufWriter::with_capacity(1 << 20, stdin);
            while let Ok(bytes) = to_write.recv() {
                if w.write_all(&bytes).and_then(|()| w.flush()).is_err() {
                    return;
                }
            }
        });
        std::thread::spawn(move || {
            let mut r = BufReader::with_capacity(1 << 20, stdout);
            loop {
                let m = protocol::read::<Reply>(&mut r).map_err(|e| e.to_string());
                let stop = m.is_err();
                if tx.send(m).is_err() || stop {
                    return;
                }
            }
        });
        let tail: Arc<(Mutex<Tail>, std::sync::Condvar)> = Arc::default();
        let sink = tail.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                let n = stderr.read(&mut buf).unwrap_or(0);
                let (lock, cv) = &*sink;
                let mut t = lock.lock().unwrap_or_else(|p| p.into_inner());
                if n == 0 {
                    t.closed = true;
                    cv.notify_all();
                    return;
                }
                t.push(&buf[..n]);
            }
        });
        let live = Live {
            child,
            ns: None,
            cgroup,
            limit_bytes: policy.memory_limit_bytes,
            confirmed: self.confirmed.clone(),
            requests,
            replies,
            tail,
            warm: Default::default(),
        };
        let mut encoded = Vec::new();
        protocol::write(&mut encoded, &Request::Sandbox(policy), &[])
            .map_err(|e| Failure::Provider(format!("cannot encode the sandbox policy: {e}")))?;
        // The channel holds one message: the launcher reads it first.
        let _ = live.requests.send(encoded);
        Ok(live)
    }

    /// A live, opened worker.
    fn ensure<'a>(&self, state: &'a mut State) -> Result<&'a mut Live, Failure> {
        if state.live.is_none() {
            if state.open_failures >= 2 {
                if let Some(f) = &state.last_open_failure {
                    return Err(Failure::NotLoaded(f.to_string()));
                }
            }
            let opened = self.start_and_open(state);
            if let Err(f) = &opened {
                state.open_failures += 1;
                state.last_open_failure = Some(f.clone());
            } else {
                state.open_failures = 0;
            }
            opened?;
        }
        Ok(state.live.as_mut().expect("opened above"))
    }

    fn start_and_open(&self, state: &mut State) -> Result<(), Failure> {
        if let Some(m) = self.command.policy.inaccessible(&self.library) {
            return Err(Failure::Provider(m));
        }
        {
            let live = self.spawn()?;
            use std::os::unix::ffi::OsStrExt;
            let open = Request::Open {
                library: self.library.as_os_str().as_bytes().to_vec(),
                device: self.device,
            };
            state.live = Some(live);
            let sandboxed = Self::receive(state, None, OPEN_TIMEOUT)
                .map_err(|f| during(f, "while setting up its sandbox"))?;
            match sandboxed.header {
                Reply::Sandboxed {
                    mut facts,
                    init_pid,
                } => {
                    // Never load a driver that could read the signing key.
                    if !self.command.policy.masked.is_empty() && !facts.private_root {
                        if let Some(live) = state.live.take() {
                            live.death();
                        }
                        return Err(Failure::Provider(format!(
                            "the worker's sandbox could not hide the signing key (no private root: {}): the provider is not loaded; run where mount namespaces are allowed, or without --report",
                            facts.missing.join("; ")
                        )));
                    }
                    facts.runner_non_dumpable = crate::sandbox::tree::runner_non_dumpable();
                    facts.tree_confirmed_dead = true;
                    if let Some(live) = state.live.as_mut() {
                        live.ns = PidNamespace::of(init_pid);
                        if live.ns.is_none() && facts.namespaces.iter().any(|n| n == "pid") {
                            facts.missing.push(format!(
                                "the worker's PID namespace (init {init_pid}) could not be found in /proc"
                            ));
                            facts.namespaces.retain(|n| n != "pid");
                        }
                    }
                    state.sandbox = Some(match state.sandbox.take() {
                        Some(before) => before.weakest(&facts),
                        None => facts,
                    });
                }
                other => {
                    return Err(Failure::Provider(format!(
                        "the worker did not report its sandbox first (it sent {other:?})"
                    )))
                }
            }
            let reply = Self::exchange(state, &open, &[], OPEN_TIMEOUT).map_err(|f| {
                let what = format!("while loading {} (create)", self.library.display());
                during(f, &what)
            })?;
            match reply.header {
                Reply::Opened { provider, device } => state.opened = Some((provider, device)),
                Reply::Failed(m) => {
                    if let Some(live) = state.live.take() {
                        live.death();
                    }
                    return Err(Failure::Provider(m));
                }
                other => return Err(Failure::Provider(format!("unexpected reply {other:?}"))),
            }
        }
        Ok(())
    }

    /// Sends one request and waits for its reply (see [`Self::receive`]).
    fn exchange(
        state: &mut State,
        request: &Request,
        tensors: &[&[u8]],
        timeout: Duration,
    ) -> Result<Message<Reply>, Failure> {
        let live = state.live.as_mut().expect("a live worker");
        let mut encoded = Vec::new();
        protocol::write(&mut encoded, request, tensors)
            .map_err(|e| Failure::Provider(format!("cannot encode the request: {e}")))?;
        if live.requests.send(encoded).is_err() {
            // The writer stopped: the worker is gone; `receive` says how
            // once its output closes.
            return Self::receive(state, Some(request), Duration::from_secs(2));
        }
        Self::receive(state, Some(request), timeout)
    }

    /// Waits for the next reply (to `request`, when one was sent); a dead or
    /// silent worker is collected (and forgotten: the next request starts a
    /// new one), and so is one that left processes behind.
    fn receive(
        state: &mut State,
        request: Option<&Request>,
        timeout: Duration,
    ) -> Result<Message<Reply>, Failure> {
        let live = state.live.as_mut().expect("a live worker");
        let deadline = Instant::now() + timeout;
        let mut running = None;
        let reply = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match live.replies.recv_timeout(left) {
                Ok(Ok(Message {
                    header: Reply::Running(step),
                    ..
                })) => running = Some(step),
                other => break other,
            }
        };
        let during = |how: String| match (running, request) {
            (Some(step), Some(Request::Run { program, .. })) => {
                match program.steps.get(step as usize) {
                    Some(s) => format!(
                        "{how} while running `{}`@{} (step {step})",
                        s.kernel, s.version
                    ),
                    None => how,
                }
            }
            _ => how,
        };
        match reply {
            Ok(Ok(m)) => {
                // What the driver started must have ended with its call.
                let left = live
                    .ns
                    .as_ref()
                    .map(|ns| ns.leftovers())
                    .unwrap_or_default();
                if left.is_empty() {
                    return Ok(m);
                }
                let live = state.live.take().expect("checked above");
                live.death();
                Err(Failure::ProcessesLeft {
                    during: during(match request {
                        Some(Request::Open { .. }) => "after loading (create)".into(),
                        _ => "after its call returned".into(),
                    }),
                    names: left.into_iter().map(|(_, n)| n).collect(),
                })
            }
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                let live = state.live.take().expect("checked above");
                let stderr = live.stderr();
                let (oom, limit_bytes) = (live.killed_for_memory(), live.limit_bytes);
                let mut how = during(live.death());
                if oom {
                    return Err(Failure::MemoryLimit {
                        limit_bytes,
                        during: during(String::new()).trim().to_string(),
                        stderr,
                    });
                }
                if let Ok(Err(e)) = &reply {
                    if !e.contains("closed the channel") {
                        how = format!("{how}; its last reply was unreadable: {e}");
                    }
                }
                Err(Failure::Crashed { how, stderr })
            }
            Err(RecvTimeoutError::Timeout) => {
                let mut live = state.live.take().expect("checked above");
                let _ = live.child.kill();
                let stderr = live.stderr();
                live.death();
                Err(Failure::Timeout {
                    seconds: timeout.as_secs_f64(),
                    during: during(String::new()).trim().to_string(),
                    step: running,
                    stderr,
                })
            }
        }
    }

    fn request(
        &self,
        request: &Request,
        tensors: &[&[u8]],
        timeout: Duration,
    ) -> Result<Message<Reply>, Failure> {
        let mut state = self.lock();
        self.ensure(&mut state)?;
        Self::exchange(&mut state, request, tensors, timeout)
    }

    /// `kernel_supports` for each query.
    pub fn supports(&self, queries: &[(String, u32, DType)]) -> Result<Vec<bool>, Failure> {
        let request = Request::Supports(
            queries
                .iter()
                .map(|(k, v, d)| (k.clone(), *v, d.name().to_string()))
                .collect(),
        );
        match self.request(&request, &[], OPEN_TIMEOUT)?.header {
            Reply::Supported(a) if a.len() == queries.len() => Ok(a),
            Reply::Failed(m) => Err(Failure::Provider(m)),
            other => Err(Failure::Provider(format!("unexpected reply {other:?}"))),
        }
    }

    /// Runs a program (see `execution::run_guarded`) in the worker.
    pub fn run(
        &self,
        program: &Program,
        inputs: &[(&str, &HostTensor)],
        seed: u64,
        timeout: Duration,
    ) -> Result<Executed, Failure> {
        let request = Request::Run {
            program: program.clone(),
            inputs: inputs
                .iter()
                .map(|(n, t)| (n.to_string(), Spec::of(&t.spec)))
                .collect(),
            seed,
        };
        let blobs: Vec<&[u8]> = inputs.iter().map(|(_, t)| t.bytes.as_slice()).collect();
        // One lock for the allowance, the call and what it teaches: a
        // concurrent caller cannot restart the worker in between.
        let (reply, allowance) = {
            let mut state = self.lock();
            self.ensure(&mut state)?;
            let (cold, allowance) = self.allowance(&state, program);
            let reply = Self::exchange(&mut state, &request, &blobs, timeout + allowance);
            match (&reply, state.live.as_mut()) {
                // The kernel it hung in (every cold one when it hung
                // outside a step: in a transfer, say).
                (Err(Failure::Timeout { step, .. }), _) if !allowance.is_zero() => {
                    let hung = step
                        .and_then(|i| program.steps.get(i as usize))
                        .map(|s| (s.kernel.clone(), s.version));
                    match hung {
                        Some(k) if cold.contains(&k) => {
                            state.allowance_spent.insert(k);
                        }
                        Some(_) => {}
                        None => state.allowance_spent.extend(cold),
                    }
                }
                // Every kernel ran (a failed step stops the program).
                (Ok(m), Some(live)) if matches!(m.header, Reply::Ran { .. }) => {
                    live.warm.extend(cold)
                }
                _ => {}
            }
            (reply?, allowance)
        };
        match reply.header {
            Reply::Ran {
                outputs,
                repeated,
                findings,
                kernel_seconds,
            } => {
                let expected: Vec<&String> =
                    program.steps.iter().flat_map(|s| &s.outputs).collect();
                let sent = repeated.iter().filter(|&&same| !same).count();
                if outputs.len() != expected.len()
                    || outputs.iter().zip(&expected).any(|((n, _), e)| n != *e)
                    || repeated.len() != outputs.len()
                    || reply.tensors.len() != outputs.len() + sent
                {
                    self.retire();
                    return Err(Failure::Provider(
                        "the worker's reply does not list the program's outputs (a forged or corrupt reply)".into(),
                    ));
                }
                let names: Vec<String> = outputs.into_iter().map(|(n, _)| n).collect();
                let mut tensors = reply.tensors;
                let mut second = tensors.split_off(names.len()).into_iter();
                // A repeated output shares the first run's bytes.
                let repeat: Vec<_> = names
                    .iter()
                    .zip(&tensors)
                    .zip(&repeated)
                    .map(|((n, first), &same)| {
                        let t = if same {
                            Some(first.clone())
                        } else {
                            second.next()
                        };
                        t.map(|t| (n.clone(), t))
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(|| Failure::Provider("the worker's reply is short".into()))?;
                let values: Vec<_> = names.into_iter().zip(tensors).collect();
                // Only what the guards saw comes from the worker; what the two
                // runs show is recomputed here from the values themselves.
                let mut findings: Vec<_> = findings.into_iter().filter(|f| f.scribbled()).collect();
                let scribbled = !findings.is_empty();
                findings.extend(crate::execution::two_runs(program, &values, &repeat));
                let executed = Executed {
                    values,
                    repeat,
                    findings,
                    // Diagnostics only: nothing is judged on it.
                    kernel_seconds: if kernel_seconds.is_finite() {
                        kernel_seconds.max(0.0)
                    } else {
                        0.0
                    },
                    allowance,
                };
                if scribbled {
                    // A kernel that scribbled may have corrupted the worker:
                    // the next request gets a fresh one.
                    self.retire();
                }
                Ok(executed)
            }
            Reply::Failed(m) => Err(Failure::Provider(m)),
            other => Err(Failure::Provider(format!("unexpected reply {other:?}"))),
        }
    }

    /// Ends the current worker (not reported: the run goes on without it).
    fn retire(&self) {
        let mut state = self.lock();
        if let Some(live) = state.live.take() {
            live.death();
        }
    }

    /// Shuts the worker down: the provider's `destroy` runs there, and a
    /// crash in it is reported like any other.
    pub fn close(&self) -> Result<(), Failure> {
        let mut state = self.lock();
        if state.live.is_none() {
            return Ok(());
        }
        let reply = Self::exchange(&mut state, &Request::Shutdown, &[], CLOSE_TIMEOUT)
            .map_err(|f| during(f, "while shutting down (destroy)"))?;
        let live = state.live.take().expect("a live worker");
        let stderr = live.stderr();
        // `death` waits a little, then kills: a driver whose exit handlers
        // hang does not hang the runner.
        let how = live.death();
        match reply.header {
            Reply::Closed if how == "exited with status 0" => Ok(()),
            _ => Err(Failure::Crashed {
                how: format!("{how} while shutting down (destroy, exit handlers)"),
                stderr,
            }),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let mut state = self.lock();
        if let Some(mut live) = state.live.take() {
            let _ = live.child.kill();
            let _ = live.child.wait();
            end_tree(live.ns.as_ref(), &self.confirmed);
        }
    }
}
