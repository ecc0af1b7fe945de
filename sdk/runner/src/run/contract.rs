//! The kernel contract's round (`crate::contract` says what the cases are):
//! every case of the kernels the component needs, run in the worker like a
//! stage (guarded buffers, poisoned outputs, two runs), judged against the
//! reference provider: by the error model, or bit for bit where the catalog
//! defines every bit. Then all cases again at once on several threads (the
//! host serialises a provider that does not declare itself thread safe),
//! judged the same way: a case that passes alone and fails among others
//! fails the `concurrency` row.

use super::{Drift, Execution, OutputResult, Round, StageResult, Status};
use crate::contract::{self, Case};
use crate::suite::Suite;
use std::time::{Duration, Instant};
use vips_data::document::Stage;
use vips_data::HostTensor;
use vips_execution::backend::Backend;
use vips_execution::execution::{Executed, Finding, Program, Step};
use vips_execution::isolation::Failure;
use vips_execution::Device;
use vips_verdict::compare::{NanPolicy, Tier};
use vips_verdict::error_map::{ErrorMap, Placement};
use vips_verdict::error_model::{self, Judgement, Rules, Statistics, TierParams};

/// Calls in flight at once in the concurrency pass.
pub const THREADS: u32 = 4;

/// The name of the concurrency pass's row.
pub const CONCURRENCY: &str = "concurrency";

pub(super) struct Contract<'a> {
    pub suite: &'a Suite,
    pub tier: Tier,
    pub backend: &'a Backend,
    pub reference: &'a Device,
    pub seed: u64,
    pub timeout: Option<Duration>,
}

/// What the round tells the runner's observer.
pub(super) enum Tell<'a> {
    /// This many rows will follow (the cases and the concurrency row).
    Planned(usize),
    Started(&'a str),
}

/// A case's program tensors are prefixed, so that one program holds them all.
fn prefix(i: usize) -> String {
    format!("k{i}/")
}

/// The cases `indices` as one program (`threads` > 1: run at once).
fn program(
    cases: &[Case],
    indices: &[usize],
    threads: u32,
) -> (Program, Vec<(String, HostTensor)>) {
    let mut program = Program {
        threads,
        ..Program::default()
    };
    let mut inputs = Vec::new();
    for &i in indices {
        let case = &cases[i];
        let p = prefix(i);
        let names: Vec<String> = case.node.inputs.iter().map(|n| format!("{p}{n}")).collect();
        for ((name, t), layout) in names.iter().zip(&case.inputs).zip(&case.layouts) {
            inputs.push((name.clone(), t.clone()));
            if let Some(l) = layout {
                program.layouts.push((name.clone(), l.clone()));
            }
        }
        program.steps.push(Step {
            inputs: names,
            outputs: vec![format!("{p}{}", case.node.output)],
            ..Step::new(
                case.node.op.name(),
                case.node.op.version(),
                &case.node.attrs,
            )
        });
    }
    (program, inputs)
}

