mod binary;
mod server;
