//! What a root test looks for after a run, to prove it left nothing
//! behind: namespaces, processes and iptables rules; and the counts the
//! live experiments' JSON reports carry. Each test file uses some of them.
#![allow(dead_code)]

use std::process::Command;

use serde_json::Value;

/// The unsigned integer at `key` in `value`; panics naming the key.
pub fn count(value: &Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {value}"))
}

/// Network namespaces whose name starts with `prefix`.
pub fn namespaces(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            text.contains(needle).then_some(text)
        })
        .collect()
}

/// iptables rules (every table) that mention `needle`.
pub fn rules_mentioning(needle: &str) -> Vec<String> {
    Command::new("iptables-save")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.contains(needle))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
