//! `vsdk_verify_report`, `vsdk_report_*`: a certification report checked
//! before an engine trusts a driver (docs/report-format.md).

use crate::boundary::{self, c_string, guard, Error, Tagged};
use std::ffi::CString;
use std::path::Path;
use vips_sdk::certify::{self, keys, SubjectFiles, Verdict};
use vsdk_ffi::engine::{
    vsdk_error_t, vsdk_report_info_t, vsdk_report_t, vsdk_verify_args_t, VSDK_STATUS_INVALID_FILE,
    VSDK_STATUS_NOT_VERIFIED,
};

/// The object behind `vsdk_report_t*`: what a verified report says.
#[repr(C)]
pub struct Report {
    magic: u64,
    certified: bool,
    strings: [CString; 9],
}

impl Tagged for Report {
    const MAGIC: u64 = 0x7673_646b_5270_7274; // "vsdkRprt"
    const KIND: &'static str = "report";
    fn kill(&mut self) {
        self.magic = 0;
    }
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_verify_report(
    args: *const vsdk_verify_args_t,
    out: *mut *mut vsdk_report_t,
) -> *mut vsdk_error_t {
    guard("vsdk_verify_report", || {
        boundary::check_out(out, "out")?;
        // SAFETY: the header's contract: an arguments struct is NULL or holds `struct_size` readable bytes.
        let a = unsafe { boundary::read_in(args, "args") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let report = unsafe { boundary::str_arg(a.report, "args->report") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let key = unsafe { boundary::str_arg(a.public_key, "args->public_key") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let provider = unsafe { boundary::opt_str_arg(a.provider, "args->provider") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let golden = unsafe { boundary::opt_str_arg(a.golden, "args->golden") }?;
        let invalid_file = |m: String| Error::new(VSDK_STATUS_INVALID_FILE, m);
        let key = keys::read_public(Path::new(key)).map_err(|e| invalid_file(e.to_string()))?;
        let envelope =
            certify::read_envelope(Path::new(report)).map_err(|e| invalid_file(e.to_string()))?;
        let files = SubjectFiles::hash(provider.map(Path::new), golden.map(Path::new))
            .map_err(|e| invalid_file(e.to_string()))?;
        let statement = certify::verify(&envelope, &[key], &files)
            .map_err(|e| Error::new(VSDK_STATUS_NOT_VERIFIED, format!("{report}: {e}")))?;
        let p = &statement.predicate;
        let report = Report {
            magic: Report::MAGIC,
            certified: p.verdict == Verdict::Certified,
            strings: [
                c_string(p.verdict.label()),
                c_string(&p.reasons.join("\n")),
                c_string(&p.component.id),
                c_string(&p.component.version),
                c_string(p.tier.name()),
                c_string(&p.provider.name),
                c_string(&p.provider.library_sha256),
                c_string(&p.device.name),
                c_string(&p.run.finished),
            ],
        };
        // SAFETY: `out` was checked non-NULL (`check_out`) and, by the header's contract, can hold a handle.
        unsafe { boundary::write_handle(out, "out", boundary::into_handle(report).cast()) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_report_free(report: *mut vsdk_report_t) {
    // SAFETY: the header's contract: a freed handle is NULL or one this library made, and is not used again.
    boundary::quiet((), || unsafe { boundary::free::<Report>(report.cast()) })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_report_info(
    report: *const vsdk_report_t,
    out: *mut vsdk_report_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_report_info", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let r = unsafe { boundary::borrow::<Report>(report.cast(), "report") }?;
        let [verdict, reasons, component, version, tier, provider, sha, device, finished] =
            &r.strings;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe {
            boundary::write_out(
                out,
                "out",
                vsdk_report_info_t {
                    struct_size: 0,
                    certified: r.certified as i32,
                    reserved: 0,
                    verdict: verdict.as_ptr(),
                    reasons: reasons.as_ptr(),
                    component: component.as_ptr(),
                    component_version: version.as_ptr(),
                    tier: tier.as_ptr(),
                    provider: provider.as_ptr(),
                    provider_sha256: sha.as_ptr(),
                    device: device.as_ptr(),
                    finished: finished.as_ptr(),
                },
            )
        }
    })
}
