//! `sed`: which options edit files in place or run a script file, and which commands of a
//! script run programs or write files (GNU sed manual, "Command-Line Options" and "sed commands
//! summary").

use super::{ConcernKind, Facts, SimpleCommand, Word};

/// Long options of GNU sed without a value that change nothing about what runs or is written.
#[rustfmt::skip]
const SED_INERT_LONG_OPTIONS: &[&str] = &[
    "--quiet", "--silent", "--regexp-extended", "--separate", "--unbuffered", "--null-data",
    "--zero-terminated", "--posix", "--debug", "--sandbox", "--follow-symlinks", "--binary",
];

/// What the arguments of one `sed` command are.
#[derive(Default)]
struct SedArgs<'a> {
    /// Scripts, with the index of the word holding each.
    scripts: Vec<(usize, &'a Word)>,
    /// True when `-e`/`-f` gave the script (so the first operand is a file).
    explicit_script: bool,
    /// True for `-i`/`--in-place`.
    in_place: bool,
    /// Operands (files, or the script first when no `-e`/`-f`).
    files: Vec<(usize, &'a Word)>,
}

/// `sed`: read-only unless it edits in place, runs a script file, or its script runs
/// programs or writes files.
pub(super) fn sed(facts: &mut Facts, cmd: &SimpleCommand) {
    facts.read_only = true;
    let mut args = sed_args(facts, &cmd.argv);
    if !args.explicit_script && !args.files.is_empty() {
        let script = args.files.remove(0);
        args.scripts.push(script);
    }
    for (i, script) in &args.scripts {
        if let Some(problem) = sed_script_hazard(script_text(script)) {
            if !problem.contains("`w` command") {
                facts.runs_code.get_or_insert_with(|| problem.clone());
            }
            facts.hazard(*i, problem);
        }
    }
    for (i, w) in args.files {
        facts.read(Some(i), w);
        if args.in_place {
            facts.modified.push(w.clone());
        }
    }
    facts.dynamic_tail(cmd, "xargs appends arguments read at run time");
}

/// Reads the options and operands of `sed`, noting hazardous options in `facts`.
fn sed_args<'a>(facts: &mut Facts, argv: &'a [Word]) -> SedArgs<'a> {
    let mut args = SedArgs::default();
    let mut options_done = false;
    let mut i = 1;
    while i < argv.len() {
        let w = &argv[i];
        let t = w.text.as_str();
        if w.dynamic {
            facts.concern(
                Some(i),
                ConcernKind::Dynamic,
                format!("`{t}` is computed at run time and could be a sed option or script"),
            );
        } else if !options_done && t == "--" {
            options_done = true;
        } else if !options_done && t.starts_with("--") {
            i += long_option(facts, &mut args, argv, i);
        } else if !options_done && t.starts_with('-') && t.len() > 1 {
            i += short_options(facts, &mut args, argv, i);
        } else {
            args.files.push((i, w));
        }
        i += 1;
    }
    args
}

/// Reads the long option `argv[i]`; returns how many following words it takes as its value.
fn long_option<'a>(facts: &mut Facts, args: &mut SedArgs<'a>, argv: &'a [Word], i: usize) -> usize {
    let w = &argv[i];
    let t = w.text.as_str();
    let (name, value) = t.split_once('=').map_or((t, None), |(n, v)| (n, Some(v)));
    let separate_value = usize::from(value.is_none());
    match name {
        "--in-place" => {
            args.in_place = true;
            facts.hazard(i, "`sed --in-place` edits files");
            0
        }
        "--expression" => {
            args.explicit_script = true;
            match value {
                Some(_) => args.scripts.push((i, w)),
                None => args
                    .scripts
                    .extend(argv.get(i + 1).map(|next| (i + 1, next))),
            }
            separate_value
        }
        "--file" => {
            args.explicit_script = true;
            facts.hazard(i, "`sed --file` runs a script the analysis cannot see");
            facts.runs_code = Some("`sed --file` runs a script the analysis cannot see".into());
            separate_value
        }
        "--line-length" => separate_value,
        _ if SED_INERT_LONG_OPTIONS.contains(&name) => 0,
        _ => {
            facts.hazard(i, format!("unknown sed option `{t}`"));
            0
        }
    }
}

/// Reads the short options clustered in `argv[i]` (`-ne`, `-i.bak`); returns how many
/// following words the last one takes as its value.
fn short_options<'a>(
    facts: &mut Facts,
    args: &mut SedArgs<'a>,
    argv: &'a [Word],
    i: usize,
) -> usize {
    let w = &argv[i];
    let letters: Vec<char> = w.text[1..].chars().collect();
    for (j, letter) in letters.iter().enumerate() {
        let last = j + 1 == letters.len();
        match letter {
            'n' | 'E' | 'r' | 's' | 'u' | 'z' => {}
            'i' => {
                args.in_place = true;
                facts.hazard(i, "`sed -i` edits files in place");
                return 0;
            }
            'e' => {
                args.explicit_script = true;
                if !last {
                    args.scripts.push((i, w));
                    return 0;
                }
                let next = argv.get(i + 1).map(|next| (i + 1, next));
                args.scripts.extend(next);
                return usize::from(next.is_some());
            }
            'f' => {
                args.explicit_script = true;
                facts.hazard(i, "`sed -f` runs a script the analysis cannot see");
                facts.runs_code = Some("`sed -f` runs a script the analysis cannot see".into());
                return usize::from(last);
            }
            'l' => return usize::from(last),
            other => {
                facts.hazard(i, format!("unknown sed option `-{other}`"));
                return 0;
            }
        }
    }
    0
}

