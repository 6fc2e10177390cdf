//! Layer 3, the modes that drive a run, each on top of `measure`: the matrix, `--slo`'s
//! capacity search, `--fidelity`'s signature cells, `--post`'s replays, `--idle-conns` and
//! `--attack`. A mode
//! returns the model's cells or rows; it prints no table and writes no file (`main` hands
//! them to the writers).

pub mod attack;
pub mod fidelity;
pub mod idle;
pub mod matrix;
pub mod post;
pub mod slo;
pub mod soak;
