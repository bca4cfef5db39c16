//! The `workbench` binary: parse the command line, hand over to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = workbench_server::cli::Cli::parse();
    workbench_server::cli::run(cli)
}
