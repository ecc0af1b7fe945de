//! The provider in a worker process. The runner talks to it over pipes
//! ([`protocol`]); a worker that dies (crash, abort, `exit` of any status,
//! an exception, a signal) or stays silent past its timeout is reported as
//! such and replaced by a fresh one at the next request, so the run goes on.
//! The driver's stdout and stderr never reach the runner's own output: the
//! last lines of its stderr are kept for the report.

pub mod protocol;
mod serve;

pub use serve::serve;

use crate::execution::{Executed, Program, Spec};
use crate::{DType, DeviceInfo, HostTensor, ProviderInfo};
use protocol::{Message, Reply, Request};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to start a worker: a program that calls [`serve`] (the CLI runs
/// itself with a hidden `worker` argument).
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
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
    /// kernel it was running, when known.
    Timeout {
        seconds: f64,
        during: String,
        stderr: Vec<String>,
    },
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
            } => {
                write!(f, "no answer within {seconds:.1} s")?;
                if !during.is_empty() {
                    write!(f, " {during}")?;
                }
                write!(f, ": the worker was killed")?;
                with_stderr(f, stderr)
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
    child: Child,
    /// Encoded requests for the writer thread: a worker that stops reading
    /// blocks that thread, never the runner (the timeout still runs).
    requests: SyncSender<Vec<u8>>,
    replies: Receiver<Result<Message<Reply>, String>>,
    tail: Arc<(Mutex<Tail>, std::sync::Condvar)>,
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
    /// has not.
    fn death(self) -> String {
        let Live {
            mut child,
            requests,
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
        status.map_or("stopped answering".into(), describe)
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
}

impl Worker {
    /// A worker for `library`'s device `device`; nothing starts until
    /// [`Worker::open`] or the first request.
    pub fn new(command: WorkerCommand, library: PathBuf, device: u32) -> Worker {
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
            }),
        }
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

    /// What confined the workers so far: the weakest of them.
    pub fn sandbox(&self) -> Option<crate::sandbox::Facts> {
        self.lock().sandbox.clone()
    }

    /// What the provider and device said about themselves at the last open.
    pub fn opened(&self) -> Option<(ProviderInfo, DeviceInfo)> {
        self.lock().opened.clone()
    }

    pub fn library(&self) -> &std::path::Path {
        &self.library
    }

    fn spawn(&self) -> Result<Live, Failure> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
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
        Ok(Live {
            child,
            requests,
            replies,
            tail,
        })
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
        {
            let live = self.spawn()?;
            use std::os::unix::ffi::OsStrExt;
            let open = Request::Open {
                library: self.library.as_os_str().as_bytes().to_vec(),
                device: self.device,
            };
            state.live = Some(live);
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

    /// Sends one request and waits for its reply; a dead or silent worker
    /// is collected (and forgotten: the next request starts a new one).
    fn exchange(
        state: &mut State,
        request: &Request,
        tensors: &[&[u8]],
        timeout: Duration,
    ) -> Result<Message<Reply>, Failure> {
        let live = state.live.as_mut().expect("a live worker");
        let deadline = Instant::now() + timeout;
        let mut encoded = Vec::new();
        protocol::write(&mut encoded, request, tensors)
            .map_err(|e| Failure::Provider(format!("cannot encode the request: {e}")))?;
        let sent = live.requests.send(encoded);
        let mut running = None;
        let reply = loop {
            if sent.is_err() {
                break Err(RecvTimeoutError::Disconnected);
            }
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
            (Some(step), Request::Run { program, .. }) => match program.steps.get(step as usize) {
                Some(s) => format!(
                    "{how} while running `{}`@{} (step {step})",
                    s.kernel, s.version
                ),
                None => how,
            },
            _ => how,
        };
        match reply {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                let live = state.live.take().expect("checked above");
                let stderr = live.stderr();
                let mut how = during(live.death());
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
        let reply = self.request(&request, &blobs, timeout)?;
        match reply.header {
            Reply::Ran { outputs, findings } => {
                let expected: Vec<&String> =
                    program.steps.iter().flat_map(|s| &s.outputs).collect();
                if outputs.len() != expected.len()
                    || outputs.iter().zip(&expected).any(|((n, _), e)| n != *e)
                    || reply.tensors.len() != 2 * outputs.len()
                {
                    self.retire();
                    return Err(Failure::Provider(
                        "the worker's reply does not list the program's outputs (a forged or corrupt reply)".into(),
                    ));
                }
                let names: Vec<String> = outputs.into_iter().map(|(n, _)| n).collect();
                let mut tensors = reply.tensors;
                let repeat: Vec<_> = names
                    .iter()
                    .cloned()
                    .zip(tensors.split_off(names.len()))
                    .collect();
                let values: Vec<_> = names.into_iter().zip(tensors).collect();
                // Only what the guards saw comes from the worker; what the two
                // runs show is recomputed here from the values themselves.
                let mut findings: Vec<_> = findings
                    .into_iter()
                    .filter(|f| {
                        matches!(
                            f,
                            crate::execution::Finding::OutOfBounds { .. }
                                | crate::execution::Finding::Corrupted { .. }
                        )
                    })
                    .collect();
                findings.extend(crate::execution::two_runs(program, &values, &repeat));
                let executed = Executed {
                    values,
                    repeat,
                    findings,
                };
                let scribbled = executed.findings.iter().any(|f| {
                    matches!(
                        f,
                        crate::execution::Finding::OutOfBounds { .. }
                            | crate::execution::Finding::Corrupted { .. }
                    )
                });
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
    pub fn close(self) -> Result<(), Failure> {
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
        }
    }
}
