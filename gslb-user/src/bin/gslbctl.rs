//! gslbctl: inspect a running gslbd through its pinned maps.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use gslb_common::Counter;
use gslb_user::dataplane;

#[derive(Parser)]
#[command(name = "gslbctl", version, about = "Inspect a running gslbd")]
struct Args {
    /// bpffs directory gslbd pinned its maps in (server.pin_path).
    #[arg(long, default_value = "/sys/fs/bpf/gslb")]
    pin_path: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fast-path counters: hits per qtype and transport, passes per reason (`name value` lines).
    Stats,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::Stats => match dataplane::pinned_counters(&args.pin_path) {
            Ok(counters) => {
                for c in Counter::ALL {
                    println!("{} {}", c.name(), counters.get(c));
                }
                ExitCode::SUCCESS
            }
            Err(error) => {
                let error = anyhow::Error::from(error);
                eprintln!("gslbctl: {error:#} (is gslbd running with pin_path {}?)", args.pin_path.display());
                ExitCode::FAILURE
            }
        },
    }
}
