//! The calling thread's CPU time, and medians of repeated measurements.
#![allow(unsafe_code)]

/// CPU time this thread has used, in seconds
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`).
pub fn thread_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec, which the call fills.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Runs `f` and returns its result with the thread CPU seconds it took.
///
/// Not inlined, so that `valgrind --tool=callgrind
/// --toggle-collect='*bench::cpu::measured*'` counts exactly the measured
/// part of a run (docs/benchmarks.md section 3).
#[inline(never)]
pub fn measured<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = thread_seconds();
    let out = f();
    let secs = thread_seconds() - start;
    (out, secs)
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn thread_time_grows_with_work() {
        let (x, secs) = measured(|| (0..2_000_000u64).map(std::hint::black_box).sum::<u64>());
        assert_eq!(x, 1_999_999 * 2_000_000 / 2);
        assert!(secs > 0.0, "{secs}");
    }
}
