//! `interlink-bench`: parses arguments, runs the chosen scenarios, prints the table on
//! stdout and writes the JSON.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use interlink_bench::{Context, progress, report, scenarios};

/// Network benchmarks of interlink-p2p: named scenarios on in-process nodes and real
/// `interlink-p2p` processes on loopback.
#[derive(Debug, Parser)]
#[command(version, about, after_help = scenario_list())]
struct Cli {
    /// Scenarios to run (default: all), by name.
    scenarios: Vec<String>,
    /// Where to write the JSON results [default: target/interlink-bench.json].
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Fewer and shorter cases, for a smoke run.
    #[arg(long)]
    quick: bool,
    /// The `interlink-p2p` binary for process-level cases [default: next to this binary].
    #[arg(long, value_name = "PATH")]
    p2p_bin: Option<PathBuf>,
    /// Node counts for `roster-convergence`, each with its runs, e.g. `100:3,200:1`
    /// [default: 10:5,50:3,100:2,200:1]; for `presence-sim`, the simulated sessions
    /// [default: 1000,10000].
    #[arg(long, value_name = "N:RUNS,...")]
    nodes: Option<String>,
}

/// Parses `N:RUNS` pairs separated by commas (`RUNS` defaults to 1).
fn parse_sizes(s: &str) -> Result<Vec<(usize, usize)>, String> {
    s.split(',')
        .map(|part| {
            let (n, runs) = part.split_once(':').unwrap_or((part, "1"));
            let n: usize = n.trim().parse().map_err(|e| format!("{part:?}: {e}"))?;
            let runs: usize = runs.trim().parse().map_err(|e| format!("{part:?}: {e}"))?;
            if n == 0 || runs == 0 {
                return Err(format!("{part:?}: nodes and runs must be at least 1"));
            }
            Ok((n, runs))
        })
        .collect()
}

fn scenario_list() -> String {
    let mut s = String::from("Scenarios:\n");
    for sc in scenarios::ALL {
        s.push_str(&format!("  {:<22}{}\n", sc.name, sc.about));
    }
    s
}

/// `target/interlink-bench.json` of the target directory this binary was built into
/// (`target/<profile>/interlink-bench`), else under the current directory.
fn default_json_path() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
        .filter(|dir| dir.file_name().is_some_and(|n| n == "target"))
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("interlink-bench.json")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .init();
    let cli = Cli::parse();
    let selected = if cli.scenarios.is_empty() {
        scenarios::ALL.iter().collect()
    } else {
        cli.scenarios
            .iter()
            .map(|name| {
                scenarios::find(name)
                    .with_context(|| format!("unknown scenario {name:?}\n\n{}", scenario_list()))
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };

    let mut ctx = Context::new(cli.quick, cli.p2p_bin).await;
    ctx.roster_sizes = cli
        .nodes
        .as_deref()
        .map(parse_sizes)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--nodes: {e}"))?;
    match &ctx.p2p {
        Ok(p) => progress(format_args!("session binary: {}", p.path.display())),
        Err(reason) => progress(format_args!("process-level cases skipped: {reason}")),
    }
    let run = report::RunInfo {
        date: interlink_bench::utc_now_rfc3339(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        quick: cli.quick,
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned()),
        p2p_binary: ctx.p2p.as_ref().ok().map(|p| p.path.display().to_string()),
    };
    let reports = interlink_bench::run(&selected, &ctx).await;

    print!("{}", report::table(&reports));
    let path = cli.json.unwrap_or_else(default_json_path);
    report::write_json(&path, &run, &reports)?;
    progress(format_args!("results written to {}", path.display()));
    Ok(())
}