impl Contract<'_> {
    /// The contract's results for `stages`' kernels: one row per case, then
    /// the concurrency row; `tell` hears of each row before it is judged.
    pub fn round(&self, stages: &[&Stage], tell: &mut dyn FnMut(Tell)) -> Vec<StageResult> {
        let needed = contract::needed(self.suite, stages, self.tier);
        let candidates = contract::candidates(&needed, self.tier);
        let queries: Vec<(String, u32, vsdk_catalog::DType)> = candidates
            .iter()
            .map(|(op, d)| (op.name().to_string(), op.version(), *d))
            .collect();
        let claimed = match self.backend.supports(&queries) {
            Ok(answers) => candidates
                .into_iter()
                .zip(answers)
                .filter(|(_, ok)| *ok)
                .map(|(c, _)| c)
                .collect::<Vec<_>>(),
            Err(f) => return vec![self.failed("kernel_supports", f)],
        };
        let cases = contract::cases(&needed, &claimed, self.seed);
        if cases.is_empty() {
            return Vec::new();
        }
        tell(Tell::Planned(cases.len() + 1));
        // The references first, once: their cost sets the timeout, as a
        // stage's does, and both passes are judged against them.
        let computed = Instant::now();
        let refs: Vec<Result<Expected, String>> = cases.iter().map(|c| self.expected(c)).collect();
        let timeout = self
            .timeout
            .unwrap_or_else(|| super::timeouts::of_reference(computed.elapsed()));
        let all: Vec<usize> = (0..cases.len()).collect();
        let mut results = Vec::with_capacity(cases.len() + 1);
        let start = Instant::now();
        let (p, inputs) = program(&cases, &all, 1);
        match self.run(&p, &inputs, self.seed, timeout) {
            Ok(executed) => {
                for (i, case) in cases.iter().enumerate() {
                    tell(Tell::Started(&case.name));
                    results.push(self.judge(
                        case,
                        &refs[i],
                        i,
                        &executed,
                        start.elapsed() / cases.len() as u32,
                        timeout,
                    ));
                }
            }
            // One bad case took the program down: each alone, so that every
            // case gets its own verdict.
            Err(_) => {
                for (i, case) in cases.iter().enumerate() {
                    tell(Tell::Started(&case.name));
                    let one = Instant::now();
                    let (p, inputs) = program(&cases, &[i], 1);
                    let r = match self.run(&p, &inputs, self.seed, timeout) {
                        Ok(executed) => {
                            self.judge(case, &refs[i], i, &executed, one.elapsed(), timeout)
                        }
                        Err(Failure::Provider(m)) if vips_data::is_unsupported_execute(&m) => {
                            let mut r = StageResult::empty(&case.name, self.tier, Round::Contract);
                            r.status = Status::NotSupported;
                            r.reason = Some(m);
                            r
                        }
                        Err(f) => self.failed(&case.name, f),
                    };
                    results.push(r);
                }
            }
        }
        // A claimed kernel may still refuse a dtype the component never
        // uses (a cast's target): noted, not held against it.
        let mut unsupported = Vec::new();
        let mut kept = Vec::with_capacity(results.len());
        let mut kept_cases = Vec::with_capacity(cases.len());
        for ((r, case), reference) in results.into_iter().zip(cases).zip(refs) {
            if r.status == Status::NotSupported && !case.required {
                unsupported.push(case.name);
            } else {
                kept.push(r);
                kept_cases.push((case, reference));
            }
        }
        tell(Tell::Started(CONCURRENCY));
        let mut concurrency = self.concurrently(&kept_cases, &kept, timeout);
        if !unsupported.is_empty() {
            concurrency.notes.push(format!(
                "UNSUPPORTED from execute, for dtypes the component does not use (not held against it): {}",
                unsupported.join(", ")
            ));
        }
        kept.push(concurrency);
        kept
    }

    /// Every case at once on [`THREADS`] threads, judged again.
    fn concurrently(
        &self,
        cases: &[(Case, Result<Expected, String>)],
        alone: &[StageResult],
        timeout: Duration,
    ) -> StageResult {
        let start = Instant::now();
        let thread_safe = self.backend.claims().is_some_and(|(p, _)| p.thread_safe);
        let mut r = StageResult::empty(CONCURRENCY, self.tier, Round::Contract);
        let passing: Vec<usize> = (0..cases.len())
            .filter(|&i| alone[i].status == Status::Pass)
            .collect();
        let only: Vec<Case> = cases.iter().map(|(c, _)| c.clone()).collect();
        let (p, inputs) = program(&only, &passing, THREADS);
        let seed = vips_execution::execution::SplitMix::derive(self.seed, &[u64::from(THREADS)]);
        let timeout = timeout.saturating_mul(2);
        r.timeout_seconds = timeout.as_secs_f64();
        match self.run(&p, &inputs, seed, timeout) {
            Ok(executed) => {
                r.timeout_seconds = (timeout + executed.allowance).as_secs_f64();
                let failed: Vec<(String, String)> = passing
                    .iter()
                    .map(|&i| {
                        let (case, reference) = &cases[i];
                        (
                            case,
                            self.judge(case, reference, i, &executed, Duration::ZERO, timeout),
                        )
                    })
                    .filter(|(_, j)| j.status != Status::Pass)
                    .map(|(case, j)| (case.name.clone(), j.reason.unwrap_or_default()))
                    .collect();
                r.status = if failed.is_empty() {
                    Status::Pass
                } else {
                    Status::Fail
                };
                let how = if thread_safe {
                    format!("{} calls on {THREADS} threads at once (the provider declares VSDK_CONCURRENCY_THREAD_SAFE)", passing.len())
                } else {
                    format!("{} calls from {THREADS} threads, serialised by the host (the provider declares VSDK_CONCURRENCY_SERIAL)", passing.len())
                };
                r.notes.push(how);
                if let Some((name, why)) = failed.first() {
                    r.reason = Some(format!(
                        "{} case(s) that pass alone fail when calls overlap, first `{name}`: {why}",
                        failed.len()
                    ));
                }
            }
            Err(f) => {
                super::stage::failed(&mut r, f);
                if let Some(reason) = &mut r.reason {
                    *reason = format!("while {THREADS} threads called at once: {reason}");
                }
            }
        }
        r.execution = Some(Execution::Decomposed);
        r.seconds = start.elapsed().as_secs_f64();
        r
    }

    fn run(
        &self,
        program: &Program,
        inputs: &[(String, HostTensor)],
        seed: u64,
        timeout: Duration,
    ) -> Result<Executed, Failure> {
        let args: Vec<(&str, &HostTensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        self.backend.run(program, &args, seed, timeout)
    }

    /// A row for something that never produced outputs.
    fn failed(&self, name: &str, f: Failure) -> StageResult {
        let mut r = StageResult::empty(name, self.tier, Round::Contract);
        super::stage::failed(&mut r, f);
        r
    }

    /// Case `i`'s verdict from a program that ran it.
    fn judge(
        &self,
        case: &Case,
        reference: &Result<Expected, String>,
        i: usize,
        executed: &Executed,
        seconds: Duration,
        timeout: Duration,
    ) -> StageResult {
        let mut r = StageResult::empty(&case.name, self.tier, Round::Contract);
        r.execution = Some(Execution::Decomposed);
        r.seconds = seconds.as_secs_f64();
        r.timeout_seconds = (timeout + executed.allowance).as_secs_f64();
        let p = prefix(i);
        let out = format!("{p}{}", case.node.output);
        let find = |values: &[(String, HostTensor)]| {
            values
                .iter()
                .find(|(n, _)| *n == out)
                .map(|(_, t)| t.clone())
        };
        r.findings = executed
            .findings
            .iter()
            .filter(|f| names_tensor(f).is_some_and(|t| t.starts_with(&p)))
            .cloned()
            .collect();
        let (Some(actual), Some(repeat)) = (find(&executed.values), find(&executed.repeat)) else {
            r.reason = Some(format!("`{}` did not come back", case.node.output));
            return r;
        };
        let judged = reference
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|reference| {
                let Expected {
                    value: expected,
                    bound,
                    sigma,
                    accumulates,
                } = reference;
                if expected.spec.shape != actual.spec.shape {
                    return Err(format!(
                        "the output has shape {:?}, the reference {:?}",
                        actual.spec.shape, expected.spec.shape
                    ));
                }
                let rules = Rules {
                    nan: NanPolicy::Allow,
                    allowed_over_fraction: 0.0,
                    statistics: Statistics::of(&TierParams::default_for(self.tier), *accumulates),
                };
                let params = TierParams::default_for(self.tier);
                let zeros = vec![0.0; bound.len()];
                let inputs: Vec<&HostTensor> = case.inputs.iter().collect();
                let judge = |t: &HostTensor| -> Result<Judgement, String> {
                    // A rasterizer's output against what its own choice of
                    // triangles makes correct; any other as it is.
                    let refs = (
                        expected,
                        bound.as_slice(),
                        sigma.as_deref().unwrap_or(&zeros),
                    );
                    let x = error_model::Expected::of(&case.node, &inputs, t, refs, &params)
                        .map_err(|e| e.to_string())?;
                    let sigma = sigma.as_ref().map(|_| &*x.sigma);
                    let mut j = error_model::judge(t, &x.values, &x.bound, sigma, rules);
                    if case.exact {
                        bitwise(t, expected, &mut j);
                    }
                    Ok(j)
                };
                let first = judge(&actual)?;
                let second = (repeat.bytes != actual.bytes)
                    .then(|| judge(&repeat))
                    .transpose()?;
                Ok((first, second, expected, bound))
            });
        let (judgement, second, expected, bound) = match judged {
            Ok(j) => j,
            Err(e) => {
                r.reason = Some(e);
                return r;
            }
        };
        let (drift, hash) = match Drift::with_hash(&actual, expected) {
            Ok(d) => d,
            Err(e) => {
                r.reason = Some(format!("`{}`: {e}", case.node.output));
                return r;
            }
        };
        let passed = judgement.passed && second.as_ref().is_none_or(|j| j.passed);
        if !passed {
            let j = if judgement.passed {
                r.findings.push(Finding::RepeatOutOfBounds {
                    tensor: case.node.output.clone(),
                });
                second.as_ref().unwrap_or(&judgement)
            } else {
                &judgement
            };
            r.reason = Some(format!("{}: {}", case.about, describe(j)));
        }
        let error_map = (!judgement.passed).then(|| {
            ErrorMap::of(
                &actual.to_f64_vec(),
                &expected.to_f64_vec(),
                bound,
                &actual.spec.shape,
                Placement::default(),
                NanPolicy::Allow,
            )
        });
        r.outputs.push(OutputResult {
            tensor: case.node.output.clone(),
            judgement,
            drift,
            sha256: hex::encode(hash),
            error_map,
            pixels: None,
        });
        r.status = if passed { Status::Pass } else { Status::Fail };
        // What the guards saw outranks the values.
        if let Some(f) = r.findings.iter().find(|f| f.scribbled()).cloned() {
            r.status = Status::OutOfBounds;
            r.reason = Some(format!("{}: {f}", case.about));
        } else if let Some(f) = r
            .findings
            .iter()
            .find(|f| matches!(f, Finding::Unwritten { .. }))
            .cloned()
        {
            r.status = Status::Unwritten;
            r.reason = Some(format!("{}: {f}", case.about));
        }
        r
    }

    /// The reference output, its bound, σ and whether its mean is tested.
    fn expected(&self, case: &Case) -> Result<Expected, String> {
        let ins: Vec<&HostTensor> = case.inputs.iter().collect();
        if case.exact {
            let dev = self.reference;
            let up = ins
                .iter()
                .map(|t| dev.upload(t))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|up| {
                    let refs: Vec<_> = up.iter().collect();
                    let op = case.node.op;
                    dev.execute(op.name(), op.version(), &case.node.attrs, &refs)
                })
                .and_then(|out| dev.download(&out[0]))
                .map_err(|e| format!("the reference could not run: {e}"))?;
            return Ok(Expected {
                bound: vec![0.0; up.spec.numel()],
                value: up,
                sigma: None,
                accumulates: false,
            });
        }
        let out = vsdk_catalog::Node::infer(
            case.node.op,
            &case.node.attrs,
            &case
                .inputs
                .iter()
                .map(|t| t.spec.clone())
                .collect::<Vec<_>>(),
        )
        .map_err(|e| e.to_string())?
        .1[0]
            .dtype;
        let ev = error_model::node_reference(
            &case.node,
            self.tier.float_dtype(),
            &ins,
            out,
            self.reference,
            &TierParams::default_for(self.tier),
        )
        .map_err(|e| format!("the reference could not run: {e}"))?;
        // An input broadcast with stride 0 repeats its values, and with them
        // the rounding errors of every product they enter: the errors are
        // not independent, so their mean is not tested (the stage graph's
        // rule for an error shared along a broadcast).
        let repeated = case
            .layouts
            .iter()
            .flatten()
            .any(|l| l.strides.contains(&0));
        Ok(Expected {
            value: ev.value,
            bound: ev.bound,
            sigma: Some(ev.sigma),
            accumulates: ev.accumulates && !repeated,
        })
    }
}

