//! Process-wide counters and histograms, rendered in the Prometheus text format at `/metrics`.
//!
//! Hand-rolled with atomics: the handful of series we export does not justify a metrics framework,
//! and recording must cost nothing on the dispatch path.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// A histogram with fixed millisecond buckets.
pub struct Histogram {
    bounds: &'static [u64],
    buckets: Vec<AtomicU64>,
    sum: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [u64]) -> Self {
        Histogram {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, ms: u64) {
        for (b, bound) in self.buckets.iter().zip(self.bounds) {
            if ms <= *bound {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.sum.fetch_add(ms, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, bound) in self.buckets.iter().zip(self.bounds) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{}\"}} {}",
                *bound as f64 / 1000.0,
                b.load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum {}\n{name}_count {count}",
            self.sum.load(Ordering::Relaxed) as f64 / 1000.0
        );
    }
}

const LATENCY_BOUNDS_MS: &[u64] = &[1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

/// Every metric the admin exports.
pub struct Metrics {
    pub trigger_lateness: Histogram,
    pub dispatch_latency: Histogram,
    pub fires_total: AtomicU64,
    pub dispatch_failures: AtomicU64,
    /// HTTP requests that carried runs to executors: one per run, or one per batch of runs.
    pub dispatch_requests: AtomicU64,
    pub runs_succeeded: AtomicU64,
    pub runs_failed: AtomicU64,
    pub runs_timed_out: AtomicU64,
    pub runs_killed: AtomicU64,
    pub runs_lost: AtomicU64,
    pub callbacks_received: AtomicU64,
    pub callbacks_unknown: AtomicU64,
    pub callbacks_duplicate: AtomicU64,
    pub registry_size: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            trigger_lateness: Histogram::new(LATENCY_BOUNDS_MS),
            dispatch_latency: Histogram::new(LATENCY_BOUNDS_MS),
            fires_total: AtomicU64::new(0),
            dispatch_failures: AtomicU64::new(0),
            dispatch_requests: AtomicU64::new(0),
            runs_succeeded: AtomicU64::new(0),
            runs_failed: AtomicU64::new(0),
            runs_timed_out: AtomicU64::new(0),
            runs_killed: AtomicU64::new(0),
            runs_lost: AtomicU64::new(0),
            callbacks_received: AtomicU64::new(0),
            callbacks_unknown: AtomicU64::new(0),
            callbacks_duplicate: AtomicU64::new(0),
            registry_size: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    pub fn count_result(&self, state: crate::model::RunState) {
        use crate::model::RunState::*;
        let c = match state {
            Succeeded => &self.runs_succeeded,
            Failed => &self.runs_failed,
            TimedOut => &self.runs_timed_out,
            Killed => &self.runs_killed,
            Lost => &self.runs_lost,
            Triggering | Running => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        self.trigger_lateness.render(
            &mut out,
            "shardline_trigger_lateness_seconds",
            "Delay between a fire's planned time and its dispatch.",
        );
        self.dispatch_latency.render(
            &mut out,
            "shardline_dispatch_latency_seconds",
            "Time for an executor to accept a run request.",
        );
        let counter = |out: &mut String, name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        };
        counter(
            &mut out,
            "shardline_fires_total",
            "Fires created.",
            &self.fires_total,
        );
        counter(
            &mut out,
            "shardline_dispatch_failures_total",
            "Run requests an executor did not accept.",
            &self.dispatch_failures,
        );
        counter(
            &mut out,
            "shardline_dispatch_requests_total",
            "HTTP requests that carried runs to executors (a batch of runs is one).",
            &self.dispatch_requests,
        );
        let _ = writeln!(out, "# HELP shardline_runs_total Runs finished, by result.\n# TYPE shardline_runs_total counter");
        for (label, v) in [
            ("succeeded", &self.runs_succeeded),
            ("failed", &self.runs_failed),
            ("timed_out", &self.runs_timed_out),
            ("killed", &self.runs_killed),
            ("lost", &self.runs_lost),
        ] {
            let _ = writeln!(
                out,
                "shardline_runs_total{{result=\"{label}\"}} {}",
                v.load(Ordering::Relaxed)
            );
        }
        counter(
            &mut out,
            "shardline_callbacks_total",
            "Callback items received.",
            &self.callbacks_received,
        );
        counter(
            &mut out,
            "shardline_callbacks_unknown_total",
            "Callback items naming no known run.",
            &self.callbacks_unknown,
        );
        counter(
            &mut out,
            "shardline_callbacks_duplicate_total",
            "Callback items for runs that already had a result.",
            &self.callbacks_duplicate,
        );
        let _ = writeln!(
            out,
            "# HELP shardline_registry_size Live executors.\n# TYPE shardline_registry_size gauge\nshardline_registry_size {}",
            self.registry_size.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.trigger_lateness.observe(3);
        m.trigger_lateness.observe(30);
        m.count_result(crate::model::RunState::Succeeded);
        let text = m.render();
        assert!(text.contains("shardline_trigger_lateness_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("shardline_trigger_lateness_seconds_count 2"));
        assert!(text.contains("shardline_runs_total{result=\"succeeded\"} 1"));
    }
}
