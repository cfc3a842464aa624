#!/usr/bin/env bash
# The README's "Use it in your project", done as a new user would: a scratch
# crate whose Cargo.toml is the README's snippet (with the path pointed at
# this checkout) and whose src/main.rs is the README's first example, built
# with cargo from nothing and run (on the GPU if there is one, else on the
# interpreter), with docs/language.md's first example (its kernel and host
# lines) as a second binary. Fails if the README's instructions or that
# example stop working.
#
# Kept out of scripts/test.sh because it builds tlx a second time (its own
# target directory and profile, as a user's crate has): about 80 s on 2
# cores. CI runs it after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
scratch="$repo/target/readme-project"
rm -rf "$scratch"
mkdir -p "$scratch/src"
python3 - "$repo/README.md" "$scratch" "$repo" <<'EOF'
import pathlib, re, sys
readme, scratch, repo = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2]), sys.argv[3]
blocks = re.findall(r"```(\w+)\n(.*?)```", readme, re.S)
main = next((b for lang, b in blocks if lang == "rust" and "fn main" in b), None)
section = readme.split("## Use it in your project", 1)
toml = re.search(r"```toml\n(.*?)```", section[1], re.S) if len(section) == 2 else None
if main is None or toml is None:
    sys.exit("tlx: the README has no example with `fn main` or no toml block under 'Use it in your project'")
snippet = toml.group(1)
if 'path = "../tlx-rs"' not in snippet:
    sys.exit("tlx: the README's dependency line no longer says path = \"../tlx-rs\"; update this script")
# `[workspace]`: the crate lies under this checkout's target/, and is its own
# workspace, as a user's crate is.
manifest = '[package]\nname = "readme-project"\nversion = "0.1.0"\nedition = "2021"\n\n[workspace]\n\n'
manifest += snippet.replace('path = "../tlx-rs"', 'path = "%s"' % repo)
(scratch / "Cargo.toml").write_text(manifest)
(scratch / "src" / "main.rs").write_text(main)
# The language page's first example, kernel and host lines, as a second
# binary: its buffers are made on its device right after the page makes it,
# as its comment says they are.
page = pathlib.Path(repo, "docs", "language.md").read_text()
first = re.search(r"```rust\n(.*?)```", page, re.S)
if first is None or "// host side" not in first.group(1):
    sys.exit("tlx: docs/language.md's first example no longer has a `// host side` part; update this script")
kernel, host = first.group(1).split("// host side", 1)
buffers = """let x = dev.upload(&vec![1.0f32; n])?;
let y = dev.upload(&vec![2.0f32; n])?;
let out = dev.alloc::<f32>(n)?;"""
lines = ("// host side" + host).splitlines()
made = [i for i, line in enumerate(lines) if line.startswith("let dev =")]
if len(made) != 1:
    sys.exit("tlx: docs/language.md's first example no longer makes its device in one `let dev =` line; update this script")
lines[made[0] + 1:made[0] + 1] = buffers.splitlines()
host = "\n".join("    " + line for line in lines)
(scratch / "src" / "bin").mkdir()
(scratch / "src" / "bin" / "language_page.rs").write_text(kernel + """
fn main() -> Result<(), tlx::Error> {
    let n: usize = 4096;
""" + host + """
    assert!(out.download()?.iter().all(|&v| v == 3.0));
    Ok(())
}
""")
EOF
# The checkout's lock file: the same dependency versions the tests used, and
# no network needed for them.
cp Cargo.lock "$scratch/"
echo "tlx: building the README's project in $scratch"
start=$SECONDS
(cd "$scratch" && cargo build --offline --quiet)
echo "tlx: built in $((SECONDS - start)) s; running it"
"$scratch/target/debug/readme-project"
"$scratch/target/debug/language_page"
echo "tlx: the README's project and docs/language.md's first example build and run"
