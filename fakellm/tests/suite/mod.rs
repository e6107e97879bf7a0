mod binary;
mod conditions;
mod foreign_answers;
mod server;
