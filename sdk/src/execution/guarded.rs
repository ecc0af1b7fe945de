//! A program run on a device so that a kernel cannot hide what it did:
//! every buffer sits between guard regions of a run-specific pattern (and a
//! random size, so addresses change from run to run), every output is
//! poisoned before its kernel, and the whole program runs twice.

use super::program::{Executed, Finding, Program, Side, Spec};
use super::SplitMix;
use crate::{Device, DeviceTensor, Error, HostTensor, Node, Op, TensorSpec};
use std::collections::HashMap;

/// Poison for floating outputs: all-ones bytes, a NaN in every float dtype
/// that no arithmetic on our inputs produces (hardware NaNs carry a zero
/// payload). Integers get all-ones in the first run and zeros in the second:
/// an element unwritten in both holds both.
const POISON_FIRST: u8 = 0xFF;
const POISON_SECOND_INT: u8 = 0x00;


struct Run<'a> {
    device: &'a Device,
    rng: SplitMix,
    pattern: [u8; 8],
    findings: Vec<Finding>,
}

impl Run<'_> {
    /// 64 to 4096 bytes: any write a few elements past a tensor lands in it.
    fn guard_size(&mut self) -> u64 {
        64 * (1 + self.rng.next() % 64)
    }

    fn guard_bytes(&self, len: u64) -> Vec<u8> {
        (0..len).map(|i| self.pattern[(i % 8) as usize]).collect()
    }

    /// A buffer holding `body` between two guards, written in one copy.
    fn place(&mut self, spec: TensorSpec, body: &[u8]) -> Result<DeviceTensor, Error> {
        let guard = self.guard_size();
        let t = self.device.alloc_guarded(spec, guard)?;
        let mut whole = self.guard_bytes(guard);
        whole.extend_from_slice(body);
        whole.extend(self.guard_bytes(guard));
        self.device.write_buffer(&t, 0, &whole)?;
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
        let end = offset + t.spec.size_bytes() as u64;
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
        let after_changed = (0..after.len())
            .filter(|&i| after[i] != expect[i % 8])
            .map(|i| i as u64)
            .collect();
        let before_changed = (0..before.len())
            .rev()
            .filter(|&i| before[i] != expect[i % 8])
            .map(|i| offset - 1 - i as u64)
            .collect();
        report(Side::After, after_changed);
        report(Side::Before, before_changed);
        Ok(())
    }

    /// One run of the program; every step output by name, with `poison`
    /// written into integer outputs (floats always get the NaN poison).
    fn run(
        &mut self,
        program: &Program,
        inputs: &[(&str, &HostTensor)],
        int_poison: u8,
    ) -> Result<Vec<(String, HostTensor)>, Error> {
        let mut on_device: HashMap<&str, DeviceTensor> = HashMap::new();
        for &(name, t) in inputs {
            on_device.insert(name, self.place(t.spec.clone(), &t.bytes)?);
        }
        let mut values = Vec::new();
        for step in &program.steps {
            let args = step
                .inputs
                .iter()
                .map(|i| {
                    on_device.get(i.as_str()).ok_or_else(|| {
                        Error::Tensor(format!("`{}` reads `{i}`, which nothing wrote", step.kernel))
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
                    let poison = if s.dtype.is_float() {
                        POISON_FIRST
                    } else {
                        int_poison
                    };
                    let body = vec![poison; s.size_bytes()];
                    self.place(s, &body)
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.device
                .execute_into(&step.kernel, step.version, &attrs, &args, &outputs)?;
            for (name, t) in step.inputs.iter().zip(&args) {
                self.check_guards(&step.kernel, name, t, None)?;
            }
            for (name, t) in step.outputs.iter().zip(outputs) {
                let (offset, size) = t.layout();
                let whole = self.device.read_buffer(&t, 0, size)?;
                self.check_guards(&step.kernel, name, &t, Some(&whole))?;
                let end = offset as usize + t.spec.size_bytes();
                let host = HostTensor::from_bytes(t.spec.clone(), whole[offset as usize..end].to_vec())?;
                values.push((name.clone(), host));
                on_device.insert(name, t);
            }
        }
        Ok(values)
    }
}

/// Runs `program` twice on `device` from `inputs` (guards sized and
/// patterned from `seed`); returns the first run's outputs and the findings.
pub fn run(
    device: &Device,
    program: &Program,
    inputs: &[(&str, &HostTensor)],
    seed: u64,
) -> Result<Executed, Error> {
    let mut rng = SplitMix(seed);
    let mut pattern = rng.next().to_le_bytes();
    // Never the float poison, so a guard can't pass for poisoned data.
    pattern.iter_mut().for_each(|b| *b &= 0xFE);
    let mut run = Run {
        device,
        rng,
        pattern,
        findings: Vec::new(),
    };
    let first = run.run(program, inputs, POISON_FIRST)?;
    let second = run.run(program, inputs, POISON_SECOND_INT)?;
    let kernel_of = |name: &str| {
        program
            .steps
            .iter()
            .find(|s| s.outputs.iter().any(|o| o == name))
            .map_or(String::new(), |s| s.kernel.clone())
    };
    for ((name, a), (_, b)) in first.iter().zip(&second) {
        let width = a.spec.dtype.size_bytes();
        let float = a.spec.dtype.is_float();
        let poisoned = |e: &[u8], p: u8| e.iter().all(|&x| x == p);
        let mut unwritten = (0u64, None);
        let mut differ = (0u64, None);
        for (i, (ea, eb)) in a.bytes.chunks(width).zip(b.bytes.chunks(width)).enumerate() {
            let left = if float {
                poisoned(ea, POISON_FIRST) || poisoned(eb, POISON_FIRST)
            } else {
                poisoned(ea, POISON_FIRST) && poisoned(eb, POISON_SECOND_INT)
            };
            if left {
                unwritten.0 += 1;
                unwritten.1.get_or_insert(i as u64);
            } else if ea != eb {
                differ.0 += 1;
                differ.1.get_or_insert(i as u64);
            }
        }
        if let (count, Some(first_index)) = unwritten {
            run.findings.push(Finding::Unwritten {
                kernel: kernel_of(name),
                tensor: name.clone(),
                count,
                first_index,
            });
        }
        if let (count, Some(first_index)) = differ {
            run.findings.push(Finding::Nondeterministic {
                tensor: name.clone(),
                count,
                first_index,
            });
        }
    }
    run.findings.dedup();
    Ok(Executed {
        values: first,
        findings: run.findings,
    })
}
