//! `homa-bench --callgrind`: each measurement re-run under
//! `valgrind --tool=callgrind` with collection on only inside
//! [`measured`](super::cpu::measured), and its instructions per operation
//! printed on one line.
//!
//! Each row is counted twice: in total (both ends, the rings and the
//! harness), and in the stack alone. An instruction is the stack's when its
//! source file is homa-stack's, homa-phy's or smoltcp's, the harness's when
//! it is homa-tools' (the rings, the clock and the application loops; code
//! inlined across crates is told apart by its file). Code with neither file
//! (Rust's `core`, `memcpy`, a hash map) is named by its function's crate
//! when that is one of them, and is otherwise split between stack and
//! harness in proportion to what each spent calling it: a `memcpy` into a
//! frame is the stack's, the harness's copy of a response is not.

use anyhow::Context as _;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use super::Single;

/// The option that confines collection to the measured part of a run.
pub const TOGGLE: &str = "--toggle-collect=*bench::cpu::measured*";

/// One row of the `instructions:` line.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// Its name on the line (`rpc`, `data_packet`, ...).
    pub name: &'static str,
    /// The measurement run for it.
    pub which: Single,
    /// Operations in the run (1 MB messages for `data_packet`).
    pub count: u64,
    /// Whether the line also shows `<name>_stack`.
    pub stack: bool,
    /// Whether the line shows only the stack's figure, as `<name>`.
    pub stack_only: bool,
    /// Per DATA packet the client sent, not per operation.
    pub per_data_packet: bool,
}

const fn row(name: &'static str, which: Single, count: u64, stack: bool) -> Row {
    Row {
        name,
        which,
        count,
        stack,
        stack_only: false,
        per_data_packet: false,
    }
}

/// The rows, in the line's order, with the operations each runs; the
/// last two are homa-stack's rows again over devices that do every
/// checksum.
pub const ROWS: [Row; 8] = [
    row("rpc", Single::HomaRpc, 10_000, true),
    row("rpc_1024", Single::HomaRpc1024, 10_000, false),
    row("big_table", Single::HomaRpcBigTable, 10_000, false),
    Row {
        per_data_packet: true,
        ..row("data_packet", Single::HomaMb, 3, true)
    },
    row("udp_echo", Single::UdpEcho, 10_000, true),
    row("tcp_rr", Single::TcpRr, 10_000, true),
    Row {
        stack_only: true,
        ..row("rpc_stack_offload", Single::HomaRpcOffload, 10_000, true)
    },
    Row {
        stack_only: true,
        per_data_packet: true,
        ..row("data_packet_stack_offload", Single::HomaMbOffload, 3, true)
    },
];

/// Instructions collected in one run, in total and in the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// Every instruction collected.
    pub total: u64,
    /// Those of the stack (see the module's documentation).
    pub stack: u64,
}

/// One row's result: instructions per operation (or per DATA packet).
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// The row.
    pub row: Row,
    /// Total instructions per operation.
    pub total: u64,
    /// Stack instructions per operation.
    pub stack: u64,
}

/// The `instructions:` line.
pub fn line(figures: &[Figure]) -> String {
    let mut s = String::from("instructions:");
    for f in figures {
        if f.row.stack_only {
            s += &format!(" {}={}", f.row.name, f.stack);
            continue;
        }
        s += &format!(" {}={}", f.row.name, f.total);
        if f.row.stack {
            s += &format!(" {}_stack={}", f.row.name, f.stack);
        }
    }
    s
}

