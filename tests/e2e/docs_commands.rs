//! Every `interlink-p2p` command line README.md and docs/CLI.md show in a code block,
//! run against the built binary, so the docs and the binary stay in agreement.
//!
//! A synopsis (a line with placeholders: `<...>`, `[...]`, `…`, `NAME`, `claude|codex`)
//! is checked by `interlink-p2p <subcommand> --help`. A concrete line runs as a user
//! would type it, offline: a fresh home per code block (INTERLINK_HOME, HOME, XDG and
//! the agent hosts' config directories all inside it), no mDNS, no tailnet, no
//! well-known port, stdin closed, a deadline. What each subcommand may do on a fresh
//! home is fixed in [`EXPECTED`]; a subcommand not listed there fails the test, so a new
//! doc line forces a decision.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    path::Path,
    time::{Duration, Instant},
};

use interlink_e2e::process::command;
use interlink_testkit::process::{Child, Options, run_with_input};

/// The longest any one command line may take.
const DEADLINE: Duration = Duration::from_secs(20);

/// The exit status of a usage error (`EXIT_USAGE` in main.rs): clap's, or one the
/// command raises for a malformed argument. A doc line never earns it.
const EXIT_USAGE: i32 = 64;

/// What a concrete doc line of a subcommand may do on a fresh home.
#[derive(Debug)]
enum Expect {
    /// Exits 0, or with one of these statuses when its output (stdout and stderr) says
    /// the given reason, unless a session its block started (`… &`) is running.
    Exits(&'static [(i32, &'static str)]),
    /// Keeps running (a session, an invite waiting for its guest): it must print this
    /// stdout line (`None`: any line) and still run; then it is stopped, or kept until
    /// the end of its code block when the line ends in `&`.
    Serves(Option<&'static str>),
}

/// Subcommand (the first words of a doc line) → what its concrete lines may do. The
/// longest match wins. Every entry must be used by some doc line.
const EXPECTED: &[(&str, Expect)] = &[
    // Relays, sessions and a sleeping laptop, all on 127.0.0.1 with throwaway homes.
    ("demo", Expect::Exits(&[])),
    ("run", Expect::Serves(Some("ready"))),
    ("invite", Expect::Serves(None)),
    (
        "send",
        Expect::Exits(&[
            // The docs' recipients (bob, alice, group:team) are no peers of a fresh home.
            (1, "is not a peer"),
            (1, "no group"),
            // `--to self` with none of the user's other sessions running.
            (1, "cannot route to self"),
        ]),
    ),
    ("inbox", Expect::Exits(&[])),
    // A fresh home has no messages.
    ("search", Expect::Exits(&[(1, "no message matched")])),
    // The page's server: it prints its address and serves until stopped.
    ("ui", Expect::Serves(None)),
    // Into the fresh home's own Claude Code configuration and data directory.
    ("install", Expect::Exits(&[])),
    ("peers", Expect::Exits(&[])),
    // Claude Code's edit hook with no input (stdin closed): nothing to say.
    ("claims hook", Expect::Exits(&[])),
    // The docs probe addresses where nothing listens: "unreachable" is exit status 2.
    ("probe", Expect::Exits(&[(2, "unreachable")])),
];

/// A command line of a doc: where it is, its arguments after `interlink-p2p`, and how
/// the shell line runs it.
#[derive(Debug)]
struct DocLine {
    /// `README.md:140`.
    at: String,
    /// Which code block of the file it is in (lines of one block share a home).
    block: usize,
    /// The line as written (continuations joined).
    text: String,
    args: Vec<Word>,
    /// Ends in `&`: kept running while the rest of its block runs.
    background: bool,
    /// What the line pipes into it (`printf '…' | interlink-p2p …`).
    stdin: Option<String>,
}

/// A shell word, and whether any of it was quoted (quoted text is never a placeholder).
#[derive(Debug, Clone)]
struct Word {
    text: String,
    quoted: bool,
}

impl Word {
    fn new(quoted: bool) -> Self {
        Self {
            text: String::new(),
            quoted,
        }
    }
}

