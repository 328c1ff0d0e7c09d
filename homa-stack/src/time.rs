//! Time as a value. The types live in homa-phy (the `Device` trait takes an
//! `Instant`) and are re-exported here so users of the stack need one import.

pub use homa_phy::time::{Duration, Instant};
