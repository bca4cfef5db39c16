//! Counting real processes from /proc, for the tests of stdio servers (core's and the API
//! tests', included with `#[path]`): what a test marked, and what this test process started.

/// Every pid in /proc.
fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
}

/// The processes whose environment carries `WB_TEST_MARK=<mark>` (every server and
/// grandchild a test started with that variable).
pub fn marked(mark: &str) -> Vec<u32> {
    let needle = format!("WB_TEST_MARK={mark}");
    pids()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|var| var == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// This test process's children (the guards it started, zombies included).
#[allow(dead_code)]
pub fn children() -> Vec<u32> {
    let me = std::process::id();
    pids()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(me)
        })
        .collect()
}
