//! `vsdk_results_*`, `vsdk_run`, `vsdk_check`: stage results as C sees
//! them, from a run on a provider or from tensors the engine computed.

use crate::boundary::{self, c_string, guard, Error, Result, Tagged};
use crate::provider::{provider_error, HostProvider};
use crate::suite::SuiteHandle;
use crate::tensors::{host_tensor, Tensors};
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use vips_sdk::compare::Tier;
use vips_sdk::execution::Backend;
use vips_sdk::isolation::{Failure, Worker};
use vips_sdk::runner::{self, Mode, RunOptions, RunReport, Status};
use vips_sdk::Provider;
use vsdk_ffi::engine::{
    vsdk_check_args_t, vsdk_end_to_end_record_t, vsdk_error_t, vsdk_host_provider_t,
    vsdk_output_record_t, vsdk_results_info_t, vsdk_results_t, vsdk_run_options_t,
    vsdk_stage_record_t, vsdk_suite_t, VSDK_STATUS_NOT_FOUND,
};

/// The object behind `vsdk_results_t*`: a report flattened into records.
#[repr(C)]
pub struct Results {
    magic: u64,
    passed: bool,
    records: Vec<Record>,
    end_to_end: Vec<EndToEnd>,
}

struct EndToEnd {
    tensor: CString,
    tier: CString,
    record: vsdk_end_to_end_record_t,
}

struct Record {
    stage: CString,
    tier: CString,
    round: CString,
    status: Status,
    label: CString,
    execution: CString,
    reason: Option<CString>,
    max_e: f64,
    seconds: f64,
    outputs: Vec<Output>,
}

struct Output {
    tensor: CString,
    record: vsdk_output_record_t,
}

// SAFETY: `Output::record` holds only numbers and a NULL pointer (the
// tensor name is set from `Output::tensor` when handed out); everything is
// immutable after construction.
unsafe impl Send for Output {}
// SAFETY: as above.
unsafe impl Sync for Output {}
// SAFETY: as for `Output`: numbers and NULL pointers, set when handed out.
unsafe impl Send for EndToEnd {}
// SAFETY: as above.
unsafe impl Sync for EndToEnd {}

impl Tagged for Results {
    const MAGIC: u64 = 0x7673_646b_5273_6c74; // "vsdkRslt"
    const KIND: &'static str = "results";
    fn kill(&mut self) {
        self.magic = 0;
    }
}

fn status_code(s: Status) -> i32 {
    use vsdk_ffi::engine as c;
    match s {
        Status::Pass => c::VSDK_STAGE_PASS,
        Status::Fail => c::VSDK_STAGE_FAIL,
        Status::NotSupported => c::VSDK_STAGE_NOT_SUPPORTED,
        Status::Error => c::VSDK_STAGE_ERROR,
        Status::Crashed => c::VSDK_STAGE_CRASHED,
        Status::Timeout => c::VSDK_STAGE_TIMEOUT,
        Status::Missing => c::VSDK_STAGE_MISSING,
        Status::OutOfBounds => c::VSDK_STAGE_OUT_OF_BOUNDS,
        Status::Unwritten => c::VSDK_STAGE_UNWRITTEN,
        Status::MemoryLimit => c::VSDK_STAGE_MEMORY_LIMIT,
        Status::ProcessesLeft => c::VSDK_STAGE_PROCESSES_LEFT,
        Status::Flaky => c::VSDK_STAGE_FLAKY,
        Status::ExpectedFail => c::VSDK_STAGE_EXPECTED_FAIL,
        Status::UnexpectedPass => c::VSDK_STAGE_UNEXPECTED_PASS,
        Status::NotCaptured => c::VSDK_STAGE_NOT_CAPTURED,
    }
}

