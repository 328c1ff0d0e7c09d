//! Integration tests that cross homa-stack and homa-phy live in `tests/`.
//! This library only makes the Rust examples of the README and of every
//! file in `docs/` compile and run as doctests, so they cannot drift from
//! the API. A new file in `docs/` gets a line here.

/// One module per document, its text as the module's doc comment.
macro_rules! doctests {
    ($($module:ident = $path:literal;)*) => {
        $(
            #[cfg(doctest)]
            #[doc = include_str!($path)]
            mod $module {}
        )*
    };
}

doctests! {
    readme = "../../README.md";
    architecture = "../../docs/architecture.md";
    benchmarks = "../../docs/benchmarks.md";
    firmware = "../../docs/firmware.md";
    homa_dump = "../../docs/homa-dump.md";
    protocol = "../../docs/protocol.md";
    reliability = "../../docs/reliability.md";
    simulation = "../../docs/simulation.md";
    testbed = "../../docs/testbed.md";
}
