mod key_protection;
mod print_mode;
mod support;
mod swarm;
