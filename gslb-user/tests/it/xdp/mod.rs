//! The fast path under BPF_PROG_TEST_RUN: `test_run` (frames and replies), `ecs_allow`, `rrl`,
//! `rtt`, `shortcuts`, `hygiene` (what it must not answer), `floor` (the benches' floor
//! program), `fuzz` (differential fuzzing against the responder, frames from `fuzz_frames`).

mod ecs_allow;
mod floor;
mod fuzz;
pub(crate) mod fuzz_frames;
mod hygiene;
mod rrl;
mod rtt;
mod shortcuts;
mod test_run;
