mod config_ranges;
mod disk_full;
mod key_protection;
mod print_mode;
mod server_errors;
mod support;
mod swarm;
