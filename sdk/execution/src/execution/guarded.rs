//! A program run on a device so that a kernel cannot hide what it did:
//! every buffer sits between guard regions of a run-specific pattern (and a
//! random size, so addresses change from run to run), every output is
//! poisoned before its kernel, and the whole program runs twice (both runs
//! come back: each is judged).

use super::program::{Executed, Finding, Program, Side, Spec, Step};
use super::SplitMix;
use crate::loader::Layout;
use crate::{Device, DeviceTensor};
use std::collections::{HashMap, HashSet};
use vips_data::{Error, HostTensor};
use vsdk_catalog::{Node, Op, TensorSpec};

/// Poison: all-ones bytes in the first run (a NaN in every float dtype, so
/// an unwritten float fails any comparison), zeros in the second. An element
/// holding both is unwritten; one value alone proves nothing (a kernel may
/// copy an all-ones NaN, or compute a zero).
const POISON_FIRST: u8 = 0xFF;
const POISON_SECOND: u8 = 0x00;

struct Run<'a> {
    device: &'a Device,
    rng: SplitMix,
    pattern: [u8; 8],
    findings: Vec<Finding>,
    /// Told the index of each step before it runs (the worker reports it,
    /// so a crash can be blamed on its kernel).
    on_step: &'a mut dyn FnMut(usize),
    /// Time inside the provider's `execute` calls (`--timings`).
    kernels: std::time::Duration,
}

