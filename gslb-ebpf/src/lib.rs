#![no_std]
// This file exists to enable the library target, so gslb-user can depend on this crate in
// build.rs (aya-build rebuilds when it changes).
