use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = bursar_gateway::cli::Cli::parse();
    bursar_gateway::telemetry::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bursar: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bursar_gateway::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bursar: {e:#}");
            ExitCode::FAILURE
        }
    }
}
