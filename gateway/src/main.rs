use std::process::ExitCode;

fn main() -> ExitCode {
    // `from_args` also makes the binary `bursar submit` when it is invoked as `sbatch`.
    let cli = bursar_gateway::cli::Cli::from_args(std::env::args_os().collect());
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
