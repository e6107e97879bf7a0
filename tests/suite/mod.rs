mod config_ranges;
mod disk_full;
mod print_mode;
mod server_errors;
mod support;
mod swarm;
