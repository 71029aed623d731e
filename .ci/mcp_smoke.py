#!/usr/bin/env python3
"""Talks to `interlink-p2p mcp` over stdio the way an agent host does, for a binary that
runs through a wrapper (Wine): initialize, tools/list, a whoami call, then the end of
stdin, after which the server must exit by itself.

    mcp_smoke.py COMMAND...      exit 0 when every step answered; the reason otherwise
Every stdout line must be JSON-RPC: anything else there is a failure."""
import json
import subprocess
import sys
import threading
import queue

TIMEOUT = 60


def main() -> int:
    proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8")
    lines: "queue.Queue[str | None]" = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()

    def send(msg: dict) -> None:
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()

    def reply(want: int) -> dict:
        while True:
            line = lines.get(timeout=TIMEOUT)
            if line is None:
                raise RuntimeError(f"the server closed stdout before answering {want}")
            msg = json.loads(line)  # anything but JSON on stdout fails here
            if msg.get("jsonrpc") != "2.0":
                raise RuntimeError(f"not JSON-RPC on stdout: {line!r}")
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"request {want}: {msg['error']}")
                return msg["result"]

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "mcp-smoke", "version": "0"}}})
        init = reply(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = [t["name"] for t in reply(2)["tools"]]
        if "send_message" not in tools:
            raise RuntimeError(f"no send_message among the tools: {tools}")
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "whoami", "arguments": {}}})
        who = reply(3)
        text = "".join(c.get("text", "") for c in who.get("content", []))
        if who.get("isError") or "session" not in text:
            raise RuntimeError(f"whoami: {who}")
        proc.stdin.close()
        code = proc.wait(timeout=TIMEOUT)
        if code != 0:
            raise RuntimeError(f"exit status {code} after the end of stdin")
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        proc.kill()
        sys.stderr.write(f"mcp smoke: {e}\nserver stderr (tail):\n{''.join(err[-20:])}\n")
        return 1
    name = init.get("serverInfo", {}).get("name", "?")
    print(f"mcp smoke: {name} answered initialize, tools/list ({len(tools)} tools), whoami, "
          f"and exited at the end of stdin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