/// Runs `row` under callgrind: `exe` is homa-bench itself, run with
/// `--only`; `count` overrides the row's operations.
pub fn measure(exe: &Path, row: Row, count: Option<u64>) -> anyhow::Result<Figure> {
    let count = count.unwrap_or(row.count);
    let out = std::env::temp_dir().join(format!(
        "homa-bench-callgrind-{}-{}.out",
        std::process::id(),
        row.name
    ));
    let run = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(TOGGLE)
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["--only", row.which.name(), "--count", &count.to_string()])
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run valgrind: {e}"))?;
    let text = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    if !run.status.success() {
        let stderr = String::from_utf8_lossy(&run.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        return Err(anyhow::anyhow!(
            "{} under callgrind failed ({}): {}",
            row.name,
            run.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let text = text.map_err(|e| anyhow::anyhow!("{}: no callgrind output: {e}", row.name))?;
    let stdout = String::from_utf8_lossy(&run.stdout);
    let (ops, data_packets) = super::parse_summary(&stdout)
        .with_context(|| format!("{}: no summary in {stdout:?}", row.name))?;
    if ops != count {
        return Err(anyhow::anyhow!(
            "{}: ran {ops} operations, not {count}",
            row.name
        ));
    }
    let per = if row.per_data_packet {
        data_packets
    } else {
        ops
    };
    if per == 0 {
        return Err(anyhow::anyhow!("{}: nothing to divide by", row.name));
    }
    let cost = parse(&text)?;
    let div = |n: u64| (n + per / 2) / per;
    Ok(Figure {
        row,
        total: div(cost.total),
        stack: div(cost.stack),
    })
}

/// Who an instruction is counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Stack,
    Harness,
}

/// The owner of code from source file `path`, if the file tells.
fn file_owner(path: &str) -> Option<Owner> {
    let path = path.replace('\\', "/");
    let under = |dir: &str| path.starts_with(dir) || path.contains(&format!("/{dir}"));
    if under("homa-stack/") || under("homa-phy/") || path.contains("/smoltcp-") {
        Some(Owner::Stack)
    } else if under("tools/src/") || under("testkit/") {
        Some(Owner::Harness)
    } else {
        None
    }
}

/// The owner of function `name` (demangled) by its crate, if it tells:
/// the first path segment, or the type's in `<T as Trait>::f`.
fn fn_owner(name: &str) -> Option<Owner> {
    let name = name.trim_start_matches('<').trim_start_matches("&mut ");
    let krate = name.split("::").next().unwrap_or("");
    match krate {
        "homa_stack" | "homa_phy" | "smoltcp" => Some(Owner::Stack),
        "homa_tools" | "homa_testkit" => Some(Owner::Harness),
        _ => None,
    }
}

/// Callgrind's compressed names: `(id) name` defines, `(id)` refers.
#[derive(Default)]
struct Names {
    by_id: HashMap<String, usize>,
    names: Vec<String>,
}

impl Names {
    fn get(&mut self, text: &str) -> usize {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix('(') {
            if let Some(close) = rest.find(')') {
                let id = &rest[..close];
                let name = rest[close + 1..].trim();
                if let Some(&i) = self.by_id.get(id) {
                    return i;
                }
                let i = self.intern(name);
                self.by_id.insert(id.to_string(), i);
                return i;
            }
        }
        self.intern(text)
    }

    fn intern(&mut self, name: &str) -> usize {
        self.names.push(name.to_string());
        self.names.len() - 1
    }
}

/// Sums a callgrind output file (one part, the first event being `Ir`)
/// into total and stack instructions (see the module's documentation).
pub fn parse(text: &str) -> anyhow::Result<Cost> {
    let profile = Profile::read(text)?;
    let share = profile.shares();
    Ok(Cost {
        total: profile.own.values().sum(),
        stack: profile.stack(&share).round() as u64,
    })
}

/// What a callgrind file says: the cost of each function's own lines and
/// of each call.
struct Profile {
    files: Names,
    fns: Names,
    /// Self cost by (function, file of the line).
    own: HashMap<(usize, usize), u64>,
    /// Inclusive cost of calls by (caller, file at the call, callee).
    calls: HashMap<(usize, usize, usize), u64>,
}

/// Where the reader is in a callgrind file.
struct Cursor {
    /// Columns of position before the cost on a cost line.
    positions: usize,
    /// The file of the current function (`fl=`), and of its current
    /// lines (`fi=`/`fe=` switch to inlined code).
    fl: usize,
    file: usize,
    func: usize,
    /// The callee of the next cost line, after `calls=`.
    callee: Option<usize>,
    /// The callee named by `cfn=`, until its `calls=`.
    pending_cfn: Option<usize>,
}

impl Profile {
    /// Reads every line of `text`; the lines' costs must add up to the
    /// file's `totals` or `summary`, if it has one.
    fn read(text: &str) -> anyhow::Result<Profile> {
        let mut p = Profile {
            files: Names::default(),
            fns: Names::default(),
            own: HashMap::new(),
            calls: HashMap::new(),
        };
        let mut at = Cursor {
            positions: 1,
            fl: usize::MAX,
            file: usize::MAX,
            func: usize::MAX,
            callee: None,
            pending_cfn: None,
        };
        let mut totals: Option<u64> = None;
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let first = line.as_bytes()[0];
            if first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'*') {
                p.cost_line(&mut at, line)?;
            } else if let Some(t) = p.spec_line(&mut at, line)? {
                totals = Some(t);
            }
        }
        let total: u64 = p.own.values().sum();
        if let Some(t) = totals {
            if t != total {
                return Err(anyhow::anyhow!(
                    "callgrind: lines sum to {total}, the file says {t}"
                ));
            }
        }
        Ok(p)
    }

    /// A cost line: to the call just announced, else to the function.
    fn cost_line(&mut self, at: &mut Cursor, line: &str) -> anyhow::Result<()> {
        let mut it = line.split_ascii_whitespace().skip(at.positions);
        let ir = match it.next() {
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| anyhow::anyhow!("callgrind: bad cost line {line:?}"))?,
            None => 0,
        };
        if at.func == usize::MAX {
            return Err(anyhow::anyhow!(
                "callgrind: cost before any function: {line:?}"
            ));
        }
        match at.callee.take() {
            Some(c) => *self.calls.entry((at.func, at.file, c)).or_default() += ir,
            None => *self.own.entry((at.func, at.file)).or_default() += ir,
        }
        Ok(())
    }

    /// A `key=value` line: moves the cursor; returns the file's total
    /// instructions if the line states them.
    fn spec_line(&mut self, at: &mut Cursor, line: &str) -> anyhow::Result<Option<u64>> {
        let Some((key, value)) = line.split_once(['=', ':']) else {
            return Ok(None);
        };
        match key {
            "positions" => at.positions = value.split_ascii_whitespace().count(),
            "events" if value.split_ascii_whitespace().next() != Some("Ir") => {
                return Err(anyhow::anyhow!(
                    "callgrind: first event is not Ir: {value:?}"
                ));
            }
            "totals" | "summary" => {
                let v = value.split_ascii_whitespace().next().unwrap_or("0");
                return Ok(Some(
                    v.parse()
                        .map_err(|_| anyhow::anyhow!("callgrind: bad {key}"))?,
                ));
            }
            "fl" => {
                at.fl = self.files.get(value);
                at.file = at.fl;
            }
            "fi" | "fe" => at.file = self.files.get(value),
            "fn" => {
                at.func = self.fns.get(value);
                at.file = at.fl;
            }
            "cfi" | "cfl" => {
                self.files.get(value);
            }
            "cfn" => at.pending_cfn = Some(self.fns.get(value)),
            "calls" => {
                at.callee = Some(
                    at.pending_cfn
                        .take()
                        .with_context(|| format!("callgrind: calls= without cfn=: {line:?}"))?,
                );
            }
            _ => {}
        }
        Ok(None)
    }

    /// Who owns a line by its file, else by its function's crate.
    fn owner_of(&self, func: usize, file: usize) -> Option<Owner> {
        self.files
            .names
            .get(file)
            .and_then(|f| file_owner(f))
            .or_else(|| fn_owner(&self.fns.names[func]))
    }

    /// Functions owned by no one: the stack's share of each, from what its
    /// callers spent in it, found by repeated passes over the calls (the
    /// shares of such functions calling each other settle in a few).
    fn shares(&self) -> HashMap<usize, f64> {
        let mut share: HashMap<usize, f64> = HashMap::new();
        for _ in 0..32 {
            let mut sums: HashMap<usize, (f64, f64)> = HashMap::new();
            for (&(caller, at, callee), &ir) in &self.calls {
                if fn_owner(&self.fns.names[callee]).is_some() {
                    continue;
                }
                let s = match self.owner_of(caller, at) {
                    Some(Owner::Stack) => 1.0,
                    Some(Owner::Harness) => 0.0,
                    None => match share.get(&caller) {
                        Some(&s) => s,
                        None => continue,
                    },
                };
                let e = sums.entry(callee).or_default();
                e.0 += s * ir as f64;
                e.1 += ir as f64;
            }
            let next: HashMap<usize, f64> = sums
                .into_iter()
                .filter(|(_, (_, all))| *all > 0.0)
                .map(|(f, (stack, all))| (f, stack / all))
                .collect();
            if next == share {
                break;
            }
            share = next;
        }
        share
    }

    /// The stack's instructions: its own lines, and its share of those of
    /// functions owned by no one.
    fn stack(&self, share: &HashMap<usize, f64>) -> f64 {
        let mut stack = 0.0f64;
        for (&(func, file), &ir) in &self.own {
            stack += match self.owner_of(func, file) {
                Some(Owner::Stack) => ir as f64,
                Some(Owner::Harness) => 0.0,
                // A function no one called while collecting (the measured
                // closure itself): the harness's.
                None => share.get(&func).copied().unwrap_or(0.0) * ir as f64,
            };
        }
        stack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made output in callgrind's format: the harness (file
    /// `tools/src/bench/homa.rs`) calls the stack's `poll`, which has the
    /// ring's code inlined (file `tools/src/bench/ring.rs`) and calls
    /// `memcpy`; the harness calls `memcpy` too.
    const SAMPLE: &str = "\
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 850

ob=(1) /bin/homa-bench
fl=(1) /work/tools/src/bench/homa.rs
fn=(1) homa_tools::bench::homa::run
10 100
cfl=(2) homa-stack/src/endpoint/mod.rs
cfn=(2) <homa_stack::endpoint::Endpoint>::poll::<homa_tools::bench::ring::Port>
calls=1 20
+2 700
cob=(2) /lib/libc.so.6
cfl=(3) ???
cfn=(3) memcpy
calls=2 0
* 50

fl=(2)
fn=(2)
20 400
fi=(4) /work/tools/src/bench/ring.rs
5 100
fe=(2)
+3 50
cfl=(3)
cfn=(3)
calls=3 0
22 150

ob=(2)
fl=(3)
fn=(3)
0 200
";

    #[test]
    fn sample_splits_by_file_and_shares_memcpy_by_caller() {
        // Total: 100 + 400 + 100 + 50 + 200 (a call's inclusive cost is
        // not its caller's own). Stack: poll's own 450 (its inlined ring
        // code is the harness's) and memcpy's 150 of 200.
        let cost = parse(SAMPLE).expect("parses");
        assert_eq!(cost.total, 850);
        assert_eq!(cost.stack, 450 + 150);
    }

    #[test]
    fn a_sum_unlike_the_totals_line_is_an_error() {
        let bad = SAMPLE.replace("summary: 850", "summary: 851");
        assert!(parse(&bad).is_err());
    }

    #[test]
    fn owners_by_file_and_by_crate() {
        assert_eq!(
            file_owner("/root/.cargo/registry/src/index.crates.io-1/smoltcp-0.12.0/src/x.rs"),
            Some(Owner::Stack)
        );
        assert_eq!(file_owner("homa-phy/src/time.rs"), Some(Owner::Stack));
        assert_eq!(
            file_owner("/work/wt/tools/src/bench/ring.rs"),
            Some(Owner::Harness)
        );
        assert_eq!(file_owner("/rustc/abc/library/core/src/ptr/mod.rs"), None);
        assert_eq!(
            fn_owner("<homa_tools::bench::ring::Rx as homa_phy::RxToken>::consume"),
            Some(Owner::Harness)
        );
        assert_eq!(
            fn_owner("smoltcp::iface::Interface::poll"),
            Some(Owner::Stack)
        );
        assert_eq!(fn_owner("core::ptr::drop_in_place<homa_stack::X>"), None);
    }

    #[test]
    fn the_line_names_every_row_in_order() {
        let figures: Vec<Figure> = ROWS
            .iter()
            .enumerate()
            .map(|(i, &row)| Figure {
                row,
                total: 10 * i as u64 + 1,
                stack: 10 * i as u64,
            })
            .collect();
        assert_eq!(
            line(&figures),
            "instructions: rpc=1 rpc_stack=0 rpc_1024=11 big_table=21 data_packet=31 \
             data_packet_stack=30 udp_echo=41 udp_echo_stack=40 tcp_rr=51 tcp_rr_stack=50 \
             rpc_stack_offload=60 data_packet_stack_offload=70"
        );
    }
}
