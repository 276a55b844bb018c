use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: allocations freed on another thread than the one
/// that made them (every request crosses tokio's worker threads) cost glibc a fifth of
/// bursar's CPU on the admission path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // `from_args` also makes the binary `bursar submit` when it is invoked as `sbatch`.
    let cli = bursar_gateway::cli::Cli::from_args(std::env::args_os().collect());
    bursar_gateway::telemetry::init();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // Named for `top -H` and `/proc/PID/task/*/comm` (its blocking threads too).
    builder.thread_name("bursar-runtime");
    if let bursar_gateway::cli::Command::Serve(bursar_gateway::cli::ServeArgs {
        worker_threads: Some(threads),
        ..
    }) = &cli.command
    {
        builder.worker_threads(usize::from(*threads));
    }
    let runtime = match builder.enable_all().build() {
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
