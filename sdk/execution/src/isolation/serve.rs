//! The worker side: a process that holds the provider and answers requests
//! until its stdin closes. Whatever the driver does to this process (crash,
//! `exit`, scribble, hang) the runner sees as a dead or silent worker.

use crate::execution::{self, Spec};
use crate::protocol::{self, Message, ProtocolError, Reply, Request};
use crate::{Device, Provider};
use std::io::{BufReader, BufWriter};
use std::os::fd::FromRawFd;
use vsdk_catalog::DType;

/// Serves requests from the process's original stdin, replying on its
/// original stdout: both are moved to private descriptors first, and 1
/// points at stderr and 0 at /dev/null, so a driver that prints or reads
/// cannot corrupt the protocol. `first` is sent before anything is read
/// (the sandbox's facts). Returns the process exit code.
pub fn serve(first: Option<Reply>) -> i32 {
    // SAFETY: plain system calls on file descriptors this process owns and
    // a NUL-terminated path; `dup` returns new descriptors nothing else uses.
    let (reply_fd, request_fd) = unsafe {
        // A worker whose runner died must not outlive it (a hung kernel
        // would never read the closed stdin).
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let fd = libc::dup(1);
        let request_fd = libc::dup(0);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if fd < 0 || request_fd < 0 || null < 0 || libc::dup2(2, 1) < 0 || libc::dup2(null, 0) < 0 {
            eprintln!("vips worker: cannot set up its descriptors");
            return 3;
        }
        libc::close(null);
        (fd, request_fd)
    };
    // SAFETY: `reply_fd` is a fresh descriptor from `dup`, owned by this File alone.
    let reply = unsafe { std::fs::File::from_raw_fd(reply_fd) };
    let mut out = BufWriter::with_capacity(1 << 20, reply);
    // SAFETY: `request_fd` is a fresh descriptor from `dup`, owned by this File alone.
    let requests = unsafe { std::fs::File::from_raw_fd(request_fd) };
    let mut input = BufReader::with_capacity(1 << 20, requests);
    let mut open: Option<(Provider, Device)> = None;
    if let Some(first) = first {
        if let Err(e) = protocol::write(&mut out, &first, &[]) {
            eprintln!("vips worker: cannot reply: {e}");
            return 3;
        }
    }
    loop {
        let message: Message<Request> = match protocol::read(&mut input) {
            Ok(m) => m,
            Err(ProtocolError::Closed) => return 0,
            Err(e) => {
                eprintln!("vips worker: {e}");
                return 3;
            }
        };
        let (reply, tensors) = handle(message, &mut open, &mut out);
        let blobs: Vec<&[u8]> = tensors.iter().map(|t| t.bytes.as_slice()).collect();
        if let Err(e) = protocol::write(&mut out, &reply, &blobs) {
            eprintln!("vips worker: cannot reply: {e}");
            return 3;
        }
        if reply == Reply::Closed {
            return 0;
        }
        drop(tensors);
        crate::allocator::return_freed_memory();
    }
}

fn handle(
    message: Message<Request>,
    open: &mut Option<(Provider, Device)>,
    out: &mut impl std::io::Write,
) -> (Reply, Vec<vips_data::HostTensor>) {
    let failed = |m: String| (Reply::Failed(m), Vec::new());
    match message.header {
        Request::Open { library, device } => {
            use std::os::unix::ffi::OsStringExt;
            let path = std::path::PathBuf::from(std::ffi::OsString::from_vec(library));
            *open = None;
            match Provider::open(&path).and_then(|p| p.device(device).map(|d| (p, d))) {
                Ok((p, d)) => match p.device_info(device) {
                    Ok(info) => {
                        let mut provider = p.info().clone();
                        // The runner knows the path; a non-UTF-8 one would not encode.
                        provider.library = provider.library.to_string_lossy().into_owned().into();
                        let reply = Reply::Opened {
                            provider,
                            device: info,
                        };
                        *open = Some((p, d));
                        (reply, Vec::new())
                    }
                    Err(e) => failed(e.to_string()),
                },
                Err(e) => failed(e.to_string()),
            }
        }
        Request::Sandbox(_) => failed("the sandbox is set up once, by the launcher".into()),
        Request::Shutdown => {
            // Destroys the instance, here, where a crash in `destroy` is seen.
            *open = None;
            (Reply::Closed, Vec::new())
        }
        Request::Supports(queries) => {
            let Some((_, device)) = open else {
                return failed("no provider is open".into());
            };
            let answers = queries
                .iter()
                .map(|(kernel, version, dtype)| {
                    let dtype = DType::ALL
                        .into_iter()
                        .find(|d| d.name() == dtype)
                        .ok_or_else(|| format!("unknown dtype {dtype:?}"))?;
                    device
                        .supports(kernel, *version, dtype)
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>();
            match answers {
                Ok(a) => (Reply::Supported(a), Vec::new()),
                Err(e) => failed(e),
            }
        }
        Request::Run {
            program,
            inputs,
            seed,
        } => {
            let Some((_, device)) = open else {
                return failed("no provider is open".into());
            };
            let inputs: Vec<_> = inputs
                .into_iter()
                .map(|(n, _)| n)
                .zip(message.tensors)
                .collect();
            let refs: Vec<(&str, &vips_data::HostTensor)> =
                inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
            let mut running = |step: usize| {
                // Best effort: a runner that went away ends us at the reply.
                let _ = protocol::write(out, &Reply::Running(step as u32), &[]);
            };
            match execution::run_guarded(device, &program, &refs, seed, &mut running) {
                Ok(done) => {
                    let outputs = done
                        .values
                        .iter()
                        .map(|(n, t)| (n.clone(), Spec::of(&t.spec)))
                        .collect();
                    let repeated: Vec<bool> = done
                        .values
                        .iter()
                        .zip(&done.repeat)
                        .map(|((_, a), (_, b))| a.bytes == b.bytes)
                        .collect();
                    let second = done
                        .repeat
                        .into_iter()
                        .zip(&repeated)
                        .filter(|(_, &same)| !same)
                        .map(|((_, t), _)| t);
                    let tensors = done
                        .values
                        .into_iter()
                        .map(|(_, t)| t)
                        .chain(second)
                        .collect();
                    (
                        Reply::Ran {
                            outputs,
                            repeated,
                            findings: done.findings,
                            kernel_seconds: done.kernel_seconds,
                        },
                        tensors,
                    )
                }
                Err(e) => failed(e.to_string()),
            }
        }
    }
}
