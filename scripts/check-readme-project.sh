#!/usr/bin/env bash
# The README's "Use it in your project", done as a new user would: a scratch
# crate whose Cargo.toml is the README's snippet (with the path pointed at
# this checkout) and whose src/main.rs is the README's first example, built
# with cargo from nothing and run (on the GPU if there is one, else on the
# interpreter). Fails if the README's instructions stop working.
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
EOF
# The checkout's lock file: the same dependency versions the tests used, and
# no network needed for them.
cp Cargo.lock "$scratch/"
echo "tlx: building the README's project in $scratch"
start=$SECONDS
(cd "$scratch" && cargo build --offline --quiet)
echo "tlx: built in $((SECONDS - start)) s; running it"
"$scratch/target/debug/readme-project"
echo "tlx: the README's project builds and runs"
