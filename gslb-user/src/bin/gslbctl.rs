//! gslbctl: inspect and steer a running gslbd: its pinned maps (fast-path counters) and its
//! control socket (reload, the LDNS/RTT table, the prober's counters, steering services,
//! sites and domains out of the answers and back).

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use gslb_common::Counter;
use gslb_user::{
    control::{self, ClientError, DEFAULT_CONTROL_PATH},
    dataplane,
};

/// A reload can load large location databases; the rest answers at once.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(130);
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Parser)]
#[command(name = "gslbctl", version, about = "Inspect and steer a running gslbd")]
struct Args {
    /// bpffs directory gslbd pinned its maps in (server.pin_path).
    #[arg(long, default_value = "/sys/fs/bpf/gslb")]
    pin_path: PathBuf,
    /// gslbd's control socket (gslbd --control).
    #[arg(long, default_value = DEFAULT_CONTROL_PATH)]
    control: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fast-path counters: hits per qtype and transport, passes per reason; then, when gslbd's
    /// control socket answers, the republish counters, the load monitors' (checks, failures,
    /// values, which are unknown) and the RTT prober's counters (`name value` lines).
    Stats,
    /// Reloads gslbd's configuration (as SIGHUP does) and says whether it was taken or why
    /// it was refused.
    Reload,
    /// The LDNS entries (resolvers that queried gslbd) and their RTT from each site: probe
    /// protocol, age, completion rate (F5's `ldns` record).
    Ldns,
    /// Takes a service out of the answers (DOWN for every decision, and for the other sites
    /// over MEP) or puts it back to its monitored state.
    Service {
        #[command(subcommand)]
        action: Steer,
    },
    /// The same for every service of a site.
    Site {
        #[command(subcommand)]
        action: Steer,
    },
    /// The same for a GSLB domain: disabled, it answers as if all its services were down
    /// (its backup addresses, or NODATA).
    Domain {
        #[command(subcommand)]
        action: Steer,
    },
    /// Tables of what gslbd holds now: services (up/down, admin state, weight, load, since
    /// when and why), sites (admin state, services up, MEP reachability), domains (per static view, the services
    /// its answers draw from, or its fallback), mep (each link's state, protocol version and
    /// last error; each site's reachability and the children this parent adopted) or rtt (the
    /// RTT table, as `ldns`).
    Show {
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(gslb_user::admin::tables::TABLES))]
        what: String,
    },
}

/// What `service`, `site` and `domain` do; gslbd keeps it across reloads and restarts
/// (`server.state_file`).
#[derive(Subcommand)]
enum Steer {
    /// Out of the answers at once, whatever the monitors say.
    Disable { name: String },
    /// Back to what the monitors say.
    Enable { name: String },
}

impl Steer {
    fn request(&self, target: &str) -> String {
        match self {
            Steer::Disable { name } => format!("{target} disable {name}"),
            Steer::Enable { name } => format!("{target} enable {name}"),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::Stats => stats(&args),
        Command::Reload => ask(&args, "reload", RELOAD_TIMEOUT),
        Command::Ldns => ask(&args, "ldns", QUERY_TIMEOUT),
        Command::Service { ref action } => ask(&args, &action.request("service"), QUERY_TIMEOUT),
        Command::Site { ref action } => ask(&args, &action.request("site"), QUERY_TIMEOUT),
        Command::Domain { ref action } => ask(&args, &action.request("domain"), QUERY_TIMEOUT),
        Command::Show { ref what } => ask(&args, &format!("show {what}"), QUERY_TIMEOUT),
    }
}

/// One control request; prints the reply's body, or the reason to stderr.
fn ask(args: &Args, request: &str, timeout: Duration) -> ExitCode {
    match exchange(args, request, timeout) {
        Ok(body) => {
            print!("{body}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("gslbctl {request}: {:#}", anyhow::Error::from(error));
            ExitCode::FAILURE
        }
    }
}

fn exchange(args: &Args, request: &str, timeout: Duration) -> Result<String, ClientError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClientError::Io)?;
    runtime.block_on(control::request(&args.control, request, timeout))
}

fn stats(args: &Args) -> ExitCode {
    // The counters are read from the pins, so they show even with gslbd gone (XDP answers on
    // from the last published maps); the prober's exist only while gslbd runs.
    let counters = dataplane::pinned_counters(&args.pin_path);
    if let Ok(counters) = &counters {
        for c in Counter::ALL {
            println!("{} {}", c.name(), counters.get(c));
        }
    }
    let daemon = exchange(args, "stats", QUERY_TIMEOUT);
    if let Ok(body) = &daemon {
        print!("{body}");
    }
    match (counters, daemon) {
        (Err(pins), Err(socket)) => {
            eprintln!(
                "gslbctl: {:#} (is gslbd running with pin_path {}?); {:#}",
                anyhow::Error::from(pins),
                args.pin_path.display(),
                anyhow::Error::from(socket)
            );
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}
