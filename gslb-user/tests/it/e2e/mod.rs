//! The end-to-end tests: gslbd (the binary) in network namespaces of a [`gslb_tests::Lab`].

mod differential;
mod ecs_unbound_netns;
mod mep_sites;
mod privilege_netns;
mod responder_netns;
mod restart_netns;
mod rrl_netns;
mod rtt_flood_netns;
mod rtt_gslbd_netns;
mod rtt_mep_netns;
mod rtt_netns;
mod stale_netns;
mod xdp_netns;
