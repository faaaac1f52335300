//! Confirmation for destructive commands: ask on a terminal, refuse without one.

use std::io::{BufRead, IsTerminal, Write};

use super::exit::{CliError, REFUSED};

/// Ask `question`; on a `protected` profile the user must type `queue` exactly.
pub fn confirm(question: &str, queue: &str, protected: bool) -> Result<(), CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::new(
            REFUSED,
            "refusing without --yes: standard input is not a terminal to confirm on",
        ));
    }
    let mut err = std::io::stderr().lock();
    let prompt = if protected {
        format!("{question}\nThis profile is protected: type the queue name to confirm: ")
    } else {
        format!("{question} [y/N] ")
    };
    let _ = err.write_all(prompt.as_bytes());
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::new(REFUSED, format!("cannot read the answer: {e}")))?;
    let a = answer.trim();
    let ok = if protected {
        a == queue
    } else {
        matches!(a, "y" | "Y" | "yes" | "YES")
    };
    if ok {
        Ok(())
    } else {
        Err(CliError::new(REFUSED, "not confirmed; nothing was changed"))
    }
}