impl Results {
    fn of(report: &RunReport, suite: &vips_sdk::suite::Suite) -> Results {
        let mut records = Vec::new();
        for tier in &report.tiers {
            for r in tier
                .stages
                .iter()
                .chain(&tier.differential)
                .chain(&tier.contract)
            {
                let max_e = r
                    .outputs
                    .iter()
                    .map(|o| o.judgement.max_e)
                    .fold(f64::NAN, f64::max);
                let outputs = r
                    .outputs
                    .iter()
                    .map(|o| {
                        let j = &o.judgement;
                        let shape = suite.spec(&o.tensor).map(|s| s.shape.clone());
                        Output {
                            tensor: c_string(&o.tensor),
                            record: vsdk_output_record_t {
                                struct_size: 0,
                                tensor: std::ptr::null(),
                                passed: j.passed as i32,
                                reserved: 0,
                                elements: j.elements,
                                over_bound: j.over_bound,
                                max_e: j.max_e,
                                margin: 1.0 - j.max_e,
                                p50_e: j.p50_e,
                                p99_e: j.p99_e,
                                max_abs_error: j.max_abs_error,
                                golden_max_abs_error: o.drift.max_abs_error,
                                golden_rel_l2_error: o.drift.rel_l2_error,
                                golden_cosine_similarity: o.drift.cosine_similarity,
                                worst_index: j
                                    .worst
                                    .as_ref()
                                    .zip(shape.as_deref())
                                    .map_or(u64::MAX, |(w, shape)| flat_index(&w.index, shape)),
                                worst_actual: j.worst.as_ref().map_or(f64::NAN, |w| w.actual),
                                worst_reference: j.worst.as_ref().map_or(f64::NAN, |w| w.reference),
                                worst_bound: j.worst.as_ref().map_or(f64::NAN, |w| w.bound),
                                rms_t: j.rms_t.unwrap_or(f64::NAN),
                                tolerance_factor: j.tolerance_factor.unwrap_or(f64::NAN),
                            },
                        }
                    })
                    .collect();
                let execution = r.execution.map_or("", |e| match e {
                    runner::Execution::Fused => "fused",
                    runner::Execution::Decomposed => "decomposed",
                    runner::Execution::Captured => "captured",
                });
                records.push(Record {
                    stage: c_string(&r.stage),
                    tier: c_string(r.tier.name()),
                    round: c_string(match r.round {
                        runner::Round::Main => "main",
                        runner::Round::Differential => "differential",
                        runner::Round::Contract => "contract",
                    }),
                    status: r.status,
                    label: c_string(r.status.label()),
                    execution: c_string(execution),
                    reason: r.reason.as_deref().map(c_string),
                    max_e,
                    seconds: r.seconds,
                    outputs,
                });
            }
        }
        let end_to_end = report
            .tiers
            .iter()
            .flat_map(|t| t.end_to_end.iter().map(move |e| (t.tier, e)))
            .map(|(tier, e)| EndToEnd {
                tensor: c_string(&e.tensor),
                tier: c_string(tier.name()),
                record: vsdk_end_to_end_record_t {
                    struct_size: 0,
                    tensor: std::ptr::null(),
                    tier: std::ptr::null(),
                    passed: e.passed as i32,
                    reserved: 0,
                    rel_l2_error: e.drift.rel_l2_error,
                    cosine_similarity: e.drift.cosine_similarity,
                    max_abs_error: e.drift.max_abs_error,
                    nonfinite_mismatches: e.drift.nonfinite_mismatches,
                    max_rel_l2_error: e.criterion.rel_l2,
                    min_cosine_similarity: e.criterion.cosine,
                },
            })
            .collect();
        Results {
            magic: Results::MAGIC,
            passed: report.passed,
            records,
            end_to_end,
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_results_free(results: *mut vsdk_results_t) {
    // SAFETY: the header's contract: a freed handle is NULL or one this library made, and is not used again.
    boundary::quiet((), || unsafe { boundary::free::<Results>(results.cast()) })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_results_info(
    results: *const vsdk_results_t,
    out: *mut vsdk_results_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_results_info", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let r = unsafe { boundary::borrow::<Results>(results.cast(), "results") }?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe {
            boundary::write_out_grown(
                out,
                "out",
                vsdk_results_info_t {
                    struct_size: 0,
                    passed: r.passed as i32,
                    record_count: r.records.len(),
                    end_to_end_count: r.end_to_end.len(),
                },
                std::mem::offset_of!(vsdk_results_info_t, end_to_end_count),
            )
        }
    })
}

fn record(r: &Results, index: usize) -> Result<&Record> {
    r.records.get(index).ok_or_else(|| {
        Error::new(
            VSDK_STATUS_NOT_FOUND,
            format!("record {index}: there are {} record(s)", r.records.len()),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_results_record(
    results: *const vsdk_results_t,
    index: usize,
    out: *mut vsdk_stage_record_t,
) -> *mut vsdk_error_t {
    guard("vsdk_results_record", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let r = unsafe { boundary::borrow::<Results>(results.cast(), "results") }?;
        let rec = record(r, index)?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe {
            boundary::write_out(
                out,
                "out",
                vsdk_stage_record_t {
                    struct_size: 0,
                    stage: rec.stage.as_ptr(),
                    tier: rec.tier.as_ptr(),
                    round: rec.round.as_ptr(),
                    status: status_code(rec.status),
                    reserved: 0,
                    status_label: rec.label.as_ptr(),
                    execution: rec.execution.as_ptr(),
                    reason: rec.reason.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                    max_e: rec.max_e,
                    margin: 1.0 - rec.max_e,
                    seconds: rec.seconds,
                    output_count: rec.outputs.len(),
                },
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_results_output(
    results: *const vsdk_results_t,
    index: usize,
    output: usize,
    out: *mut vsdk_output_record_t,
) -> *mut vsdk_error_t {
    guard("vsdk_results_output", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let r = unsafe { boundary::borrow::<Results>(results.cast(), "results") }?;
        let rec = record(r, index)?;
        let o = rec.outputs.get(output).ok_or_else(|| {
            Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!(
                    "output {output} of record {index}: the stage has {} judged output(s)",
                    rec.outputs.len()
                ),
            )
        })?;
        let mut value = o.record;
        value.tensor = o.tensor.as_ptr();
        let first = std::mem::offset_of!(vsdk_output_record_t, worst_index);
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe { boundary::write_out_grown(out, "out", value, first) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_results_end_to_end(
    results: *const vsdk_results_t,
    index: usize,
    out: *mut vsdk_end_to_end_record_t,
) -> *mut vsdk_error_t {
    guard("vsdk_results_end_to_end", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let r = unsafe { boundary::borrow::<Results>(results.cast(), "results") }?;
        let e = r.end_to_end.get(index).ok_or_else(|| {
            Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!(
                    "end-to-end record {index}: there are {} (chained runs and checks only)",
                    r.end_to_end.len()
                ),
            )
        })?;
        let mut value = e.record;
        value.tensor = e.tensor.as_ptr();
        value.tier = e.tier.as_ptr();
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe { boundary::write_out(out, "out", value) }
    })
}

/// The row-major index of `index` in `shape`.
fn flat_index(index: &[usize], shape: &[usize]) -> u64 {
    index
        .iter()
        .zip(shape)
        .fold(0u64, |acc, (&i, &d)| acc * d as u64 + i as u64)
}

/// `count` C strings at `ptr`.
///
/// # Safety
/// `ptr` is NULL or points to `count` pointers, each NULL or a NUL-terminated
/// string valid for `'a`.
unsafe fn str_array<'a>(
    ptr: *const *const c_char,
    count: usize,
    what: &str,
) -> Result<Vec<&'a str>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(Error::invalid(format!(
            "`{what}` is NULL with a count of {count}"
        )));
    }
    if count > 1 << 16 {
        return Err(Error::invalid(format!(
            "`{what}`: {count} entries, more than 65536"
        )));
    }
    (0..count)
        .map(|i| {
            // SAFETY: non-null; the caller passes `count` pointers.
            let p = unsafe { ptr.add(i).read_unaligned() };
            // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
            unsafe { boundary::str_arg(p, &format!("{what}[{i}]")) }
        })
        .collect()
}

fn tier(name: &str) -> Result<Tier> {
    Tier::parse(name).map_err(Error::invalid)
}

/// The SDK's CPU reference provider, device 0, opened once per process
/// (every run and check judges against it; a failure is retried next call).
fn reference() -> Result<vips_sdk::Device> {
    static REFERENCE: std::sync::OnceLock<vips_sdk::Device> = std::sync::OnceLock::new();
    if let Some(d) = REFERENCE.get() {
        return Ok(d.clone());
    }
    let device = Provider::open_by_name("cpu")
        .and_then(|p| p.device(0))
        .map_err(|e| {
            let mut e = provider_error(e);
            e.message = format!("the reference provider `cpu`: {}", e.message);
            e
        })?;
    Ok(REFERENCE.get_or_init(|| device).clone())
}

/// A glob matching exactly the stage `name`.
fn exact_stage(name: &str) -> Result<globset::GlobMatcher> {
    globset::Glob::new(&globset::escape(name))
        .map(|g| g.compile_matcher())
        .map_err(|e| Error::invalid(e.to_string()))
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_run(
    suite: *const vsdk_suite_t,
    provider: *const vsdk_host_provider_t,
    options: *const vsdk_run_options_t,
    out: *mut *mut vsdk_results_t,
) -> *mut vsdk_error_t {
    guard("vsdk_run", || {
        boundary::check_out(out, "out")?;
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let s = unsafe { boundary::borrow::<SuiteHandle>(suite.cast(), "suite") }?;
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let p = unsafe { boundary::borrow::<HostProvider>(provider.cast(), "provider") }?;
        // SAFETY: the header's contract: an arguments struct is NULL or holds `struct_size` readable bytes.
        let o = unsafe { boundary::read_in(options, "options") }?;
        // SAFETY: the header's contract: `tiers` holds `tier_count` strings.
        let tiers = unsafe { str_array(o.tiers, o.tier_count, "options->tiers") }?
            .into_iter()
            .map(tier)
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let stage_glob = unsafe { boundary::opt_str_arg(o.stage_glob, "options->stage_glob") }?
            .map(|g| {
                globset::Glob::new(g)
                    .map(|g| g.compile_matcher())
                    .map_err(|e| Error::invalid(format!("options->stage_glob: {e}")))
            })
            .transpose()?;
        let mut opts = RunOptions {
            mode: if o.chained != 0 {
                Mode::Chained
            } else {
                Mode::Isolated
            },
            tiers: if tiers.is_empty() {
                vec![Tier::Fp32]
            } else {
                tiers
            },
            stage_glob,
            differential: o.no_differential == 0,
            ..RunOptions::default()
        };
        if o.seed != 0 {
            opts.seed = o.seed;
        }
        if runner::select(&s.suite, &opts).is_empty() {
            return Err(Error::new(
                VSDK_STATUS_NOT_FOUND,
                "no stage matches options->stage_glob",
            ));
        }
        let backend = if o.in_process != 0 {
            Backend::InProcess(p.provider.device(o.device).map_err(provider_error)?)
        } else {
            // The CLI's worker: nothing in its process tells a driver that an
            // engine, not a certification, runs it.
            let library = p.provider.info().library.clone();
            let command = vips_sdk::runner::worker_command(&s.suite, &opts, &library, None)
                .map_err(|m| Error::new(VSDK_STATUS_NOT_FOUND, m))?;
            let worker = Worker::new(command, library, o.device);
            if let Err(Failure::Provider(m)) = worker.open() {
                return Err(Error::invalid(m));
            }
            Backend::Isolated(Box::new(worker))
        };
        let report = runner::run_on(&s.suite, backend, &reference()?, &opts, &mut |_| {})
            .map_err(|e| Error::new(vsdk_ffi::engine::VSDK_STATUS_INVALID_FILE, e.to_string()))?;
        // SAFETY: `out` was checked non-NULL (`check_out`) and, by the header's contract, can hold a handle.
        unsafe {
            boundary::write_handle(
                out,
                "out",
                boundary::into_handle(Results::of(&report, &s.suite)).cast(),
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_check(
    suite: *const vsdk_suite_t,
    args: *const vsdk_check_args_t,
    out: *mut *mut vsdk_results_t,
) -> *mut vsdk_error_t {
    guard("vsdk_check", || {
        boundary::check_out(out, "out")?;
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let s = unsafe { boundary::borrow::<SuiteHandle>(suite.cast(), "suite") }?;
        let first = std::mem::offset_of!(vsdk_check_args_t, tensors);
        // SAFETY: the header's contract: an arguments struct is NULL or holds `struct_size` readable bytes; it is integers and pointers.
        let a = unsafe { boundary::read_in_grown(args, "args", first) }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let stage_name = unsafe { boundary::opt_str_arg(a.stage, "args->stage") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let tier = tier(unsafe { boundary::opt_str_arg(a.tier, "args->tier") }?.unwrap_or("fp32"))?;
        // SAFETY: the header's contract: `names` holds `output_count` strings.
        let names = unsafe { str_array(a.names, a.output_count, "args->names") }?;
        if a.output_count > 0 && a.outputs.is_null() {
            return Err(Error::invalid("`args->outputs` is NULL"));
        }
        let mut captured = if a.tensors.is_null() {
            HashMap::new()
        } else {
            // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
            unsafe { boundary::borrow::<Tensors>(a.tensors.cast(), "args->tensors") }?.by_name()
        };
        let stage = match stage_name {
            Some(name) => Some(
                s.suite
                    .document
                    .stages
                    .iter()
                    .find(|st| st.name == name)
                    .ok_or_else(|| {
                        Error::new(
                            VSDK_STATUS_NOT_FOUND,
                            format!(
                                "no stage `{name}` in suite `{}`",
                                s.suite.document.component.id
                            ),
                        )
                    })?,
            ),
            None if names.is_empty() => None,
            None => {
                return Err(Error::invalid(
                    "`args->outputs` are given without `args->stage`",
                ))
            }
        };
        if let Some(stage) = stage {
            for (i, name) in names.iter().enumerate() {
                if !stage.outputs.iter().any(|o| o == name) {
                    return Err(Error::invalid(format!(
                        "args->names[{i}]: `{name}` is not an output of stage `{}` (its outputs: {})",
                        stage.name,
                        stage.outputs.join(", ")
                    )));
                }
                let declared = s
                    .suite
                    .spec(name)
                    .map(|sp| sp.shape.clone())
                    .unwrap_or_default();
                // SAFETY: non-null (checked) and `output_count` descriptors long.
                let t = unsafe { a.outputs.add(i).read_unaligned() };
                let what = format!("args->outputs[{i}] (`{name}`)");
                // SAFETY: the header's contract for `outputs`: each
                // descriptor's arrays and the memory it describes are readable.
                let t = unsafe { host_tensor(&t, Some(&declared), &what) }?;
                if captured.insert(name.to_string(), t).is_some() {
                    return Err(Error::invalid(format!(
                        "args->names[{i}]: `{name}` is given twice (in `names` or in `tensors`)"
                    )));
                }
            }
            if let Some(missing) = stage.outputs.iter().find(|o| !captured.contains_key(*o)) {
                return Err(Error::invalid(format!(
                    "stage `{}` also outputs `{missing}`: give every output",
                    stage.name
                )));
            }
        }
        let mut opts = RunOptions {
            mode: if a.chained != 0 {
                Mode::Chained
            } else {
                Mode::Isolated
            },
            tiers: vec![tier],
            stage_glob: stage.map(|st| exact_stage(&st.name)).transpose()?,
            differential: false,
            ..RunOptions::default()
        };
        // VSDK_CHECK_AUTO: as the CLI's `check` without --mode.
        if a.chained < 0 {
            let stages = runner::select(&s.suite, &opts);
            opts.mode = runner::check_mode(&s.suite, &captured, &stages).0;
        }
        let report = runner::check(&s.suite, &captured, "engine", &reference()?, &opts)
            .map_err(|e| Error::invalid(e.to_string()))?;
        // SAFETY: `out` was checked non-NULL (`check_out`) and, by the header's contract, can hold a handle.
        unsafe {
            boundary::write_handle(
                out,
                "out",
                boundary::into_handle(Results::of(&report, &s.suite)).cast(),
            )
        }
    })
}