/// What a case is judged against: the reference's output and bound (zero
/// for exact cases), σ, and whether its mean is tested.
struct Expected {
    value: HostTensor,
    bound: Vec<f64>,
    sigma: Option<Vec<f64>>,
    accumulates: bool,
}

/// The tensor a finding names.
fn names_tensor(f: &Finding) -> Option<&str> {
    match f {
        Finding::OutOfBounds { tensor, .. }
        | Finding::Corrupted { tensor, .. }
        | Finding::Unwritten { tensor, .. }
        | Finding::Nondeterministic { tensor, .. }
        | Finding::RepeatOutOfBounds { tensor } => Some(tensor),
    }
}

/// Exact cases: every element's bits (any NaN matches a NaN; a 64-bit
/// integer is compared whole, not through float64).
fn bitwise(actual: &HostTensor, expected: &HostTensor, j: &mut Judgement) {
    if actual.spec.dtype != expected.spec.dtype {
        return;
    }
    let width = actual.spec.dtype.size_bytes();
    let (a, e) = (actual.to_f64_vec(), expected.to_f64_vec());
    let differ = actual
        .bytes
        .chunks(width)
        .zip(expected.bytes.chunks(width))
        .enumerate()
        .filter(|(i, (x, y))| x != y && !(a[*i].is_nan() && e[*i].is_nan()))
        .count() as u64;
    if differ > j.over_bound {
        j.over_bound = differ;
        j.passed = false;
        j.reason.get_or_insert_with(|| {
            format!("{differ} element(s) differ in their bits (the catalog defines every bit)")
        });
    }
}

/// A failed judgement in one line: how many, and the worst element.
fn describe(j: &Judgement) -> String {
    let worst = j
        .worst
        .as_ref()
        .map(|w| {
            format!(
                "; worst at {:?}: {} where the reference is {} (bound {:.3e})",
                w.index, w.actual, w.reference, w.bound
            )
        })
        .unwrap_or_default();
    format!(
        "{} of {} elements out of bounds ({}){worst}",
        j.over_bound,
        j.elements,
        j.reason.as_deref().unwrap_or("out of bounds")
    )
}
