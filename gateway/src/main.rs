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
    let workers = match &cli.command {
        bursar_gateway::cli::Command::Serve(bursar_gateway::cli::ServeArgs {
            worker_threads: Some(threads),
            ..
        }) => usize::from(*threads),
        // tokio's own default
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    builder.worker_threads(workers);
    // Named for `top -H` and `/proc/PID/task/*/comm`: the workers, which the runtime starts
    // first, `bursar-runtime`; the blocking threads started later, `bursar-blocking`.
    let started = std::sync::atomic::AtomicUsize::new(0);
    builder.thread_name_fn(move || {
        let n = started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n < workers {
            "bursar-runtime".into()
        } else {
            "bursar-blocking".into()
        }
    });
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
