//! The stand-ins of outside services the tests use, shared with the benchmarks: the same code
//! (`tests/common/`), so the benchmark measures against what the tests check. Stand-ins only:
//! no product code path uses them.

#[path = "../../tests/common/loopback.rs"]
pub mod loopback;

#[path = "../../tests/common/kube_stand_in.rs"]
pub mod kube_stand_in;
