mod print_mode;
mod support;
mod swarm;
mod terminal;
