//! Caller-backed storage: the message pool and the reassembly tracker.
