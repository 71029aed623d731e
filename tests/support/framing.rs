//! A strict reader of framed peer text (docs/MCP.md, "How peer text is framed"), as
//! an end-to-end test checks what an agent was shown.

/// One framed block: the line above its opening fence and its body lines, each with
/// the `| ` prefix removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The header line (the line before `<<<msg-…`; empty at the start of the text).
    pub header: String,
    /// The fence name, `msg-<nonce>`.
    pub fence: String,
    /// The body lines, prefix removed (escapes left as shown).
    pub lines: Vec<String>,
}

impl Block {
    /// The body lines joined with `\n`.
    pub fn body(&self) -> String {
        self.lines.join("\n")
    }
}

/// Every block of `text`. Fails if a block is not closed by its own fence or a body
/// line lacks the prefix.
pub fn blocks(text: &str) -> anyhow::Result<Vec<Block>> {
    let mut out = Vec::new();
    let mut prev = "";
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        let Some(fence) = line.strip_prefix("<<<") else {
            prev = line;
            continue;
        };
        anyhow::ensure!(
            fence.starts_with("msg-") && fence.len() == 20,
            "bad fence {line:?}"
        );
        let close = format!("{fence}>>>");
        let mut body = Vec::new();
        loop {
            let l = lines
                .next()
                .ok_or_else(|| anyhow::anyhow!("block {fence} is not closed"))?;
            if l == close {
                break;
            }
            let content = match l.strip_prefix("| ") {
                Some(c) => c,
                None if l == "|" => "",
                None => anyhow::bail!("body line without the prefix: {l:?}"),
            };
            body.push(content.to_owned());
        }
        out.push(Block {
            header: prev.to_owned(),
            fence: fence.to_owned(),
            lines: body,
        });
        prev = "";
    }
    Ok(out)
}

/// The only block of `text` (a channel notification's content).
pub fn only_block(text: &str) -> anyhow::Result<Block> {
    let mut all = blocks(text)?;
    anyhow::ensure!(all.len() == 1, "{} blocks in {text:?}", all.len());
    Ok(all.remove(0))
}

/// The lines of `text` outside every block that look like a message header.
pub fn header_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside: Option<String> = None;
    for line in text.split('\n') {
        match &inside {
            Some(close) if line == close => inside = None,
            Some(_) => {}
            None => {
                if let Some(f) = line.strip_prefix("<<<") {
                    inside = Some(format!("{f}>>>"));
                } else if line.starts_with("message ") && line.ends_with("(verified sender):") {
                    out.push(line.to_owned());
                }
            }
        }
    }
    out
}
