//! Source-IP persistence: `table` (through the responder, on a clock the test moves),
//! `daemon` (between two gslbd parents).

mod daemon;
mod table;
