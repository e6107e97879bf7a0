mod binary;
mod server;
mod foreign_answers;
