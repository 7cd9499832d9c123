use anyhow::Result;

use crate::{setup, util};

const CONFIG: &str = "examples/demo.toml";

pub fn run(once: bool) -> Result<()> {
    let env = setup::run()?;
    util::run_inherit("demo build", env.cargo().arg("build"))?;
    // The scripted demo (veth pair, queries, printed answers; `--once` to exit afterwards) is not
    // written yet: until then, serve the demo config when there is one.
    if once || !env.root.join(CONFIG).exists() {
        println!("demo: not yet implemented beyond build");
        return Ok(());
    }
    let mut cmd = env.cargo();
    cmd.args([
        "run",
        "-p",
        "gslb-user",
        "--bin",
        "gslbd",
        "--",
        "--config",
        CONFIG,
    ]);
    util::run_inherit("demo", &mut cmd)
}
