mod binary;
mod foreign_answers;
mod server;
