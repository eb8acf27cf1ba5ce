//! Ports for the servers the tests start as child processes, which must be told a port.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

/// Below the kernel's ephemeral range (32768–60999 on Linux): a port the kernel handed out for
/// `bind(…:0)` is free only until the next outgoing connection takes it, and a suite of
/// parallel tests makes thousands (a dev server once died on "address already in use" for
/// the port chosen for its UI). Ports here are taken only by tests that chose them too, and
/// a dev server's HTTP port (its gRPC port + 1,000) stays below that range as well.
const RANGE: std::ops::Range<u16> = 10_000..30_000;

/// A loopback port nothing listens on now, chosen at random outside the ephemeral range.
pub fn free_port() -> u16 {
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    let seed = RandomState::new();
    loop {
        let draw = seed.hash_one(DRAWN.fetch_add(1, Ordering::Relaxed));
        let span = u64::from(RANGE.end - RANGE.start);
        let port = RANGE.start + u16::try_from(draw % span).expect("within the range");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
