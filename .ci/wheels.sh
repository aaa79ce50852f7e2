#!/usr/bin/env bash
# Install the way a user of the published packages does: build every distribution with
# `make dist`, install the meta distribution with its extras into a fresh virtual
# environment from dist/ (dependencies from the configured package indexes), and smoke-test
# the installed commands outside the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PYTHON=${PYTHON:-python3}
EXTRAS=${PRISM_WHEEL_EXTRAS:-sql,postgres,redis,packs,a2a,mcp}

make dist

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
bin="$work/venv/bin"
step() { printf '\n== %s\n' "$*"; }

step "pip install --find-links dist 'prism-runtime[$EXTRAS]' (fresh venv)"
timeout 600 "$bin/python" -m pip install --quiet --disable-pip-version-check \
    --find-links "$root/dist" "prism-runtime[$EXTRAS]"

cd "$work"
step "installed from wheels, not from the checkout"
"$bin/python" - "$root" <<'PY'
import sys
from importlib.metadata import distribution
from pathlib import Path

import prism_cli
import prism_core
import prism_mcp
import prism_packs
import prism_store_redis
import prism_store_sql

checkout = Path(sys.argv[1]).resolve()
for module in (prism_core, prism_cli, prism_store_sql, prism_store_redis, prism_packs, prism_mcp):
    where = Path(module.__file__).resolve()
    assert checkout not in where.parents, f"{module.__name__} comes from the checkout: {where}"
    print(f"{module.__name__}: {where.parent}")
for name in ("prism-runtime", "prism-runtime-core", "prism-runtime-cli", "prism-runtime-sql",
             "prism-runtime-redis", "prism-runtime-packs", "prism-runtime-mcp"):
    dist = distribution(name)
    assert dist.read_text("direct_url.json") is None or "editable" not in dist.read_text(
        "direct_url.json"
    ), f"{name} is an editable install"
    print(f"{name} {dist.version}")
# The console script is the CLI distribution's; the kernel declares none.
scripts = {d.metadata["Name"]: [e.name for e in d.entry_points if e.group == "console_scripts"]
           for d in (distribution("prism-runtime-core"), distribution("prism-runtime-cli"))}
assert scripts == {"prism-runtime-core": [], "prism-runtime-cli": ["prism"]}, scripts
print(f"console scripts: {scripts}")
PY

step "prism_mcp: a tool of an MCP server started over stdio, from the installed wheels"
timeout 120 "$bin/python" - <<'PY'
import sys

import anyio
from prism_core import ToolExecutionContext
from prism_mcp import MCPServerStdio, mcp_tools

SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("smoke")

@server.tool(structured_output=False)
def shout(text: str) -> str:
    return text.upper()

server.run("stdio")
"""


async def main() -> None:
    async with mcp_tools(MCPServerStdio(sys.executable, ["-c", SERVER])) as tools:
        (shout,) = tools
        context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c", tool_name="shout")
        answer = await shout.execute({"text": "installed"}, context)
    assert answer == "INSTALLED", answer
    print("shout:", answer)


anyio.run(main)
PY

step "prism --help"
help=$(timeout 60 "$bin/prism" --help)
echo "$help"
for name in demo chat runs plugins; do
    grep -q "^    $name " <<<"$help" || { echo "prism --help does not list $name" >&2; exit 1; }
done

step "prism --version"
version=$(timeout 60 "$bin/prism" --version)
echo "$version"
expected="prism-runtime $("$bin/python" -c 'from importlib.metadata import version; print(version("prism-runtime-core"))')"
[ "$version" = "$expected" ] || { echo "expected '$expected'" >&2; exit 1; }

step "prism plugins"
plugins=$(timeout 60 "$bin/prism" plugins)
echo "$plugins"
for name in sql redis packs; do
    grep -q "^$name " <<<"$plugins" || { echo "plugin $name is not listed" >&2; exit 1; }
done

if [[ ",$EXTRAS," != *",server,"* && ",$EXTRAS," != *",all,"* ]]; then
    step "prism serve without the server names what to install"
    set +e
    out=$(timeout 60 "$bin/prism" serve --store memory:// --app x:y 2>&1)
    code=$?
    set -e
    echo "$out"
    [ "$code" -eq 2 ] || { echo "prism serve exited $code, expected 2" >&2; exit 1; }
    grep -qF "pip install 'prism-runtime[server]'" <<<"$out" \
        || { echo "prism serve did not name the server extra" >&2; exit 1; }
fi

step "prism demo (SQLite in a temporary folder)"
timeout 300 "$bin/prism" demo --dir "$work/demo" --no-color

step "python -m prism_store_sql migrate, then status"
timeout 60 "$bin/python" -m prism_store_sql migrate "sqlite:///$work/app.db"
timeout 60 "$bin/python" -m prism_store_sql status "sqlite:///$work/app.db"
set +e
timeout 60 "$bin/python" -m prism_store_sql status "sqlite:///$work/absent.db"
code=$?
set -e
[ "$code" -eq 3 ] || { echo "status of a missing file exited $code, expected 3" >&2; exit 1; }
[ ! -e "$work/absent.db" ] || { echo "status created $work/absent.db" >&2; exit 1; }

if [ "${PRISM_REQUIRE_SERVICES:-}" = 1 ]; then
    step "python -m prism_store_sql status on PostgreSQL (asyncpg from the [postgres] extra)"
    set +e
    timeout 60 "$bin/python" -m prism_store_sql status \
        "${PRISM_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/test}" \
        --table-prefix "prism_wheels_$$_"
    code=$?
    set -e
    [ "$code" -eq 2 ] || { echo "status on PostgreSQL exited $code, expected 2" >&2; exit 1; }
fi

if [[ ",$EXTRAS," == *",a2a,"* ]]; then
    step "prism_a2a from the wheels serves an agent card (the [a2a] extra)"
    timeout 120 "$bin/python" - "$root" <<'PY'
import sys
from pathlib import Path

import anyio
import httpx

import prism_a2a
from prism_core import create_agent, create_memory_checkpoint_store, create_memory_session_store

assert Path(sys.argv[1]).resolve() not in Path(prism_a2a.__file__).resolve().parents
agent = create_agent(id="smoke", model={"provider": "mock", "model": "demo"})
app = prism_a2a.create_a2a_app(
    agent,
    definition_revision="r1",
    checkpoints=create_memory_checkpoint_store(),
    sessions=create_memory_session_store(),
    url="http://127.0.0.1:9/",
)



async def read_card():
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return (await client.get("/.well-known/agent-card.json")).json()


card = anyio.run(read_card)
assert card["name"] == "smoke" and card["capabilities"]["streaming"] is True, card
print(f"prism_a2a: {Path(prism_a2a.__file__).parent}, card {card['name']!r}")
PY
fi

step "wheels: all checks passed"