/// The script in a word: after `--expression=`, after the `e` of `-eSCRIPT`/`-nes/x/y/`, or
/// the whole word.
fn script_text(script: &Word) -> &str {
    let text = script.text.as_str();
    text.strip_prefix("--expression=")
        .or_else(|| {
            text.starts_with('-')
                .then(|| text.find('e').map_or("", |p| &text[p + 1..]))
        })
        .unwrap_or(text)
}

/// Scans a sed script for commands that run programs or write files (GNU sed manual, "sed
/// commands summary"): `e`, `w`, `W`, and the `e`/`w` flags of `s`. Unknown commands count as
/// hazards (fail closed).
fn sed_script_hazard(script: &str) -> Option<String> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        i = match skip_address(&chars, i) {
            Some(next) => next,
            None => match script_command(&chars, i) {
                Ok(next) => next,
                Err(hazard) => return Some(hazard),
            },
        };
    }
    None
}

/// Skips a separator or (part of) an address at `chars[i]`: `;`, `{`, `!`, line numbers, `$`,
/// `/REGEX/I`, `\cREGEXc`. `None` when `chars[i]` starts a command.
fn skip_address(chars: &[char], i: usize) -> Option<usize> {
    let c = chars[i];
    if c.is_whitespace() || matches!(c, ';' | '{' | '}' | '!' | ',') {
        return Some(i + 1);
    }
    if c.is_ascii_digit() || matches!(c, '$' | '~' | '+') {
        return Some(i + 1);
    }
    let end = if c == '/' {
        skip_delimited(chars, i + 1, '/')
    } else if c == '\\' && i + 1 < chars.len() {
        skip_delimited(chars, i + 2, chars[i + 1])
    } else {
        return None;
    };
    // Regex flags `I` and `M`.
    Some(
        end + chars[end..]
            .iter()
            .take_while(|c| matches!(c, 'I' | 'M'))
            .count(),
    )
}

/// Reads the command at `chars[i]`: the index after it, or why it is a hazard.
fn script_command(chars: &[char], i: usize) -> Result<usize, String> {
    let n = chars.len();
    match chars[i] {
        '#' => Ok(i + chars[i..].iter().take_while(|c| **c != '\n').count()),
        'e' => Err("the sed `e` command runs a shell command".into()),
        'w' | 'W' => Err("the sed `w` command writes a file".into()),
        c @ ('r' | 'R' | 'a' | 'i' | 'c' | ':' | 'b' | 't' | 'T') => {
            // Text or file name or label up to the end of the line (labels also end at `;`).
            let stop_at_semicolon = matches!(c, 'b' | 't' | 'T');
            let mut j = i + 1;
            while j < n && chars[j] != '\n' && !(stop_at_semicolon && chars[j] == ';') {
                j += 1;
            }
            Ok(j)
        }
        c @ ('s' | 'y') => substitution(chars, i, c == 's'),
        'q' | 'Q' | 'l' | 'L' => {
            let digits = chars[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit() || **c == ' ');
            Ok(i + 1 + digits.count())
        }
        '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {
            Ok(i + 1)
        }
        other => Err(format!("unknown sed command `{other}`")),
    }
}

/// `s/REGEX/REPLACEMENT/FLAGS` or `y/SOURCE/DEST/` at `chars[i]`.
fn substitution(chars: &[char], i: usize, with_flags: bool) -> Result<usize, String> {
    let Some(&delim) = chars.get(i + 1) else {
        return Err("incomplete sed `s` command".into());
    };
    if delim == '\n' || delim == '\\' {
        return Err("unusual sed `s` delimiter".into());
    }
    let end = skip_delimited(chars, i + 2, delim);
    let end = skip_delimited(chars, end, delim);
    if with_flags {
        substitution_flags(chars, end)
    } else {
        Ok(end)
    }
}

/// The flags of `s` from `chars[j]`: `e` runs the result, `w` writes a file.
fn substitution_flags(chars: &[char], mut j: usize) -> Result<usize, String> {
    while j < chars.len() && !matches!(chars[j], ';' | '\n' | '}') {
        match chars[j] {
            'e' => return Err("the sed `s///e` flag runs the result as a command".into()),
            'w' => return Err("the sed `s///w` flag writes a file".into()),
            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | ' ' | '\t' => {}
            d if d.is_ascii_digit() => {}
            other => return Err(format!("unknown sed `s` flag `{other}`")),
        }
        j += 1;
    }
    Ok(j)
}

/// Skips a part ending at `delim` (backslash escapes it), starting at `chars[i]` after the
/// opening delimiter; returns the index after the closing one (the end at a newline, unless
/// the delimiter is one).
fn skip_delimited(chars: &[char], mut i: usize, delim: char) -> usize {
    let n = chars.len();
    while i < n {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == delim {
            return i + 1;
        }
        if chars[i] == '\n' && delim != '\n' {
            return n;
        }
        i += 1;
    }
    n
}
