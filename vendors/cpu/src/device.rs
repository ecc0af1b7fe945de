//! What the CPU provider reports about the machine.

use std::ffi::CString;

pub struct DeviceInfo {
    pub name: CString,
    pub driver_version: CString,
    pub stable_id: CString,
    pub memory_bytes: u64,
}

fn first_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim())
}

fn cstring(s: String) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

impl DeviceInfo {
    pub fn probe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let model = first_value(&cpuinfo, "model name").unwrap_or(std::env::consts::ARCH);
        let threads = rayon::current_num_threads();
        let memory_kib: u64 = first_value(&meminfo, "MemTotal")
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        DeviceInfo {
            name: cstring(format!("{model} ({threads} threads)")),
            driver_version: cstring(format!("vsdk-provider-cpu {}", env!("CARGO_PKG_VERSION"))),
            stable_id: cstring(format!(
                "cpu:{}:{}",
                std::env::consts::ARCH,
                model.replace(' ', "_")
            )),
            memory_bytes: memory_kib * 1024,
        }
    }
}