impl Run<'_> {
    /// 64 to 4096 bytes: any write a few elements past a tensor lands in it.
    fn guard_size(&mut self) -> u64 {
        64 * (1 + self.rng.next_u64() % 64)
    }

    fn guard_bytes(&self, len: u64) -> Vec<u8> {
        (0..len).map(|i| self.pattern[(i % 8) as usize]).collect()
    }

    /// A buffer holding `body` between two guards (three writes rather than
    /// a copy of the body); with a layout, `body` is the view's bytes.
    fn place(
        &mut self,
        spec: TensorSpec,
        layout: Option<&Layout>,
        body: &[u8],
    ) -> Result<DeviceTensor, Error> {
        let guard = self.guard_size();
        let t = match layout {
            Some(l) => self.device.alloc_view(spec, l, guard)?,
            None => self.device.alloc_guarded(spec, guard)?,
        };
        let guards = self.guard_bytes(guard);
        self.device.write_buffer(&t, 0, &guards)?;
        if !body.is_empty() {
            self.device.write_buffer(&t, guard, body)?;
        }
        self.device
            .write_buffer(&t, guard + body.len() as u64, &guards)?;
        Ok(t)
    }

    /// Records writes into `t`'s guards; `whole` is its buffer when already
    /// read back, else the guards are read.
    fn check_guards(
        &mut self,
        kernel: &str,
        name: &str,
        t: &DeviceTensor,
        whole: Option<&[u8]>,
    ) -> Result<(), Error> {
        let (offset, size) = t.layout();
        let end = offset + t.extent();
        let (before, after) = match whole {
            Some(w) => (w[..offset as usize].to_vec(), w[end as usize..].to_vec()),
            None => (
                self.device.read_buffer(t, 0, offset)?,
                self.device.read_buffer(t, end, size - end)?,
            ),
        };
        let expect = self.guard_bytes(offset);
        let mut report = |side, changed: Vec<u64>| {
            if let (Some(&first), Some(&last)) = (changed.first(), changed.last()) {
                self.findings.push(Finding::OutOfBounds {
                    kernel: kernel.to_string(),
                    tensor: name.to_string(),
                    side,
                    first,
                    last,
                });
            }
        };
        // Distances from the tensor's edge: after it counting up, before it
        // counting down from its first byte.
        let after_changed: Vec<u64> = (0..after.len())
            .filter(|&i| after[i] != expect[i % 8])
            .map(|i| i as u64)
            .collect();
        let before_changed: Vec<u64> = (0..before.len())
            .rev()
            .filter(|&i| before[i] != expect[i % 8])
            .map(|i| offset - 1 - i as u64)
            .collect();
        let dirty = !after_changed.is_empty() || !before_changed.is_empty();
        report(Side::After, after_changed);
        report(Side::Before, before_changed);
        if dirty {
            // Restored, so that later checks see only later writes.
            self.device.write_buffer(t, 0, &expect)?;
            self.device
                .write_buffer(t, end, &self.guard_bytes(size - end))?;
        }
        Ok(())
    }

    /// After a step ran: its tensors' guards checked, its outputs read back
    /// (the caller keeps them on the device for later steps).
    fn collect(
        &mut self,
        step: &Step,
        args: &[&DeviceTensor],
        outputs: Vec<DeviceTensor>,
        values: &mut Vec<(String, HostTensor)>,
    ) -> Result<Vec<DeviceTensor>, Error> {
        for (name, t) in step.inputs.iter().zip(args) {
            self.check_guards(&step.kernel, name, t, None)?;
        }
        for (name, t) in step.outputs.iter().zip(&outputs) {
            let (offset, _) = t.layout();
            let body = match t.spec.size_bytes() {
                0 => Vec::new(),
                n => self.device.read_buffer(t, offset, n as u64)?,
            };
            self.check_guards(&step.kernel, name, t, None)?;
            values.push((name.clone(), HostTensor::from_bytes(t.spec.clone(), body)?));
        }
        Ok(outputs)
    }

    /// One run of the program; every step output by name, each poisoned
    /// with `poison` before its kernel.
    fn run(
        &mut self,
        program: &Program,
        inputs: &[(&str, &HostTensor)],
        poison: u8,
    ) -> Result<Vec<(String, HostTensor)>, Error> {
        // Setting up and checking are not any step's (usize::MAX: no kernel).
        (self.on_step)(usize::MAX);
        let mut on_device: HashMap<&str, DeviceTensor> = HashMap::new();
        // What each input's buffer must hold at the end (a view's bytes).
        let mut placed: HashMap<&str, Vec<u8>> = HashMap::new();
        for &(name, t) in inputs {
            let layout = program
                .layouts
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, l)| l);
            let device = match layout {
                Some(l) => {
                    let span = l.span(&t.spec).map_err(Error::Tensor)?;
                    let body = l.scatter(t, span);
                    let device = self.place(t.spec.clone(), Some(l), &body)?;
                    placed.insert(name, body);
                    device
                }
                None => self.place(t.spec.clone(), None, &t.bytes)?,
            };
            on_device.insert(name, device);
        }
        let concurrent = program.threads > 1;
        if concurrent {
            if let Some(step) = program
                .steps
                .iter()
                .find(|s| s.inputs.iter().any(|i| !inputs.iter().any(|(n, _)| n == i)))
            {
                return Err(Error::Tensor(format!(
                    "`{}` reads another step's output: concurrent steps read program inputs only",
                    step.kernel
                )));
            }
        }
        // Concurrent: every step's outputs placed first, then the calls.
        let mut prepared = Vec::new();
        let mut values = Vec::new();
        for (index, step) in program.steps.iter().enumerate() {
            if !concurrent {
                (self.on_step)(index);
            }
            let args = step
                .inputs
                .iter()
                .map(|i| {
                    on_device.get(i.as_str()).ok_or_else(|| {
                        Error::Tensor(format!(
                            "`{}` reads `{i}`, which nothing wrote",
                            step.kernel
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let attrs = step.attrs();
            let specs = match &step.out_specs {
                Some(s) => s
                    .iter()
                    .map(Spec::to_spec)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(Error::Tensor)?,
                None => {
                    let op = Op::lookup(&step.kernel, step.version).map_err(|e| {
                        Error::Tensor(format!("{}@{}: {e}", step.kernel, step.version))
                    })?;
                    let specs: Vec<TensorSpec> = args.iter().map(|t| t.spec.clone()).collect();
                    Node::infer(op, &attrs, &specs)
                        .map_err(|e| Error::Tensor(format!("{}: {e}", step.kernel)))?
                        .1
                }
            };
            if specs.len() != step.outputs.len() {
                return Err(Error::Tensor(format!(
                    "`{}` has {} outputs, the program names {}",
                    step.kernel,
                    specs.len(),
                    step.outputs.len()
                )));
            }
            let outputs = specs
                .into_iter()
                .map(|s| {
                    let body = vec![poison; s.size_bytes()];
                    self.place(s, None, &body)
                })
                .collect::<Result<Vec<_>, _>>()?;
            if concurrent {
                prepared.push((step, attrs, outputs));
                continue;
            }
            let started = std::time::Instant::now();
            self.device
                .execute_into(&step.kernel, step.version, &attrs, &args, &outputs)?;
            self.kernels += started.elapsed();
            let outputs = self.collect(step, &args, outputs, &mut values)?;
            for (name, t) in step.outputs.iter().zip(outputs) {
                on_device.insert(name, t);
            }
        }
        if concurrent {
            let started = std::time::Instant::now();
            execute_concurrently(self.device, &prepared, &on_device, program.threads)?;
            self.kernels += started.elapsed();
            for (step, _, outputs) in prepared {
                let args: Vec<&DeviceTensor> =
                    step.inputs.iter().map(|i| &on_device[i.as_str()]).collect();
                let outputs = self.collect(step, &args, outputs, &mut values)?;
                for (name, t) in step.outputs.iter().zip(outputs) {
                    on_device.insert(name, t);
                }
            }
        }
        // Every buffer must still hold what was written into it: a far
        // write lands in another tensor, not in its own tensor's guards.
        let written: HashMap<&str, &[u8]> = inputs
            .iter()
            .map(|&(n, t)| (n, placed.get(n).map_or(t.bytes.as_slice(), Vec::as_slice)))
            .chain(values.iter().map(|(n, t)| (n.as_str(), t.bytes.as_slice())))
            .collect();
        (self.on_step)(usize::MAX);
        for (name, t) in &on_device {
            let (offset, size) = t.layout();
            let whole = self.device.read_buffer(t, 0, size)?;
            self.check_guards("", name, t, Some(&whole))?;
            let body = &whole[offset as usize..(offset + t.extent()) as usize];
            if body == written[name] {
                continue;
            }
            if let Some(first) = body.iter().zip(written[name]).position(|(a, b)| a != b) {
                self.findings.push(Finding::Corrupted {
                    tensor: name.to_string(),
                    first_byte: first as u64,
                });
            }
        }
        Ok(values)
    }
}

/// Runs the prepared calls on `threads` threads at once (each thread takes
/// the next call), so that calls overlap; the first error wins.
fn execute_concurrently(
    device: &Device,
    calls: &[(&Step, vsdk_catalog::Attrs, Vec<DeviceTensor>)],
    on_device: &HashMap<&str, DeviceTensor>,
    threads: u32,
) -> Result<(), Error> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let errors = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(calls.len() as u32) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((step, attrs, outputs)) = calls.get(i) else {
                    break;
                };
                let args: Vec<&DeviceTensor> =
                    step.inputs.iter().map(|n| &on_device[n.as_str()]).collect();
                if let Err(e) =
                    device.execute_into(&step.kernel, step.version, attrs, &args, outputs)
                {
                    errors
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, e));
                }
            });
        }
    });
    let mut errors = errors
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    errors.sort_by_key(|(i, _)| *i);
    match errors.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Runs `program` twice on `device` from `inputs` (guards sized and
/// patterned from `seed`); returns both runs' outputs and the findings.
pub fn run(
    device: &Device,
    program: &Program,
    inputs: &[(&str, &HostTensor)],
    seed: u64,
    on_step: &mut dyn FnMut(usize),
) -> Result<Executed, Error> {
    let mut rng = SplitMix(seed);
    let mut pattern = rng.next_u64().to_le_bytes();
    // Never the float poison, so a guard can't pass for poisoned data.
    pattern.iter_mut().for_each(|b| *b &= 0xFE);
    let mut run = Run {
        device,
        rng,
        pattern,
        findings: Vec::new(),
        on_step,
        kernels: std::time::Duration::ZERO,
    };
    let first = run.run(program, inputs, POISON_FIRST)?;
    let second = run.run(program, inputs, POISON_SECOND)?;
    let mut findings = run.findings;
    findings.extend(two_runs(program, &first, &second));
    findings.dedup();
    Ok(Executed {
        values: first,
        repeat: second,
        findings,
        kernel_seconds: run.kernels.as_secs_f64(),
        allowance: std::time::Duration::ZERO,
    })
}

/// What comparing the two runs reveals: elements still poisoned in both
/// (unwritten) and bits that differ (nondeterminism). The runner computes
/// this itself from the values it received, never trusting a worker's word.
pub fn two_runs(
    program: &Program,
    first: &[(String, HostTensor)],
    second: &[(String, HostTensor)],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    // A NaN poison read by the next kernel comes out as the same NaN, and a
    // flipped bit flows on: only a step whose inputs were clean is blamed.
    let (mut poisoned, mut differing) = (HashSet::new(), HashSet::new());
    let values: HashMap<&str, (&HostTensor, &HostTensor)> = first
        .iter()
        .zip(second)
        .map(|((n, a), (_, b))| (n.as_str(), (a, b)))
        .collect();
    for step in &program.steps {
        let clean = |set: &HashSet<&str>| !step.inputs.iter().any(|i| set.contains(i.as_str()));
        let (inputs_written, inputs_same) = (clean(&poisoned), clean(&differing));
        for name in &step.outputs {
            let Some(&(a, b)) = values.get(name.as_str()) else {
                continue;
            };
            let (unwritten, differ) = compare_runs(a, b);
            if let Some((count, first_index)) = unwritten {
                poisoned.insert(name.as_str());
                if inputs_written {
                    findings.push(Finding::Unwritten {
                        kernel: step.kernel.clone(),
                        tensor: name.clone(),
                        count,
                        first_index,
                    });
                }
            }
            if let Some((count, first_index)) = differ {
                differing.insert(name.as_str());
                if inputs_same {
                    findings.push(Finding::Nondeterministic {
                        tensor: name.clone(),
                        count,
                        first_index,
                    });
                }
            }
        }
    }
    findings
}

/// (count, first flat index) of the elements left unwritten, and of those
/// that differ between the runs.
type Count = Option<(u64, u64)>;

fn compare_runs(a: &HostTensor, b: &HostTensor) -> (Count, Count) {
    // The two runs poison with different bytes: equal runs wrote everything.
    if a.bytes == b.bytes {
        return (None, None);
    }
    let width = a.spec.dtype.size_bytes();
    let poisoned = |e: &[u8], p: u8| e.iter().all(|&x| x == p);
    let (mut unwritten, mut differ): (Count, Count) = (None, None);
    let bump = |c: &mut Count, i: usize| match c {
        Some((n, _)) => *n += 1,
        None => *c = Some((1, i as u64)),
    };
    for (i, (ea, eb)) in a.bytes.chunks(width).zip(b.bytes.chunks(width)).enumerate() {
        if poisoned(ea, POISON_FIRST) && poisoned(eb, POISON_SECOND) {
            bump(&mut unwritten, i);
        } else if ea != eb {
            bump(&mut differ, i);
        }
    }
    (unwritten, differ)
}
