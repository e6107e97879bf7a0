mod print_mode;
mod processes;
mod support;
mod swarm;
