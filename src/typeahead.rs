//! Keys typed while a REPL turn runs. The terminal stops echoing them during the turn (so they
//! do not end up in the middle of the streamed answer) and hands them over byte by byte; they
//! are collected and put back into the next prompt's line. A permission prompt during the turn
//! first collects what was typed so far, so those keys never answer the question.
//!
//! All of it works on file descriptor 0 with termios(3) and poll(2); nothing happens when stdin
//! is not a terminal.

use std::sync::{Arc, Mutex};

/// The keys typed so far during the current turn, shared by the REPL and its permission
/// prompter (passed explicitly, never global).
#[derive(Debug, Clone, Default)]
pub struct TypeAhead {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl TypeAhead {
    /// Moves every byte already waiting on stdin into the buffer, without blocking.
    pub fn collect_pending(&self) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        while stdin_readable(0) {
            let mut chunk = [0u8; 256];
            // SAFETY: reads into a local buffer of the given length.
            let n = unsafe { libc::read(0, chunk.as_mut_ptr().cast(), chunk.len()) };
            if n <= 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..n as usize]);
        }
    }

    /// Takes the collected keys as text for the next prompt: printable characters only (arrow
    /// keys and other escape sequences are dropped), line breaks become spaces, trailing
    /// whitespace is trimmed.
    pub fn take_text(&self) -> String {
        let bytes = std::mem::take(&mut *self.bytes.lock().unwrap_or_else(|e| e.into_inner()));
        let text = String::from_utf8_lossy(&bytes);
        let mut out = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\x1b' => skip_escape(&mut chars),
                '\r' | '\n' | '\t' => out.push(' '),
                '\x7f' | '\x08' => {
                    out.pop();
                }
                c if !c.is_control() => out.push(c),
                _ => {}
            }
        }
        out.trim_end().to_string()
    }
}

/// Skips the rest of an escape sequence (`ESC [ … final byte` or `ESC O x`).
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        // CSI: parameter and intermediate bytes up to the final byte
        Some('[') => {
            chars.find(|c| ('@'..='~').contains(c));
        }
        // SS3: one more character
        Some('O') => {
            chars.next();
        }
        _ => {}
    }
}

/// Whether stdin has bytes to read within `timeout_ms` milliseconds.
pub fn stdin_readable(timeout_ms: i32) -> bool {
    let mut fds = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut fds, 1, timeout_ms) };
    ready > 0 && fds.revents & libc::POLLIN != 0
}

/// The terminal settings of stdin, to restore later; `None` when stdin is not a terminal.
pub fn terminal_settings() -> Option<libc::termios> {
    // SAFETY: tcgetattr fills the zeroed struct or fails.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        (libc::tcgetattr(0, &mut t) == 0).then_some(t)
    }
}

/// Applies terminal settings saved by [`terminal_settings`].
pub fn set_terminal(settings: &libc::termios) {
    // SAFETY: applies a termios obtained from tcgetattr.
    unsafe {
        libc::tcsetattr(0, libc::TCSANOW, settings);
    }
}

/// While a turn runs: no echo, no line editing (keys arrive as typed), signals kept (Ctrl-C
/// still cancels). Returns the settings to restore.
pub fn quiet_terminal() -> Option<libc::termios> {
    let saved = terminal_settings()?;
    let mut quiet = saved;
    quiet.c_lflag &= !(libc::ECHO | libc::ICANON);
    quiet.c_lflag |= libc::ISIG;
    quiet.c_cc[libc::VMIN] = 1;
    quiet.c_cc[libc::VTIME] = 0;
    set_terminal(&quiet);
    Some(saved)
}

/// Gives the terminal the settings it holds back when dropped (also when a panic unwinds).
pub struct TerminalRestore(pub Option<libc::termios>);

impl Drop for TerminalRestore {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            set_terminal(saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_text_keeps_printable_keys_only() {
        let t = TypeAhead::default();
        t.bytes
            .lock()
            .unwrap()
            .extend_from_slice(b"fix the\x1b[Atest\x7f\x7fst\r\n");
        assert_eq!(t.take_text(), "fix thetest");
        assert_eq!(t.take_text(), "");
    }
}
