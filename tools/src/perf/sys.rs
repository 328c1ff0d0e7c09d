//! The few kernel calls homa-perf needs beyond homa-phy: the timer slack,
//! the process's CPU time, and a flag set by
//! SIGINT/SIGTERM/SIGHUP so that runs stop and clean up.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};

/// Sets how late the kernel may fire this thread's timers (default 50 us),
/// so that short waits are short.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// CPU time this process has used: (user, system) seconds, all threads.
pub fn cpu_seconds() -> (f64, f64) {
    // SAFETY: `rusage` is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to an rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP set the flag [`stop_requested`]
/// reads instead of killing the process, so it can clean up.
pub fn catch_stop_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// Whether a stop signal arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Sends `sig` to process `pid` (one this program started).
pub fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: plain syscall; a stale pid gives ESRCH, which is ignored.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// CPU seconds (user + system, all threads) process `pid` has used so
/// far, from /proc; 0 if it is gone.
pub fn process_cpu_seconds(pid: u32) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name (which may hold spaces).
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 here.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i).and_then(|x| x.parse::<u64>().ok()))
        .sum();
    ticks as f64 / clock_ticks_per_second()
}

/// The kernel's USER_HZ (the unit of /proc CPU times).
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf with a constant name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// Whether this process runs as root (needed for TAP, namespaces, tc).
pub fn is_root() -> bool {
    // SAFETY: plain syscall without arguments.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_cpu_time_is_readable_from_proc() {
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(process_cpu_seconds(std::process::id()) > 0.0);
        assert_eq!(process_cpu_seconds(u32::MAX), 0.0);
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let (u0, s0) = cpu_seconds();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (u1, s1) = cpu_seconds();
        assert!(u1 + s1 > u0 + s0, "{u0} {s0} {u1} {s1}");
    }
}