/// A shell token: a word or an operator (`|`, `&&`, `||`, `;`, `&`).
#[derive(Debug)]
enum Token {
    Word(Word),
    Op(&'static str),
}

/// Just enough of the shell for the docs' examples: quotes, backslashes, the operators
/// above and `#` comments; no expansions, no redirections. A `|` or `&` inside a word
/// (`claude|codex`) is text, as a synopsis means it.
fn tokens(line: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut word: Option<Word> = None;
    let flush = |word: &mut Option<Word>, out: &mut Vec<Token>| {
        if let Some(w) = word.take() {
            out.push(Token::Word(w));
        }
    };
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                let w = word.get_or_insert(Word::new(true));
                w.quoted = true;
                while let Some(q) = chars.next() {
                    match q {
                        _ if q == c => break,
                        '\\' if c == '"' && matches!(chars.peek(), Some('"' | '\\')) => {
                            w.text.extend(chars.next());
                        }
                        _ => w.text.push(q),
                    }
                }
            }
            '\\' => {
                word.get_or_insert(Word::new(false))
                    .text
                    .extend(chars.next());
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            ';' => {
                flush(&mut word, &mut out);
                out.push(Token::Op(";"));
            }
            '#' if word.is_none() => break,
            '|' | '&' if word.is_none() => {
                let op = match (c, chars.peek()) {
                    ('|', Some('|')) => "||",
                    ('&', Some('&')) => "&&",
                    ('|', _) => "|",
                    _ => "&",
                };
                if op.len() == 2 {
                    chars.next();
                }
                out.push(Token::Op(op));
            }
            c => word.get_or_insert(Word::new(false)).text.push(c),
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The text a pipeline's first command writes, for the docs' `printf '…' |` and
/// `echo … |`.
fn piped_text(words: &[Word]) -> Option<String> {
    let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    match texts.as_slice() {
        ["printf", format] => Some(format.replace("\\n", "\n")),
        ["echo", rest @ ..] => Some(format!("{}\n", rest.join(" "))),
        _ => None,
    }
}

/// The arguments after `interlink-p2p` if `words` run it: `interlink-p2p ARGS` or
/// `cargo run -p interlink-p2p -- ARGS` (run here as the built binary, not by cargo).
fn p2p_args(words: &[Word]) -> Option<Vec<Word>> {
    let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    match texts.as_slice() {
        ["interlink-p2p", ..] => Some(words[1..].to_vec()),
        ["cargo", "run", rest @ ..] if rest.windows(2).any(|w| w == ["-p", "interlink-p2p"]) => {
            let dashes = texts.iter().position(|t| *t == "--")?;
            Some(words[dashes + 1..].to_vec())
        }
        _ => None,
    }
}

/// A line's command after a prompt (`$ `, `alice$ `), if it has one.
fn after_prompt(line: &str) -> Option<&str> {
    let line = line.trim_start();
    let at = line.find("$ ")?;
    line[..at]
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        .then(|| &line[at + 2..])
}

/// The `interlink-p2p` command lines of `doc`'s fenced code blocks. In a block that
/// shows prompts, only prompted lines are commands (the rest is their output); lines
/// ending in `\` continue on the next.
fn doc_lines(name: &str, doc: &str) -> Vec<DocLine> {
    let mut out = Vec::new();
    let mut block: Option<Vec<(usize, String)>> = None;
    let mut blocks = 0;
    for (n, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            match block.take() {
                None => block = Some(Vec::new()),
                Some(lines) => {
                    blocks += 1;
                    out.extend(block_lines(name, blocks, &lines));
                }
            }
        } else if let Some(lines) = &mut block {
            match lines.last_mut() {
                Some((_, last)) if last.ends_with('\\') => {
                    last.pop();
                    last.push(' ');
                    last.push_str(line.trim_start());
                }
                _ => lines.push((n + 1, line.trim_end().to_owned())),
            }
        }
    }
    assert!(block.is_none(), "{name}: a code block is not closed");
    out
}

/// The command lines of the `block`th code block of the doc `name`, given as (line
/// number, line) with continuations joined.
fn block_lines(name: &str, block: usize, lines: &[(usize, String)]) -> Vec<DocLine> {
    let prompted = lines.iter().any(|(_, l)| after_prompt(l).is_some());
    let mut out = Vec::new();
    for (n, line) in lines {
        let Some(shell) = (if prompted {
            after_prompt(line)
        } else {
            Some(line.as_str())
        }) else {
            continue;
        };
        // Split into commands at the operators; a command piped into ours is its stdin.
        let mut piped: Option<String> = None;
        let mut words = Vec::new();
        let mut rest = tokens(shell).into_iter();
        loop {
            let op = match rest.next() {
                Some(Token::Word(w)) => {
                    words.push(w);
                    continue;
                }
                Some(Token::Op(op)) => Some(op),
                None => None,
            };
            if let Some(args) = p2p_args(&words) {
                out.push(DocLine {
                    at: format!("{name}:{n}"),
                    block,
                    text: line.trim().to_owned(),
                    args,
                    background: op == Some("&"),
                    stdin: piped.take(),
                });
            }
            piped = (op == Some("|")).then(|| piped_text(&words)).flatten();
            words.clear();
            if op.is_none() {
                break;
            }
        }
    }
    out
}

/// A synopsis's stand-in for a value rather than a value: `<code>`, `[--json]`, `…`,
/// `NAME`, `MEMBER...`, `claude|codex`, `(TEXT | --stdin)`.
fn is_placeholder(word: &Word) -> bool {
    let t = &word.text;
    !word.quoted
        && (t.contains(['<', '>', '[', ']', '(', ')', '|', '…'])
            || t.contains("...")
            || (t.len() >= 2
                && t.chars().any(|c| c.is_ascii_uppercase())
                && t.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-' || c == '_')))
}

/// The subcommand words a line starts with (`peer add` of `peer add NAME KEY`).
fn subcommand(args: &[Word]) -> Vec<&str> {
    args.iter()
        .take_while(|w| {
            !w.quoted
                && w.text.starts_with(|c: char| c.is_ascii_lowercase())
                && w.text
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .map(|w| w.text.as_str())
        .collect()
}

/// The [`EXPECTED`] entry whose words begin `words` (the longest).
fn expected_for(words: &[&str]) -> Option<(usize, &'static Expect)> {
    EXPECTED
        .iter()
        .enumerate()
        .filter(|(_, (key, _))| {
            let key: Vec<&str> = key.split(' ').collect();
            words.starts_with(&key)
        })
        .max_by_key(|(_, (key, _))| key.len())
        .map(|(i, (_, e))| (i, e))
}

/// `interlink-p2p` with `home` as every directory it or an agent host might write,
/// and nothing that would leave this machine.
fn p2p_in<'a>(home: &Path, args: impl IntoIterator<Item = &'a str>) -> std::process::Command {
    let mut cmd = command(home, &[("INTERLINK_MDNS", "0"), ("INTERLINK_TAILNET", "0")]).unwrap();
    for var in [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
    ] {
        cmd.env(var, home);
    }
    // `ui` opens no browser on the developer's screen.
    cmd.env_remove("INTERLINK_RELAY")
        .env_remove("INTERLINK_NAME")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    cmd.args(args);
    cmd
}

/// How the lines of a doc fared.
#[derive(Debug, Default)]
struct Tally {
    run: usize,
    help: usize,
    /// What each line did: `README.md:141 send: exit 0`.
    outcomes: Vec<String>,
    problems: Vec<String>,
    used: std::collections::BTreeSet<usize>,
}

/// Runs (or checks the `--help` of) every command line of the doc at `path`.
fn check_doc(path: &str, tally: &mut Tally) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join(path)).unwrap();
    let lines = doc_lines(path, &doc);
    let mut homes: std::collections::BTreeMap<usize, tempfile::TempDir> = Default::default();
    // Background sessions (`… &`), stopped when their block ends (on drop).
    let mut background: Vec<(usize, Child)> = Vec::new();
    for line in &lines {
        background.retain(|(block, _)| *block == line.block);
        let home = homes
            .entry(line.block)
            .or_insert_with(|| tempfile::tempdir().unwrap())
            .path()
            .to_owned();
        let words = subcommand(&line.args);
        let fail = |what: String| format!("{}: `{}`: {what}", line.at, line.text);
        if words.is_empty() {
            tally.problems.push(fail("no subcommand".into()));
            continue;
        }
        if line.args.iter().any(is_placeholder) {
            // A synopsis: the subcommand must exist and parse.
            let out = run_with_input(
                p2p_in(&home, words.iter().copied().chain(["--help"])),
                None,
                Instant::now() + DEADLINE,
            )
            .unwrap();
            if !out.status.success() || !out.stdout.contains("Usage:") {
                tally.problems.push(fail(format!(
                    "`interlink-p2p {} --help` exits {:?}: {}",
                    words.join(" "),
                    out.status.code(),
                    out.stderr.trim()
                )));
            }
            tally.help += 1;
            tally
                .outcomes
                .push(format!("{} {} --help", line.at, words.join(" ")));
            continue;
        }
        let Some((entry, expect)) = expected_for(&words) else {
            tally.problems.push(fail(format!(
                "`{}` is in no entry of EXPECTED: say what it may do on a fresh home (or, \
                 if this is output, show the block's commands with `$ ` prompts)",
                words.join(" ")
            )));
            continue;
        };
        tally.used.insert(entry);
        match expect {
            Expect::Exits(allowed) => {
                tally.run += 1;
                let began = Instant::now();
                let out = run_with_input(
                    p2p_in(&home, line.args.iter().map(|w| w.text.as_str())),
                    line.stdin.as_deref(),
                    Instant::now() + DEADLINE,
                );
                let out = match out {
                    Ok(out) => out,
                    Err(e) => {
                        tally.problems.push(fail(format!("{e}")));
                        continue;
                    }
                };
                let code = out.status.code().unwrap_or(-1);
                let said = format!("{}\n{}", out.stdout, out.stderr);
                // Beside a session the block started (`… &`) the line is a walkthrough's
                // step, with no fresh-home excuse.
                let ok = code == 0
                    || background.is_empty()
                        && allowed
                            .iter()
                            .any(|(c, why)| *c == code && said.contains(why));
                tally.outcomes.push(format!(
                    "{} {}: exit {code} after {:.1?}",
                    line.at,
                    words.join(" "),
                    began.elapsed()
                ));
                if !ok || code == EXIT_USAGE {
                    tally.problems.push(fail(format!(
                        "exit status {code}; stdout:\n{}\nstderr:\n{}",
                        out.stdout.trim(),
                        out.stderr.trim()
                    )));
                }
            }
            Expect::Serves(ready) => {
                tally.run += 1;
                let stderr = home.join(format!("stderr-{}", line.at.replace(['/', ':'], "-")));
                let mut child = Child::spawn_with(
                    p2p_in(&home, line.args.iter().map(|w| w.text.as_str())),
                    Options::default().with_stderr_file(stderr),
                )
                .unwrap();
                let deadline = Instant::now() + DEADLINE;
                let mut up = false;
                while let Ok(Some(out)) = child.next_line(deadline) {
                    if ready.is_none_or(|r| out == r) {
                        up = true;
                        break;
                    }
                }
                if !up || !matches!(child.try_wait(), Ok(None)) {
                    let err = child.stderr();
                    tally.problems.push(fail(format!(
                        "did not start and keep running (waiting for {ready:?}); stderr:\n{}",
                        err.trim()
                    )));
                    continue;
                }
                tally.outcomes.push(format!(
                    "{} {}: running{}",
                    line.at,
                    words.join(" "),
                    if line.background {
                        ", kept for its block"
                    } else {
                        ""
                    }
                ));
                if line.background {
                    background.push((line.block, child));
                }
            }
        }
    }
}

/// README.md's and CLI.md's command lines agree with the binary: every synopsis's
/// subcommand has a `--help`, and every example runs as [`EXPECTED`] says.
#[test]
fn the_command_lines_of_the_readme_and_cli_md_run() {
    let started = Instant::now();
    let mut report = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for path in ["README.md", "docs/CLI.md"] {
        let mut tally = Tally::default();
        check_doc(path, &mut tally);
        assert!(
            tally.run + tally.help > 0,
            "{path}: no command line found in its code blocks"
        );
        report.push(format!(
            "{path}: {} run, {} --help only{}",
            tally.run,
            tally.help,
            tally
                .outcomes
                .iter()
                .map(|s| format!("\n  {s}"))
                .collect::<String>()
        ));
        used.extend(tally.used);
        problems.extend(tally.problems);
    }
    for (i, (key, _)) in EXPECTED.iter().enumerate() {
        if !used.contains(&i) {
            problems.push(format!(
                "EXPECTED has `{key}`, which no doc line runs: remove it"
            ));
        }
    }
    println!("{} (in {:.1?})", report.join("\n"), started.elapsed());
    assert!(
        problems.is_empty(),
        "the docs' command lines and the binary disagree:\n{}",
        problems.join("\n")
    );
}
