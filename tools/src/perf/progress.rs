//! Progress of a long run on stderr: one line a second (what completed, the
//! rate over the last second, percentiles so far, failures and drops), and,
//! when stderr is a terminal, a bar of the run's time drawn on one line
//! that is rewritten in place.
//!
//! Hand-written rather than a progress-bar crate: the loops that report are
//! single-threaded and already wake at least every 100 ms, so one line a
//! second needs no drawing thread, and on a pipe (the testbed, a log file)
//! the same text goes out as plain lines.

use std::io::{IsTerminal, Write};

use super::stats::Histogram;

/// Nanoseconds between two progress lines.
pub const EVERY_NS: u64 = 1_000_000_000;

/// Width of the bar in characters.
const BAR: usize = 24;

/// The progress reporter of one run.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    tty: bool,
    /// Seconds the run is planned to last, for the bar.
    total_s: Option<f64>,
    next_ns: u64,
    last_ns: u64,
    last_count: u64,
    /// A bar line is on the terminal, not yet ended by a newline.
    drawn: bool,
    who: &'static str,
}

impl Progress {
    /// A reporter for `who` (`client`, `server`); silent when `quiet`.
    /// `total_s` is the planned length of the run, if it has one.
    pub fn new(who: &'static str, quiet: bool, total_s: Option<f64>) -> Progress {
        Progress {
            enabled: !quiet,
            tty: std::io::stderr().is_terminal(),
            total_s,
            next_ns: EVERY_NS,
            last_ns: 0,
            last_count: 0,
            drawn: false,
            who,
        }
    }

    /// Whether a line is due at `now_ns`.
    pub fn due(&self, now_ns: u64) -> bool {
        self.enabled && now_ns >= self.next_ns
    }

    /// Prints the line for `now_ns`, if due: `count` is what completed so
    /// far (the rate is over the time since the last line), `rest` the
    /// other figures.
    pub fn tick(&mut self, now_ns: u64, count: u64, rest: &str) {
        if !self.due(now_ns) {
            return;
        }
        let dt = (now_ns - self.last_ns).max(1) as f64 / 1e9;
        let rate = count.saturating_sub(self.last_count) as f64 / dt;
        let t = now_ns as f64 / 1e9;
        let line = format!(
            "homa-perf: {} {t:.0} s: {count} done ({rate:.0}/s){rest}",
            self.who
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let bar = self
                .total_s
                .filter(|&s| s > 0.0)
                .map_or(String::new(), |s| {
                    let f = (t / s).clamp(0.0, 1.0);
                    let full = (f * BAR as f64).round() as usize;
                    format!(
                        "[{}{}] {:>3.0}% ",
                        "#".repeat(full),
                        ".".repeat(BAR - full),
                        f * 100.0
                    )
                });
            let _ = write!(err, "\r\x1b[K{bar}{line}");
            let _ = err.flush();
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        self.last_ns = now_ns;
        self.last_count = count;
        // The next line a whole second after this one, even if this was late.
        self.next_ns = now_ns + EVERY_NS;
    }

    /// Prints a message of its own line, clearing the bar first.
    pub fn note(&mut self, msg: &str) {
        self.end_bar();
        eprintln!("{msg}");
    }

    /// Ends the bar's line, if one is drawn (call at the end of the run).
    pub fn end_bar(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

/// `, P50 X us P99 Y us` of the round trips so far (empty when none).
pub fn percentiles(h: &Histogram) -> String {
    if h.count() == 0 {
        return String::new();
    }
    format!(
        ", P50 {:.1} us P99 {:.1} us",
        h.percentile(0.5) as f64 / 1e3,
        h.percentile(0.99) as f64 / 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_due_once_a_second_and_never_when_quiet() {
        let mut p = Progress::new("client", false, Some(10.0));
        p.tty = false;
        assert!(!p.due(500_000_000));
        assert!(p.due(1_000_000_000));
        p.tick(1_200_000_000, 10, "");
        assert!(!p.due(2_000_000_000));
        assert!(p.due(2_200_000_000));
        assert!(!Progress::new("client", true, None).due(5_000_000_000));
        let mut h = Histogram::new();
        assert_eq!(percentiles(&h), "");
        h.record(2_000);
        assert_eq!(percentiles(&h), ", P50 2.0 us P99 2.0 us");
    }
}
