mod closed_stdout;
mod flags;
mod print_mode;
mod refusals;
mod support;
mod swarm;
mod terminal;
