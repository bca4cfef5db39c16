//! Operator metrics in the Prometheus text format (`/metrics`): tool calls by tool, surface and
//! outcome with a latency histogram (counted in-process as calls finish), and gauges read when
//! scraped (upstream breakers and in-flight calls, the database pool, pending confirmations,
//! callbacks due). Counters are per process; a scraper sums instances.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Latency histogram bounds, in seconds.
const BUCKETS_S: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Default, Clone)]
struct Series {
    count: u64,
    sum_s: f64,
    /// Per bucket of `BUCKETS_S`: calls at most that long.
    le: Vec<u64>,
}

/// Per tool, then per (surface, outcome): looked up by `&str` first, so a call to a tool seen
/// before allocates nothing on the call's path.
type SeriesMap = BTreeMap<String, BTreeMap<(&'static str, &'static str), Series>>;

/// Calls counted since the process started.
#[derive(Default)]
pub struct CallMetrics {
    series: Mutex<SeriesMap>,
}

impl CallMetrics {
    /// One finished call: its tool (calls to unknown tools come under one name), surface,
    /// outcome (`ok` or the error code) and handler time.
    pub fn observe(&self, tool: &str, surface: &'static str, outcome: &'static str, micros: u64) {
        let secs = micros as f64 / 1e6;
        let mut map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let by_tool = match map.get_mut(tool) {
            Some(m) => m,
            None => map.entry(tool.to_owned()).or_default(),
        };
        let s = by_tool.entry((surface, outcome)).or_insert_with(|| Series {
            le: vec![0; BUCKETS_S.len()],
            ..Default::default()
        });
        s.count += 1;
        s.sum_s += secs;
        for (i, b) in BUCKETS_S.iter().enumerate() {
            if secs <= *b {
                s.le[i] += 1;
            }
        }
    }

    /// `workbench_tool_calls_total` and `workbench_tool_call_duration_seconds`.
    pub fn render(&self, out: &mut String) {
        let map = self
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let map: Vec<((&str, &str, &str), &Series)> = map
            .iter()
            .flat_map(|(tool, m)| {
                m.iter()
                    .map(move |((surface, outcome), s)| ((tool.as_str(), *surface, *outcome), s))
            })
            .collect();
        out.push_str("# HELP workbench_tool_calls_total Tool calls finished, by tool, surface and outcome.\n# TYPE workbench_tool_calls_total counter\n");
        for ((tool, surface, outcome), s) in &map {
            let _ = writeln!(
                out,
                "workbench_tool_calls_total{{tool=\"{}\",surface=\"{surface}\",outcome=\"{}\"}} {}",
                escape(tool),
                escape(outcome),
                s.count
            );
        }
        out.push_str("# HELP workbench_tool_call_duration_seconds Handler time of tool calls.\n# TYPE workbench_tool_call_duration_seconds histogram\n");
        for ((tool, surface, outcome), s) in &map {
            let labels = format!(
                "tool=\"{}\",surface=\"{surface}\",outcome=\"{}\"",
                escape(tool),
                escape(outcome)
            );
            for (b, n) in BUCKETS_S.iter().zip(&s.le) {
                let _ = writeln!(
                    out,
                    "workbench_tool_call_duration_seconds_bucket{{{labels},le=\"{b}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "workbench_tool_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "workbench_tool_call_duration_seconds_sum{{{labels}}} {}",
                s.sum_s
            );
            let _ = writeln!(
                out,
                "workbench_tool_call_duration_seconds_count{{{labels}}} {}",
                s.count
            );
        }
    }
}

/// A label value as the text format wants it: backslash, quote and newline escaped.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One gauge family with its samples (labels already rendered).
pub fn gauge(out: &mut String, name: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_render_as_counters_and_cumulative_histograms() {
        let m = CallMetrics::default();
        m.observe("github_get_user", "mcp", "ok", 3_000);
        m.observe("github_get_user", "mcp", "ok", 40_000);
        m.observe("say \"hi\"", "rest", "TOOL_ERROR", 1_000);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("workbench_tool_calls_total{tool=\"github_get_user\",surface=\"mcp\",outcome=\"ok\"} 2"), "{out}");
        assert!(out.contains("workbench_tool_call_duration_seconds_bucket{tool=\"github_get_user\",surface=\"mcp\",outcome=\"ok\",le=\"0.005\"} 1"), "{out}");
        assert!(out.contains("workbench_tool_call_duration_seconds_bucket{tool=\"github_get_user\",surface=\"mcp\",outcome=\"ok\",le=\"0.05\"} 2"), "{out}");
        assert!(out.contains("le=\"+Inf\"} 2"));
        assert!(
            out.contains("tool=\"say \\\"hi\\\"\""),
            "label values are escaped: {out}"
        );
    }
}
